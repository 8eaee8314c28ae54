"""Study S's paper setting and headline: what scale a run is, and whether the paper's numbers
may be printed beside it (SPEC S.1–S.3, issue 8 "toy scale printed as reproduction").

The paper's headline — 2L: r=0.5 → 0% of seeds generalize, r=0.9 → 77%; 1L: r=0.5 → 33%,
r=0.9 → 0% — was measured at n = 10, V = 64, N = 16,384, full-batch AdamW at lr 1e-3 for
15,000 epochs, d_model 64, d_ff 128, on sum mod 2 with the max shortcut (the setting
``recipes/paper.yaml`` reads from the study). A cell gets the paper's
number beside it only when every run in it has these config values — checked from the values,
never from a preset's name, so a user's own run at the paper's setting gets the column too.
Heads and weight decay are not compared: the headline does not state them.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

PAPER_S = {"2L": {0.5: 0.0, 0.9: 0.77}, "1L": {0.5: 0.33, 0.9: 0.0}}

# field → the paper's value (batch_size: full batch, see :func:`_full_batch`).
PAPER_SETTING = {"seq_len": 10, "vocab": 64, "n_train": 16384, "batch_size": 0, "epochs": 15000,
                 "lr": 1e-3, "d_model": 64, "d_mlp": 128, "label_mod": 2, "shortcut": "max"}


def _value(row: Mapping, field: str):
    """``row[field]``, or the config default where the frame lacks the column."""
    v = row.get(field) if hasattr(row, "get") else None
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

        return MPSPRunConfig.model_fields[field].default
    return v


def _full_batch(row: Mapping) -> bool:
    return int(_value(row, "batch_size")) in (0, int(_value(row, "n_train")))


def _steps(row: Mapping) -> int:
    """AdamW steps over training: epochs × minibatches per epoch."""
    n, b = int(_value(row, "n_train")), int(_value(row, "batch_size"))
    return int(_value(row, "epochs")) * (1 if _full_batch(row) else -(-n // b))


def _describe(field: str, v) -> str:
    names = {"seq_len": "n = {:,}", "vocab": "V = {:,}", "n_train": "N = {:,}",
             "epochs": "{:,} epochs", "lr": "lr {:g}", "d_model": "d_model {}",
             "d_mlp": "d_ff {}", "label_mod": "k = {}", "shortcut": "{} shortcut"}
    return names[field].format(v)


def differences(row: Mapping) -> list[str]:
    """How one run's config departs from the paper's setting, e.g. ``"n = 6 (paper 10)"``."""
    out = []
    for field, paper in PAPER_SETTING.items():
        if field == "batch_size":
            if not _full_batch(row):
                out.append(f"minibatches of {int(_value(row, field)):,} (paper full batch)")
            continue
        v = _value(row, field)
        same = abs(float(v) - paper) <= 1e-12 * abs(paper) if isinstance(paper, float) else (
            v == paper if isinstance(paper, str) else int(v) == paper)
        if not same:
            out.append(f"{_describe(field, v)} (paper {_describe(field, paper).split()[-1]})"
                       if field not in ("epochs", "shortcut") else
                       f"{_describe(field, v)} (paper {_describe(field, paper)})")
    if not _full_batch(row):
        out.append(f"{_steps(row):,} steps (paper 15,000)")
    return out


def matches_paper(row: Mapping) -> bool:
    """Whether a run's config is the paper's setting (see the module docstring)."""
    return not differences(row)


def run_matches(runs: pd.DataFrame) -> pd.Series:
    """Per run (aligned to ``runs``): at the paper's setting? Non-MPSP runs never are."""
    if runs.empty:
        return pd.Series(False, index=runs.index, dtype=bool)
    task = runs["task"] if "task" in runs.columns else pd.Series("mpsp", index=runs.index)
    return pd.Series([t == "mpsp" and matches_paper(r) for t, (_, r) in
                      zip(task, runs.iterrows(), strict=True)], index=runs.index, dtype=bool)


def describe_scale(runs: pd.DataFrame) -> str:
    """One line: the scale the runs were trained at, e.g. ``"scale: n = 6, V = 6, … — not the
    paper's setting"``, or ``"scale: the paper's setting (…)"``."""
    if runs.empty:
        return "scale: no runs"
    parts = []
    for field in ("seq_len", "vocab", "n_train", "batch_size", "epochs", "lr", "label_mod",
                  "shortcut"):
        values = sorted({_value(r, field) for _, r in runs.iterrows()}, key=str)
        if field == "batch_size":
            full = {_full_batch(r) for _, r in runs.iterrows()}
            parts.append("full batch" if full == {True} else "minibatches of " + "/".join(
                f"{int(v):,}" for v in values if v))
            continue
        parts.append(" / ".join(_describe(field, v) for v in values))
        if field == "epochs":
            steps = sorted({_steps(r) for _, r in runs.iterrows()})
            parts[-1] += f" ({'/'.join(f'{s:,}' for s in steps)} steps)"
    if "seed" in runs.columns and "ratio" in runs.columns:
        seeds = runs.groupby([c for c in ("layers", "heads", "ratio") if c in runs.columns],
                             dropna=False)["seed"].nunique()
        lo, hi = int(seeds.min()), int(seeds.max())
        parts.append(f"{lo} seeds per cell" if lo == hi else f"{lo}–{hi} seeds per cell")
    at_paper = run_matches(runs)
    verdict = ("the paper's setting" if at_paper.all() else
               "not the paper's setting" if not at_paper.any() else "partly the paper's setting")
    return f"scale: {', '.join(parts)} — {verdict}"


def paper_note(runs: pd.DataFrame) -> str | None:
    """None when every run is at the paper's setting; else one line saying the paper column
    is omitted (or kept only for the cells at the setting) and how the setting differs."""
    at_paper = run_matches(runs)
    if at_paper.all() or runs.empty:
        return None
    diffs = list(dict.fromkeys(d for _, r in runs[~at_paper].iterrows() for d in differences(r)))
    head = ("paper column omitted: the setting differs from the paper's" if not at_paper.any()
            else "paper column shown only for cells at the paper's setting; the others differ")
    return f"{head}: {'; '.join(diffs)}"


def paper_rate(paper: dict | None, layers, ratio) -> str:
    """``paper = {"2L": {0.9: 0.77}, …}`` → ``"77%"`` for this cell, else ``"–"``."""
    if not paper or layers is None or ratio is None or pd.isna(layers) or pd.isna(ratio):
        return "–"
    points = paper.get(f"{int(layers)}L", {})
    hit = [v for r, v in points.items() if abs(float(r) - float(ratio)) < 1e-9]
    return f"{hit[0]:.0%}" if hit else "–"


def cell_paper(runs: pd.DataFrame, by: list[str], paper: dict | None) -> list[str] | None:
    """The paper column for a rate table grouped by ``by`` (same row order as
    :func:`rulelab.analysis.stats.rate_table`): the paper's rate where every run of the cell
    is at the paper's setting, ``"≠ setting"`` elsewhere; None when no cell is."""
    at_paper = run_matches(runs)
    if not paper or not at_paper.any():
        return None
    keys = [runs[c] for c in by] if by else [pd.Series(0, index=runs.index)]
    cells = at_paper.groupby(keys, dropna=False, sort=True).all()
    const = {c: runs[c].iloc[0] for c in ("layers", "ratio") if c in runs.columns}
    out = []
    for key, ok in cells.items():
        cell = {**const, **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=False))}
        out.append(paper_rate(paper, cell.get("layers"), cell.get("ratio")) if ok
                   else "≠ setting")
    return out
