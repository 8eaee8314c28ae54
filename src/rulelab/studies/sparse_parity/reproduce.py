"""The sparse-parity reproduction: tables on the terminal, figures and one HTML report.

``rulelab reproduce sparse-parity --scale quick`` trains ``recipes/quick.yaml`` through the
planner and calls :func:`reproduce`, which reads the lab's two frames (runs, long metrics):
the tables on the terminal, ``<report>-files/`` (tables as CSV, figures as PNG) and the
report page.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd

from rulelab.studies.sparse_parity.analysis import (
    fit_slope,
    progress_steps,
    slope_line,
    steps_table,
)


def _steps(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.0f}"


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
        "hidden first": [f"{h}/{n}" for h, n in zip(table["hidden_first"], table["runs"],
                                                     strict=True)],
        "per seed": table["steps_per_seed"],
    })


def text_report(runs: pd.DataFrame, metrics: pd.DataFrame, seconds: float | None = None) -> str:
    """The steps-to-learn table, the fitted exponent and the hidden-progress lead, as text."""
    lines = ["Steps to learn (eval acc ≥ 99%) vs n, in optimizer steps; medians over seeds of "
             "the first step with hidden progress (support mass +10%), Fourier progress (χ_S "
             "the top k-subset coefficient) and visible progress (eval acc ≥ 60%); "
             "lead = visible − hidden",
             display_table(steps_table(runs)).to_string(index=False),
             slope_line(fit_slope(runs))]
    prog = progress_steps(runs, metrics)
    lead = prog["lead"].dropna()
    if len(lead):
        ahead = int((lead > 0).sum())
        lines.append(f"hidden progress before visible progress in {ahead} of {len(lead)} runs; "
                     f"median lead {lead.median():.0f} steps (visible − hidden)")
    if seconds is not None:
        lines.append(f"trained {len(runs)} runs in {seconds:.0f} s")
    return "\n".join(lines)


def write_outputs(runs: pd.DataFrame, metrics: pd.DataFrame, out: Path,
                  title: str = "Sparse parity") -> list[Path]:
    """``steps_vs_n.csv``, ``progress.csv``, the two figures and ``report.html`` in ``out``."""
    from rulelab.studies.sparse_parity.figures import write_figures

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "steps_vs_n.csv", out / "progress.csv"]
    steps_table(runs).to_csv(paths[0], index=False)
    progress_steps(runs, metrics).to_csv(paths[1], index=False)
    paths += write_figures(runs, metrics, out)
    paths.append(write_html(runs, metrics, out / "report.html", title))
    return paths


def write_html(runs: pd.DataFrame, metrics: pd.DataFrame, path: Path, title: str) -> Path:
    """One self-contained page: the tables as text, both figures (base64 PNG)."""
    from rulelab.report.html import figure_html, page, write_page
    from rulelab.studies.sparse_parity.figures import hidden_progress_figure, steps_vs_n_figure

    parts = [f"<h1>{html.escape(title)}</h1>",
             f'<pre class="text">{html.escape(text_report(runs, metrics))}</pre>',
             figure_html(steps_vs_n_figure(runs), "Steps to learn vs n (log–log), every seed, "
                         "the median and the fitted power law"),
             figure_html(hidden_progress_figure(runs, metrics), "Support mass and Fourier gap "
                         "rise before the loss drops (one line per seed)")]
    return write_page(path, page(title, parts))


def reproduce(r) -> Path:
    """The study's reproduction over a trained lab (:class:`rulelab.study.Reproduction`)."""
    runs = r.lab.runs()
    runs = runs[runs["run_id"].isin(r.run_ids)]
    metrics = r.lab.read_metrics(list(r.run_ids))
    r.console.print(text_report(runs, metrics, r.train_seconds), markup=False, highlight=False)
    write_outputs(runs, metrics, r.out.parent / f"{r.out.stem}-files", title=r.study.title)
    return write_html(runs, metrics, r.out, f"{r.study.title} ({r.scale})")
