"""Analysis tables as a report reads them: tracked and post-hoc rows kept apart, each row with
its run's config columns (issue 10).

One analysis name (``<lab>/analyses/gradients/``) holds two kinds of file: tables tracked
during training (``--track``, one per run, rows without a ``member`` column; from this version
on tagged ``source = "tracked"``) and tables of ``rulelab analyze`` (one per ensemble and epoch,
rows with ``member`` and the config columns the study groups by). Concatenated as stored, the
tracked rows have NaN config columns — a figure grouping by them draws an extra "–" panel and
leaves the real one with a single post-hoc point. :func:`tidy_analysis` fixes both, for old
labs too: every row's config columns come from the runs frame by ``run_id``, and where one run
has rows of both kinds at one epoch only the post-hoc rows are kept (the later reading; the
two read the same weights).
"""

from __future__ import annotations

import pandas as pd

from rulelab.analysis.stats import config_columns

SOURCE = "source"  # column: "tracked" (during training) or "post-hoc" (rulelab analyze)
TRACKED, POST_HOC = "tracked", "post-hoc"


def sources(table: pd.DataFrame) -> pd.Series:
    """Per row, ``tracked`` or ``post-hoc``: the ``source`` column where a row has one, else
    tracked exactly when the table has a ``member`` column that this row leaves empty."""
    out = pd.Series(POST_HOC, index=table.index, dtype=object)
    if "member" in table.columns:
        out[table["member"].isna()] = TRACKED
    if SOURCE in table.columns:
        out = table[SOURCE].where(table[SOURCE].notna(), out)
    return out


def tidy_analysis(table: pd.DataFrame | None, runs: pd.DataFrame, *, one_source: bool = True
                  ) -> pd.DataFrame:
    """``table`` with a ``source`` column, the config columns of ``runs`` (and ``seed``,
    ``task``) filled in by ``run_id``, rows of runs not in ``runs`` dropped, and — per run and
    epoch held by both sources, with ``one_source`` — only the post-hoc rows. Tables without
    ``run_id`` (e.g. one row per configuration) are returned as they are."""
    if table is None or table.empty:
        return pd.DataFrame()
    if "run_id" not in table.columns or "run_id" not in runs.columns:
        return table
    table = table[table["run_id"].isin(runs["run_id"])].copy()
    table[SOURCE] = sources(table)
    if one_source and "epoch" in table.columns:
        both = table.groupby(["run_id", "epoch"])[SOURCE].transform("nunique") > 1
        table = table[~both | (table[SOURCE] == POST_HOC)]
    by_run = runs.drop_duplicates("run_id").set_index("run_id")
    tracked = table[SOURCE] == TRACKED
    for col in [*config_columns(runs), "seed", "task"]:
        if col not in by_run.columns:
            continue
        known = table["run_id"].map(by_run[col])
        if col not in table.columns:
            table[col] = known
        elif tracked.any() and table.loc[tracked, col].isna().all():
            # a config copy the post-hoc rows carry and the tracked rows lack; a column both
            # fill is the analysis's own (gradients' ``eps`` is also an optimizer field)
            table[col] = table[col].where(~tracked, known).infer_objects()
    return table.reset_index(drop=True)


def read_analyses(lab, runs: pd.DataFrame, names) -> dict[str, pd.DataFrame]:
    """``{name: tidy table}`` for each analysis ``names`` the lab holds rows of."""
    out = {}
    for name in dict.fromkeys(names):
        table = tidy_analysis(lab.read_table(name), runs)
        if not table.empty:
            out[name] = table
    return out
