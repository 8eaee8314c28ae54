"""Study S's paper setting and headline: what scale a run is, and whether the paper's numbers
may be printed beside it (SPEC S.1–S.3, issue 8 "toy scale printed as reproduction", issue 21
"the gate compares every field").

The paper's headline — 2L: r=0.5 → 0% of seeds generalize, r=0.9 → 77%; 1L: r=0.5 → 33%,
r=0.9 → 0% — is compared at one setting: ``recipes/paper-headline.yaml`` (2 heads, weight
decay 0.1), i.e. every field of :data:`PAPER_SETTING`. A cell gets the paper's number beside
it only when every run in it has these config values — checked from the values, never from a
preset's name, so a user's own run at the setting gets the column too, and a run that differs
in any one field (n_eval 16, no LayerNorm, GELU, 1 head, wd 0.4, …) does not.

What the paper states (SPEC S.1–S.3, ``research/paper1_shortcuts.md`` §2: the summary is all
we have): sum mod 2 with the max shortcut, N = 16,384, d_model 64, d_ff 128, 15,000 epochs of
AdamW. The rest — n, V, val/adv size, heads and weight decay *of the headline* (the paper
sweeps 1–2 heads and wd 0.1–0.4), lr, betas, Adam ε, warm-up, full batch, eval_every,
LayerNorm, ReLU — are our choices (:data:`NOT_STATED`): compared all the same, since each can
change the rate, and listed as "not stated by the paper" in the note beside the column.
Not compared: the cell's own coordinates (``layers``, ``ratio``: :func:`paper_rate` reads the
headline's cell), seeds, and ``transient_threshold`` (it changes no ``generalized`` reading).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

PAPER_S = {"2L": {0.5: 0.0, 0.9: 0.77}, "1L": {0.5: 0.33, 0.9: 0.0}}

# field → the headline setting's value (batch_size: full batch, see :func:`_full_batch`); the
# values of recipes/paper-headline.yaml at weight decay 0.1
# (tests/studies/shortcut_saturation/test_paper_s.py checks).
PAPER_SETTING = {"seq_len": 10, "vocab": 64, "n_train": 16384, "batch_size": 0, "epochs": 15000,
                 "lr": 1e-3, "d_model": 64, "d_mlp": 128, "label_mod": 2, "shortcut": "max",
                 "n_eval": 4096, "heads": 2, "ln": True, "act": "relu", "weight_decay": 0.1,
                 "beta1": 0.9, "beta2": 0.98, "eps": 1e-8, "warmup": 0, "eval_every": 10}
# fields of PAPER_SETTING whose value the paper does not state (module docstring)
NOT_STATED = ("seq_len", "vocab", "n_eval", "heads", "weight_decay", "lr", "beta1", "beta2",
              "eps", "warmup", "batch_size", "eval_every", "ln", "act")


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


# field → (phrase, the short form of the paper's value); bools and names have their own
_PHRASE = {"seq_len": ("n = {:,}", "{:,}"), "vocab": ("V = {:,}", "{:,}"),
           "n_train": ("N = {:,}", "{:,}"), "epochs": ("{:,} epochs", "{:,} epochs"),
           "lr": ("lr {:g}", "{:g}"), "d_model": ("d_model {}", "{}"), "d_mlp": ("d_ff {}", "{}"),
           "label_mod": ("k = {}", "{}"), "shortcut": ("{} shortcut", "{} shortcut"),
           "n_eval": ("val/adv of {:,}", "{:,}"), "heads": ("heads {}", "{}"),
           "weight_decay": ("weight decay {:g}", "{:g}"), "beta1": ("β₁ {:g}", "{:g}"),
           "beta2": ("β₂ {:g}", "{:g}"), "eps": ("Adam ε {:g}", "{:g}"),
           "warmup": ("{:,} warm-up steps", "{:,}"),
           "eval_every": ("eval every {:,} epochs", "{:,}")}
_NAMES = {"relu": "ReLU", "gelu": "GELU", True: "pre-LayerNorm", False: "no LayerNorm"}


def _describe(field: str, v, short: bool = False) -> str:
    if field == "warmup" and not short and int(v) == 0:
        return "no warm-up"
    if field in ("ln", "act"):
        name = _NAMES.get(bool(v) if field == "ln" else v, str(v))
        return name if field == "ln" or short else f"{name} MLP"
    return _PHRASE[field][short].format(v)


def _same(field: str, v, paper) -> bool:
    if isinstance(paper, bool):
        return bool(v) == paper
    if isinstance(paper, float):
        return abs(float(v) - paper) <= 1e-9 * abs(paper)
    return v == paper if isinstance(paper, str) else int(v) == paper


def _source(field: str) -> str:
    """Whose value the setting holds in ``field``: the paper's, or ours where the paper does not
    state one (:data:`NOT_STATED`; study M's gate words it the same way)."""
    return "paper setting" if field in NOT_STATED else "paper"


def differences(row: Mapping) -> list[str]:
    """How one run's config departs from the paper's setting, e.g. ``"N = 2,048 (paper
    16,384)"``, or ``"n = 6 (paper setting 10)"`` for a value the paper does not state."""
    out = []
    for field, paper in PAPER_SETTING.items():
        if field == "batch_size":
            if not _full_batch(row):
                out.append(f"minibatches of {int(_value(row, field)):,} "
                           f"({_source(field)} full batch)")
            continue
        v = _value(row, field)
        if not _same(field, v, paper):
            out.append(f"{_describe(field, v)} "
                       f"({_source(field)} {_describe(field, paper, short=True)})")
    if not _full_batch(row):
        out.append(f"{_steps(row):,} steps (paper 15,000)")
    return out


def not_stated() -> str:
    """``"not stated by the paper …: n = 10, V = 64, …"``: the setting's values that are our
    choices (:data:`NOT_STATED`), for the note beside the paper column."""
    values = ["full batch" if f == "batch_size" else _describe(f, PAPER_SETTING[f])
              for f in NOT_STATED]
    return ("not stated by the paper (the setting's values are our choices, compared all the "
            f"same): {', '.join(values)}")


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
    """None for no runs; else one line: whether the paper column is shown (for every cell, only
    the cells at the paper's setting, or omitted), how the setting differs where it does, and
    which of the setting's values the paper does not state (:func:`not_stated`)."""
    if runs.empty:
        return None
    at_paper = run_matches(runs)
    if at_paper.all():
        return f"paper column: the paper's headline at its setting; {not_stated()}"
    diffs = list(dict.fromkeys(d for _, r in runs[~at_paper].iterrows() for d in differences(r)))
    head = ("paper column omitted: the setting differs from the paper's" if not at_paper.any()
            else "paper column shown only for cells at the paper's setting; the others differ")
    tail = not_stated()
    return f"{head}: {'; '.join(diffs)}. {tail[0].upper()}{tail[1:]}"


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
