"""How one task's runs read in tables, figures and status lines (issue 9: studies as plugins).

The command line (``rulelab runs``, ``status``) and the report are generic: for the runs of a
task they ask that task's view (``Task.views``, a :class:`RunsView` in its study's package) what
the flag ``generalized`` means, which columns and notes the rate table carries beside the
generic rate with its 95% Wilson interval (SPEC S.3, "Cross-cutting"), which curves to draw,
and which figures its report adds. :class:`RunsView` is the default: the generic rate table,
no extra column, curves of whatever the view lists.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rulelab.analysis.stats import rate_table, varying_columns

Column = tuple[str, list[str]]  # (header, one cell per rate-table row)
Series = tuple[str, str, str, str]  # (split, metric, colour, label) of a curve


def fmt(v) -> str:
    """A config value as it reads in a label: ``0.5``, ``–`` for NaN."""
    if isinstance(v, float | np.floating):
        return "–" if math.isnan(v) else f"{v:g}"
    return str(v)


class RunsView:
    """The default view: override what a study reads differently."""

    title = "generalization rate"  # the rate table's title: say what "generalized" means
    rate_head = "generalized [95% CI] (k/n)"
    word = "generalized"  # what the flag ``generalized`` reads as in titles ("learned", …)
    curves: tuple[Series, ...] = ()  # accuracy curves of the report, one panel per config
    losses: tuple[Series, ...] = ()  # loss curves (log scale)
    mark: tuple[str, str] | None = None  # (summary column of an epoch, legend) marked at 100%
    analyses: tuple[str, ...] = ()  # analysis tables (``<lab>/analyses/<name>``) its report reads
    short: dict[str, str] = {}  # how a config column reads in a label: {"ratio": "r={}"}
    names: dict[str, str] = {}  # how a stored name reads in a legend: {"G_no_mu": "G without μ"}
    # (README heading, preset): the README section whose "What it shows" describes that preset
    # (quoted by a report of a lab at it, :mod:`rulelab.report.results`), or None
    readme: tuple[str, str] | None = None

    def upgrade(self, runs: pd.DataFrame, metrics=None) -> pd.DataFrame:
        """``runs`` with summaries of older versions mapped to the current columns."""
        return runs

    def scale(self, runs: pd.DataFrame) -> str | None:
        """One line: the scale the runs were trained at (printed above the table)."""
        return None

    def cells(self, runs: pd.DataFrame) -> list[str]:
        """The columns that key a rate cell (default: the config columns that vary)."""
        return varying_columns(runs)

    def table(self, runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
        """One row per cell with at least ``n, k, n_failed`` (:func:`rate_table`)."""
        return rate_table(runs, by)

    def columns(self, runs: pd.DataFrame, by: list[str], table: pd.DataFrame) -> list[Column]:
        """Columns after the rate (before failed / unfinished)."""
        return []

    def trailing(self, runs: pd.DataFrame, by: list[str], table: pd.DataFrame) -> list[Column]:
        """Columns after failed / unfinished (e.g. a paper's reference numbers)."""
        return []

    def notes(self, runs: pd.DataFrame, table: pd.DataFrame) -> list[str]:
        """Lines printed under the table."""
        return []

    # whether :meth:`results` holds a richer table of the same cells (the report then leaves
    # the rate table out rather than print the cells twice)
    replaces_rate_table = False

    def results(self, runs: pd.DataFrame, metrics: pd.DataFrame) -> str:
        """The study's own results as HTML, in the section a report opens with (issue 23)."""
        return ""

    def figures(self, runs: pd.DataFrame, metrics: pd.DataFrame,
                analyses: dict[str, pd.DataFrame]) -> list[tuple[object, str]]:
        """(figure, caption) pairs the report shows before the curves."""
        return []

    def extra_figures(self, runs: pd.DataFrame, metrics: pd.DataFrame,
                      analyses: dict[str, pd.DataFrame]) -> tuple[str, list[tuple[object, str]]]:
        """(heading, figures) of a section after the curves (e.g. mechanistic analyses)."""
        return "", []

    def label(self, row: pd.Series, cols: list[str]) -> str:
        """``"ratio=0.9 width=65"``: a configuration's name in titles and legends."""
        parts = [self.short.get(c, c + "={}").format(fmt(row[c])) for c in cols
                 if c in row.index]
        return " ".join(parts) or "all runs"

    def title_columns(self, runs: pd.DataFrame) -> list[str]:
        """The columns a curve panel's title names (default: those that vary)."""
        return varying_columns(runs)

    def chance(self, runs: pd.DataFrame) -> tuple[float, str] | None:
        """(accuracy, legend) of a chance line on accuracy panels, or None."""
        return None

    def generalized_of(self, summary: dict) -> bool | None:
        """The ``generalized`` flag of one stored summary (None: cannot be known)."""
        return bool(summary.get("generalized"))


DEFAULT = RunsView()


def view_of(runs: pd.DataFrame) -> RunsView:
    """The view of the task of ``runs`` (its ``task`` column; one task), else the default."""
    from rulelab.study_registry import tasks

    names = runs["task"].dropna().unique() if "task" in runs.columns else []
    if len(names) == 1 and names[0] in tasks():
        return tasks()[names[0]].view()
    return DEFAULT


def upgrade_by_task(runs: pd.DataFrame, metrics=None) -> pd.DataFrame:
    """``runs`` with each task's older summaries mapped to its current columns by that task's
    view, rows in their order. With several tasks, each task's rows are upgraded on the
    columns they fill (another task's columns are empty there and would read as old ones)."""
    if runs.empty or "task" not in runs.columns:
        return runs
    if runs["task"].nunique(dropna=False) == 1:
        return view_of(runs).upgrade(runs, metrics)
    parts = [view_of(part).upgrade(part.dropna(axis=1, how="all"), metrics)
             for _, part in runs.groupby("task", sort=False, dropna=False)]
    return pd.concat(parts).loc[runs.index]
