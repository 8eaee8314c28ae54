"""``rulelab reproduce coexistence``: study M end to end (SPEC M.4) — once the recipe has
trained: FF, swap and neuron analyses → findings beside the paper's → one HTML report.

The paper's claims checked (Liu & Lu 2026, see SPEC M.4): noisy labels are fit before clean
ones under full batch (M.4.2); FF's G network is near-perfect on test even at α = 0.8 while R
keeps the memorized noise (M.4.3); swapping ReLU for quadratic or reverse ReLU keeps test
accuracy and drops memorization (M.4.4); an IPR / strength partition helps far less than FF
(M.4.5); test accuracy dips at the interpolation width and rises after it (M.4.1).

Every run prints its scale first (:func:`.analyses.scale.scale_line`: the recipe's name and
each departure from the paper's setting, read from the runs' config values). Verdicts follow
:mod:`.analyses.findings`: at the paper's setting every claim gets one; below it only the
scale-free learning order does, and every other row says "reading". The learning-order window
T is the recipe's dense-evaluation span (``log_eval_steps``: every epoch up to there), which
the recipes set to the paper's early window (SPEC M.3, M.4.2).
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from rich.table import Table

from rulelab.analysis.stored import analyze_stored
from rulelab.store import load
from rulelab.studies.coexistence.commands import COLUMNS
from rulelab.study import Reproduction

WINDOW_KEY = "log_eval_steps"


def print_findings(console, table: pd.DataFrame) -> None:
    grid = Table(title="study M findings beside the paper's", header_style="bold",
                 show_lines=True)
    for col, ratio in (("claim", 3), ("paper", 3), ("here", 5), ("verdict", 2)):
        grid.add_column(col, ratio=ratio)
    for row in table.itertuples(index=False):
        grid.add_row(*map(str, row))
    console.print(grid)


def print_table(console, title: str, frame: pd.DataFrame) -> None:
    """A frame of readable cells (strings, counts) as a rich table."""
    grid = Table(title=title, header_style="bold")
    for col in frame.columns:
        grid.add_column(str(col))
    for row in frame.itertuples(index=False):
        grid.add_row(*(f"{v:g}" if isinstance(v, float) else str(v) for v in row))
    console.print(grid)


def reproduce(r: Reproduction) -> Path:
    """Analyze the trained recipe in ``r.lab``, print the findings, write the report."""
    from rulelab.analysis.calibration import calibrate, calibration_text
    from rulelab.report.results import results_html
    from rulelab.studies.coexistence.analyses.dd_dip import dip_reading
    from rulelab.studies.coexistence.analyses.findings import findings
    from rulelab.studies.coexistence.analyses.order import (
        order_display,
        order_summary,
        order_table,
    )
    from rulelab.studies.coexistence.analyses.scale import scale_line
    from rulelab.studies.coexistence.analyses.tables import (
        dd_table,
        ff_table,
        neurons_table,
        swap_table,
    )
    from rulelab.studies.coexistence.report import findings_html, write_coexistence_report

    t0, console, ids = time.perf_counter(), r.console, list(r.run_ids)
    tables = {name: analyze_stored(r.lab, name, fn, task="modular", columns=COLUMNS, run_ids=ids)
              for name, fn in (("ff", ff_table), ("swap", swap_table),
                               ("neurons", neurons_table))}
    frames = load(r.lab)
    runs = frames.runs[frames.runs["run_id"].isin(ids)].dropna(axis=1, how="all")
    metrics = frames.metrics[frames.metrics["run_id"].isin(ids)]
    window = r.recipe.base[WINDOW_KEY]
    dd, order = dd_table(runs), order_table(runs, metrics, window=window)
    r.lab.write_table("dd", "all", dd)
    r.lab.write_table("order", "all", order)
    found = findings(runs, order, tables["ff"], tables["swap"], tables["neurons"], dd=dd)
    t_all = r.train_seconds + time.perf_counter() - t0
    line = scale_line(r.scale, runs)
    console.print(line)
    print_findings(console, found)
    new, old = order_display(order_summary(order))
    print_table(console, f"learning order: early lead over the first {window} steps (runs with "
                "α > 0; points = accuracy points, noisy vs corrupted labels − clean)", new)
    print_table(console, "learning order, old reading: first step at 50% (its own n)", old)
    dips = dip_reading(dd)
    print_table(console, "double descent: the dip in test accuracy vs width",
                dips[[c for c in dips.columns if c in ("noise", "activation", "reading")]])
    note = r.recipe.description
    console.print(f"wall time: training {r.train_seconds:.0f} s, all {t_all:.0f} s; {note}")
    checks = calibrate(r.study, r.recipe.configs())
    lead = results_html(r.study, runs, metrics, lab=r.lab, scale=r.scale,  # results first
                        scale_lines=[line, note], calibrations=checks,
                        own="<p>Findings beside the paper:</p>" + findings_html(found))
    path = write_coexistence_report(
        r.out, title=f"{r.study.title} — {r.scale} reproduction",
        runs=runs, metrics=metrics, tables=dict(tables, dd=dd, order=order, dips=dips),
        found=found, scale=line, lead=lead,
        notes=[("Wall time", f"training {r.train_seconds:.0f} s, training + analyses "
                f"{t_all:.0f} s on {r.device} (a resumed run counts only the rest)."),
               ("Each verdict against its null", calibration_text(checks))])
    console.print(f"report: {path}")
    return path
