"""``lab.curves(metric, split, by=[…])``: one metric's training curves with the runs' config
columns beside them (issue 23 item 4), so a plot starts from one frame instead of a merge::

    c = lab.curves("acc", "val", by=["layers", "ratio"])
    sns.lineplot(c, x="epoch", y="value", hue="layers", style="ratio", units="run_id",
                 estimator=None)
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from rulelab.errors import UserError
from rulelab.report.run_list import varying


def curves(metrics: pd.DataFrame, runs: pd.DataFrame, metric: str, split: str,
           by: Sequence[str] | None, allowed: list[str]) -> pd.DataFrame:
    """Rows ``run_id, *by, epoch, metric, split, value`` of ``metrics`` for ``metric`` on
    ``split``, for the runs in ``runs`` (already filtered by the caller). ``by=None`` joins
    the ``allowed`` (config) columns that differ between those runs; a name outside
    ``allowed``, or a metric or split not stored, is one :class:`UserError` line naming
    what there is."""
    for what, value in (("metric", metric), ("split", split)):
        stored = sorted(metrics[what].dropna().unique()) if len(metrics) else []
        if value not in stored:
            raise UserError(f"{what}: {value!r} is not stored in this lab ({what}s: "
                            f"{', '.join(map(str, stored)) or 'none'})")
    if isinstance(by, str):
        by = [by]
    if by is None:
        by = varying(runs, allowed)
    unknown = [c for c in by if c not in allowed or c not in runs.columns]
    if unknown:
        raise UserError(f"by: {', '.join(unknown)} is not a config column (config columns: "
                        f"{', '.join(allowed)})")
    rows = metrics[(metrics["metric"] == metric) & (metrics["split"] == split)
                   & metrics["run_id"].isin(runs["run_id"])]
    joined = rows.merge(runs[["run_id", *by]], on="run_id", how="left")
    order = ["run_id", *by, "epoch", "metric", "split", "value"]
    rest = [c for c in joined.columns if c not in order]  # e.g. a step column, kept
    return joined[order + rest].sort_values([*by, "run_id", "epoch"],
                                            kind="stable").reset_index(drop=True)
