"""The sparse-parity reproduction: tables on the terminal, tables and figures as files, and
the lab's full report page with the reproduction's own sections.

``rulelab reproduce sparse-parity --scale quick`` trains ``recipes/quick.yaml`` through the
planner and calls :func:`reproduce`, which reads the lab's two frames (runs, long metrics) and
prints the steps-to-learn table, the fitted exponent and the hidden-progress lead. It writes
``<report>-files/`` (tables as CSV, the two study figures as PNG) and the report page through
the shared writer (:func:`rulelab.report.html.write_report`), so the page holds what
``rulelab report`` draws for the lab — the rate table with the fitted exponent, steps to learn
vs n, hidden progress, accuracy and loss curves per n (this task's view, :mod:`.views`) — and
then what only a reproduction knows: its scale (the recipe's description), the terminal's
tables and readings, and the training wall time; as study S's reproduction does.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd

from rulelab.studies.sparse_parity.scaling import scaling_lines
from rulelab.studies.sparse_parity.steps_tables import progress_steps, steps_table


def _steps(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.0f}"


def _hidden_first(called: int, measurable: int, callable_: int) -> str:
    """``called/callable``; why not where no run can be called (issue 21)."""
    if not measurable:
        return "not measurable"  # no coordinate-wise first layer (the transformer)
    if not callable_:
        return "too few nulls"  # < 19 off-support k-subsets (or runs stored before the band)
    return f"{called}/{callable_}"


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`steps_table` as it reads: one text cell per quantity."""
    from rulelab.analysis.stats import format_rate

    extra = [c for c in ("k", "model", "width", "batch_size", "lr")
             if c in table.columns and table[c].nunique() > 1]
    return pd.DataFrame({
        **{c: table[c] for c in extra},
        "n": table["n_bits"],
        "learned [95% CI]": [format_rate(int(k), int(n)) for k, n in
                             zip(table["learned"], table["runs"], strict=True)],
        "steps to learn [range]": [f"{_steps(m)} [{_steps(lo)}–{_steps(hi)}]" for m, lo, hi in
                                   zip(table["median_steps"], table["min_steps"],
                                       table["max_steps"], strict=True)],
        "hidden": table["median_hidden"].map(_steps),
        "fourier": table["median_fourier"].map(_steps),
        "visible": table["median_visible"].map(_steps),
        "lead": table["median_lead"].map(_steps),
        "band": table["median_band"].map(lambda b: "–" if math.isnan(b) else f"+{b:.1%}"),
        "hidden first": [_hidden_first(h, m, c) for h, m, c in
                         zip(table["hidden_first"], table["hidden_measurable"],
                             table["hidden_callable"], strict=True)],
        "per seed": table["steps_per_seed"],
    })


CAPTION = ("Steps to learn (eval acc ≥ 99%) vs n, in optimizer steps; medians over seeds of "
           "the first step with hidden progress (support mass +10% and its rise above the band "
           "— the 95% quantile of the largest rise of the run's off-support k-subsets — before "
           "visible progress; 'hidden first': runs called, of those with ≥ 19 off-support "
           "subsets), Fourier progress (χ_S the "
           "output's largest coefficient among the other k-subsets — all of them, or a fixed "
           "sample of 2,048 where there are more; not Barak et al.'s population gap) and "
           "visible progress (eval acc ≥ 60%); "
           "lead = visible − hidden")


def readings(runs: pd.DataFrame, metrics: pd.DataFrame) -> list[str]:
    """The lines under the table: the fitted exponent and the hidden-progress lead."""
    lines = scaling_lines(runs)
    steps = progress_steps(runs, metrics)
    can = steps[steps["hidden_band"].notna()]  # a band: ≥ 19 off-support subsets (issue 21)
    if len(can):
        lead = can["lead"].dropna()
        median = f"; median lead {lead.median():.0f} steps (visible − hidden)" if len(lead) \
            else ""
        lines.append(f"hidden progress before visible progress in {int(can['hidden_called'].sum())}"
                     f" of {len(can)} runs where it can be called (support mass +10% and above "
                     f"the 95% band of the run's off-support k-subsets){median}")
    elif len(steps):
        lines.append("hidden progress before visible progress in no run: none can be called "
                     "(no support mass, or fewer than 19 off-support k-subsets for a 5% band)")
    return lines


def text_report(runs: pd.DataFrame, metrics: pd.DataFrame, seconds: float | None = None) -> str:
    """The steps-to-learn table, the fitted exponent and the hidden-progress lead, as text."""
    lines = [CAPTION, display_table(steps_table(runs)).to_string(index=False),
             *readings(runs, metrics)]
    if seconds is not None:
        lines.append(f"trained {len(runs)} runs in {seconds:.0f} s")
    return "\n".join(lines)


def readings_html(runs: pd.DataFrame, metrics: pd.DataFrame) -> str:
    """:func:`text_report`'s table and lines as HTML: the page's font is proportional, so the
    text table would not line up."""
    table = display_table(steps_table(runs)).to_html(index=False, border=0)
    lines = "".join(f"<p>{html.escape(line)}</p>" for line in readings(runs, metrics))
    return f'<p class="meta">{html.escape(CAPTION)}</p>{table}{lines}'


def write_outputs(runs: pd.DataFrame, metrics: pd.DataFrame, out: Path) -> list[Path]:
    """``steps_vs_n.csv``, ``progress.csv`` and the two study figures as PNG in ``out``."""
    from rulelab.studies.sparse_parity.figures import write_figures

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "steps_vs_n.csv", out / "progress.csv"]
    steps_table(runs).to_csv(paths[0], index=False)
    progress_steps(runs, metrics).to_csv(paths[1], index=False)
    return paths + write_figures(runs, metrics, out)


def lead(r, runs: pd.DataFrame, metrics: pd.DataFrame) -> str:
    """What the page opens with (issue 23): the scale, then the table and readings printed on
    the terminal (as HTML), once — the page leaves the lab's rate table out."""
    from rulelab.report.results import results_html

    scale = r.recipe.description if r.recipe is not None else f"scale {r.scale}"
    return results_html(r.study, runs, metrics, lab=r.lab, scale=r.scale, scale_lines=[scale],
                        own=readings_html(runs, metrics))


def sections(r, runs: pd.DataFrame, metrics: pd.DataFrame) -> list[tuple[str, str]]:
    """The page's (heading, body) pairs after the lab's report: the wall time."""
    return [("Wall time", f"training took {r.train_seconds:.0f} s on {r.device} (a resumed run "
             "counts only the rest).")]


def reproduce(r) -> Path:
    """The study's reproduction over a trained lab (:class:`rulelab.study.Reproduction`)."""
    from rulelab.report.html import write_report
    from rulelab.report.stored_analyses import read_analyses
    from rulelab.report.views import view_of  # not .views: it reads this module's tables

    runs = r.lab.runs()
    runs = runs[runs["run_id"].isin(r.run_ids)]
    metrics = r.lab.read_metrics(list(r.run_ids))
    if r.recipe is not None:
        r.console.print(r.recipe.description, markup=False, highlight=False)
    r.console.print(text_report(runs, metrics, r.train_seconds), markup=False, highlight=False)
    write_outputs(runs, metrics, r.out.parent / f"{r.out.stem}-files")
    path = write_report(r.out, title=f"{r.study.title} — {r.scale} reproduction", runs=runs,
                        metrics=metrics, sections=sections(r, runs, metrics),
                        analyses=read_analyses(r.lab, runs, view_of(runs).analyses),
                        lead=lead(r, runs, metrics), rates=False)
    r.console.print(f"report: {path}", markup=False, highlight=False)
    return path
