"""Terminal tables: one row per configuration with its generalization rate (SPEC S.3).

Study S: ``generalized`` = val and adv accuracy both 100% at one evaluation; the paper's
adv-only reading gets its own column wherever the two differ. The scale the runs were trained
at is printed above the table, and the paper's headline beside a cell only where the cell is
at the paper's setting (:mod:`rulelab.paper_s`).
"""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rulelab.analysis.stats import (
    cell_columns,
    format_range,
    format_rate,
    readings_differ,
    readings_table,
)
from rulelab.paper_s import PAPER_S, cell_paper, describe_scale, paper_note
from rulelab.train.summary_frames import Metrics, upgrade_runs

MPSP_TITLE = "generalization rate (val and adv acc both 100% at one evaluation)"
MODULAR_TITLE = "generalization rate (final test acc ≥ 99%)"
FLIPPED = ("the readings differ: for k = 2 a model that learned the flipped shortcut 1 − s "
           "scores adv 100% with val 0% (adv-only counts it, val and adv does not)")


def _fmt(v) -> str:
    if isinstance(v, float):
        return "–" if pd.isna(v) else f"{v:g}"
    return str(v)


def print_rate_table(console: Console, runs: pd.DataFrame, *, paper: dict | None = PAPER_S,
                     metrics: Metrics | None = None) -> None:
    """Configurations × (generalized k/n with 95% Wilson CI, mean max adv with the per-seed
    range, failed, unfinished), one table per task.

    Study M counts a run as generalized at ≥ 99% final test accuracy. Study S prints its
    scale above the table, the adv-only column where it differs, and ``paper`` beside the
    cells at the paper's setting (else one line says why it is omitted). ``metrics`` (a frame
    or ``run_ids → frame``) recomputes old labs' summaries (:func:`upgrade_runs`).
    """
    if runs.empty:
        console.print("no runs in this lab yet")
        return
    if "task" in runs.columns and runs["task"].nunique() > 1:
        for _, part in runs.groupby("task"):
            print_rate_table(console, part.dropna(axis=1, how="all"), paper=paper,
                             metrics=metrics)
        return
    task = runs["task"].iloc[0] if "task" in runs.columns else "mpsp"
    study_s = task == "mpsp"
    if study_s:
        runs = upgrade_runs(runs, metrics)
        console.print(describe_scale(runs), markup=False, highlight=False)
    by = cell_columns(runs)
    table = readings_table(runs, by)
    both = readings_differ(table)
    paper_col = cell_paper(runs, by, paper) if study_s else None
    unfinished = ~runs["status"].isin(["done", "failed"])
    status = unfinished.groupby([runs[c] for c in by], dropna=False).sum() if by else None
    grid = Table(title=MPSP_TITLE if study_s else MODULAR_TITLE, header_style="bold")
    for c in by:
        grid.add_column(c, justify="right")
    grid.add_column("rate [95% CI] (k/n)", justify="right")
    if both:
        grid.add_column("adv-only (paper text) [95% CI] (k/n)", justify="right")
    has_adv = "mean_max_adv" in table.columns
    if has_adv:
        grid.add_column(escape("mean max adv [seed min, max]"), justify="right")
    grid.add_column("failed", justify="right")
    grid.add_column("unfinished", justify="right")
    if paper_col:
        grid.add_column("paper", justify="right")
    for i, (_, row) in enumerate(table.iterrows()):
        key = tuple(row[c] for c in by)
        cells = [escape(_fmt(row[c])) for c in by]
        cells.append(format_rate(int(row["k"]), int(row["n"])))
        if both:
            cells.append(format_rate(int(row["k_adv"]), int(row["n"])))
        if has_adv:
            cells.append(format_range(row["mean_max_adv"], row["max_adv_min"],
                                      row["max_adv_max"]))
        cells.append(str(int(row["n_failed"])))
        cells.append(str(int(status.get(key if len(key) > 1 else key[0], 0))) if by else
                     str(int(unfinished.sum())))
        if paper_col:
            cells.append(paper_col[i])
        grid.add_row(*cells)
    console.print(grid)
    for line in _notes(runs, study_s and paper is not None, both):
        console.print(line, markup=False, highlight=False)


def _notes(runs: pd.DataFrame, paper: bool, both: bool) -> list[str]:
    lines = [FLIPPED] if both else []
    if paper and (note := paper_note(runs)):
        lines.append(note)
    if unknown := runs.attrs.get("generalized_unknown", 0):
        lines.append(f"{unknown} run(s) summarised by an older rulelab (adv-only) have no "
                     "readable metrics: their val-and-adv reading is unknown, counted as not")
    return lines
