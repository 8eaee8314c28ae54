"""Runs frames from labs written before the val-and-adv criterion (SPEC S.3, issue 8).

Their summaries carry ``first_epoch_100`` and an adv-only ``generalized``. :func:`upgrade_runs`
maps those rows to the current columns — ``adv_generalized``, ``first_epoch_adv_100`` — and
recomputes ``generalized``, ``first_epoch_generalized`` and ``transient`` from each run's stored
val / adv accuracy curves when metrics are at hand. Where they are not (or cannot be read), a
row whose adv never reached 100% is still known not to generalize; the others stay None
(unknown), counted in ``frame.attrs["generalized_unknown"]``.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from rulelab.studies.shortcut_saturation.summary import LEGACY_FIRST, MemberSummary

Metrics = pd.DataFrame | Callable[[list[str]], pd.DataFrame]


def legacy_rows(runs: pd.DataFrame) -> pd.Series:
    """Rows with an old summary: a ``generalized`` value but no ``adv_generalized``."""
    if LEGACY_FIRST not in runs.columns or "generalized" not in runs.columns:
        return pd.Series(False, index=runs.index, dtype=bool)
    has_new = runs["adv_generalized"].notna() if "adv_generalized" in runs.columns else False
    return (runs["generalized"].notna() | runs[LEGACY_FIRST].notna()) & ~has_new


def upgrade_runs(runs: pd.DataFrame, metrics: Metrics | None = None) -> pd.DataFrame:
    """``runs`` with old-summary rows mapped to the current columns (see the module docstring).

    ``metrics`` is a long metrics frame or a function ``run_ids → frame`` (e.g.
    ``Lab.read_metrics``), called only for the rows that need it. A frame without old rows is
    returned unchanged.
    """
    old = legacy_rows(runs)
    if not old.any():
        return runs
    from rulelab.analysis.stats import flag_values

    runs = runs.copy()
    for c in ("adv_generalized", "first_epoch_adv_100", "first_epoch_generalized"):
        if c not in runs.columns:
            runs[c] = None
    runs["generalized"] = runs["generalized"].astype(object)
    if "transient" not in runs.columns:
        runs["transient"] = None
    runs["transient"] = runs["transient"].astype(object)
    adv = flag_values(runs["generalized"])
    runs.loc[old, "adv_generalized"] = adv[old]
    runs.loc[old, "first_epoch_adv_100"] = runs.loc[old, LEGACY_FIRST]
    runs.loc[old, "first_epoch_generalized"] = None
    for c in ("generalized", "transient"):  # new event ⊆ adv event: False where adv never hit
        runs.loc[old, c] = [False if not a else None for a in adv[old]]
    unknown = old & adv
    if unknown.any() and metrics is not None:
        _replay(runs, unknown, metrics)
    runs = runs.drop(columns=[LEGACY_FIRST])
    runs.attrs["generalized_unknown"] = int((old & runs["generalized"].isna()).sum())
    return runs


def _replay(runs: pd.DataFrame, rows: pd.Series, metrics: Metrics) -> None:
    from rulelab.store import StoreError

    ids = list(runs.loc[rows, "run_id"])
    try:
        frame = metrics(ids) if callable(metrics) else metrics
    except StoreError:
        return  # unreadable metrics: those rows stay unknown
    threshold = (runs["transient_threshold"] if "transient_threshold" in runs.columns
                 else pd.Series(0.95, index=runs.index))
    acc = frame[frame["run_id"].isin(ids) & (frame["metric"] == "acc")]
    curves = {rid: g for rid, g in acc.groupby("run_id")}
    xcol = "epoch" if "epoch" in frame.columns else "step"
    for i in runs.index[rows]:
        curve = curves.get(runs.at[i, "run_id"])
        if curve is None or not {"val", "adv"} <= set(curve["split"]):
            continue
        th = threshold[i]
        s = MemberSummary.replay(zip(curve[xcol], curve["split"], curve["metric"],
                                     curve["value"], strict=True),
                                 0.95 if pd.isna(th) else float(th))
        runs.at[i, "generalized"] = bool(s.generalized)
        runs.at[i, "first_epoch_generalized"] = s.first_epoch_generalized
        runs.at[i, "transient"] = bool(s.transient)
