"""The rate table of a lab's runs, once for every medium (SPEC S.3: one row per
configuration, its generalization rate with a 95% Wilson interval and k/n; "Cross-cutting").

:func:`rate_tables` builds plain rows (one table per task in the runs); the terminal
(:mod:`rulelab.report.terminal`) and the HTML report (:mod:`rulelab.report.html`) render them.
What ``generalized`` means, the cells' columns, extra columns and notes come from the task's
view (:class:`rulelab.report.views.RunsView`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from rulelab.analysis.stats import format_rate
from rulelab.report.views import fmt, view_of


@dataclass
class RateTable:
    """A rendered-to-text rate table: a title, lines above, header, rows, notes below."""

    title: str
    head: list[str]
    rows: list[list[str]]
    above: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def rate_tables(runs: pd.DataFrame, metrics=None) -> list[RateTable]:
    """One :class:`RateTable` per task in ``runs`` (none for an empty frame). ``metrics`` (a
    frame, or ``run_ids → frame``) lets a view recompute summaries of older labs."""
    if runs.empty:
        return []
    if "task" in runs.columns and runs["task"].nunique() > 1:
        return [t for _, part in runs.groupby("task")
                for t in rate_tables(part.dropna(axis=1, how="all"), metrics)]
    view = view_of(runs)
    runs = view.upgrade(runs, metrics)
    by = view.cells(runs)
    table = view.table(runs, by)
    unfinished = ~runs["status"].isin(["done", "failed"])
    status = unfinished.groupby([runs[c] for c in by], dropna=False).sum() if by else None
    extra, trailing = view.columns(runs, by, table), view.trailing(runs, by, table)
    head = [*by, view.rate_head, *(h for h, _ in extra), "failed", "unfinished",
            *(h for h, _ in trailing)]
    rows = []
    for i, (_, row) in enumerate(table.iterrows()):
        key = tuple(row[c] for c in by)
        cells = [fmt(row[c]) for c in by]
        cells.append(format_rate(int(row["k"]), int(row["n"])))
        cells += [cells_[i] for _, cells_ in extra]
        cells.append(str(int(row["n_failed"])))
        cells.append(str(int(status.get(key if len(key) > 1 else key[0], 0))) if by else
                     str(int(unfinished.sum())))
        cells += [cells_[i] for _, cells_ in trailing]
        rows.append(cells)
    scale = view.scale(runs)
    return [RateTable(view.title, head, rows, [scale] if scale else [],
                      view.notes(runs, table))]
