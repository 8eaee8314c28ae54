"""``rulelab runs --ids``: one row per run, led by its short id (issue 23 item 4).

The rate table pools seeds into configurations, so it has no place for a run id; this list
is where a researcher finds the id to pass to ``lab.model``, ``lab.compare`` or ``rulelab
export tl``. Only the config fields that differ between the listed runs are shown (the
others would repeat one value per row), then the run's headline results.
"""

from __future__ import annotations

import pandas as pd

from rulelab.report.views import fmt

# summary fields worth a column where a task has them, in this order
HEADLINE = ("generalized", "first_epoch_generalized", "final_val_acc", "final_epoch")


def varying(runs: pd.DataFrame, columns: list[str]) -> list[str]:
    """The ``columns`` whose values differ between the rows of ``runs``."""
    return [c for c in columns if c in runs.columns
            and runs[c].astype(str).nunique(dropna=False) > 1]


def run_list(runs: pd.DataFrame, config_columns: list[str],
             short: dict[str, str]) -> tuple[list[str], list[list[str]]]:
    """``(head, rows)``: ``id``, ``status``, the varying config columns (``experiment`` too
    when the runs span several), then the :data:`HEADLINE` summary fields present."""
    lead = varying(runs, ["experiment"])
    shown = varying(runs, [c for c in config_columns if c != "experiment"])
    tail = [c for c in HEADLINE if c in runs.columns and runs[c].notna().any()]
    head = ["id", *lead, "status", *shown, *tail]
    ordered = runs.sort_values([*lead, *shown, "run_id"], kind="stable") if len(runs) else runs
    rows = [[short.get(r["run_id"], r["run_id"]), *(cell(r[c]) for c in lead), str(r["status"]),
             *(cell(r[c]) for c in shown), *(cell(r[c]) for c in tail)]
            for _, r in ordered.iterrows()]
    return head, rows


def cell(v) -> str:
    """``fmt``, with a missing value (a run without that summary yet) as ``–``."""
    return "–" if v is None else fmt(v)
