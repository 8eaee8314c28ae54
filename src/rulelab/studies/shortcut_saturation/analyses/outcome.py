"""A run's outcome, for summaries conditional on it (SPEC S.3–S.4, issue 8).

Mechanistic readings (patching, ablation) are claims about runs that generalized or did not,
so their summaries are split by the runs frame's ``generalized`` column — whatever criterion
that column carries (S.3: val and adv both 100% at one evaluation). Kept free of torch so
reports can import it.
"""

from __future__ import annotations

import math

import pandas as pd

OUTCOME = {True: "generalized", False: "not generalized"}
UNKNOWN = "unknown"


def _truth(v) -> bool | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return bool(v)


def outcome_of(runs: pd.DataFrame | None, run_ids: pd.Series) -> pd.Series:
    """Each run's outcome from ``runs["generalized"]``: ``generalized`` / ``not generalized``,
    or ``unknown`` where the column, the run or its value is missing."""
    if runs is None or not {"run_id", "generalized"} <= set(runs.columns):
        return pd.Series(UNKNOWN, index=run_ids.index)
    flag = dict(zip(runs["run_id"], runs["generalized"], strict=True))
    return run_ids.map(lambda r: OUTCOME.get(_truth(flag.get(r)), UNKNOWN))
