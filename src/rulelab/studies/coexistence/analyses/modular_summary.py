"""Study M summaries over many runs: learning order and double descent (SPEC M.4.1–M.4.2).

Learning order here is the first-crossing reading (:func:`learning_order`); the early lead the
paper describes is :mod:`.analyses.early_lead`, and the dip of a double-descent curve is
:mod:`.analyses.dd_dip`.

Inputs are the store's frames: a long metrics frame (columns ``run_id, epoch, split, metric,
value``; Study M splits ``"train_clean"``, ``"train_noisy"`` — accuracy against the corrupted
labels — and ``"test"``; accuracy rows have ``metric == "acc"``) and a runs frame (one row per
run: ``run_id``, ``seed``, ``width``, config columns, optional ``final_test_acc``, ``status``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

# Config columns (names of the fields of .config.ModularRunConfig) a double-descent curve is
# split by, when present in the runs frame; ``width`` is the x axis and ``seed``/``data_seed``
# are what the statistics run over.
DEFAULT_DD_BY = (
    "op", "p", "train_frac", "noise", "noise_mode", "activation", "tied", "bias", "init", "loss",
    "optimizer", "lr", "weight_decay",
)  # fmt: skip


def _require(frame: pd.DataFrame, cols: Sequence[str], who: str) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise KeyError(f"{who}: frame has no column(s) {missing}")


def learning_order(
    metrics: pd.DataFrame,
    *,
    thresholds: Sequence[float] = (0.5, 0.9),
    splits: Sequence[str] = ("train_clean", "train_noisy"),
    metric: str = "acc",
) -> pd.DataFrame:
    """First epoch each split's accuracy reaches each threshold, per run (SPEC M.4.2) — the *old*
    learning-order reading, kept beside the early lead of :mod:`.analyses.early_lead`.

    It cannot see the paper's claim, an early lead at low accuracy (MNIST epoch 1: noisy 10.9%
    vs clean 2.9%, then clean leads): such a run reaches 50% clean-first. And a run whose noisy
    accuracy never reaches a threshold has no crossing, so a count over crossings leaves it out
    of ``n``; :func:`.analyses.order.order_summary` reports that count separately.

    Returns one row per ``run_id`` in ``metrics`` with columns ``first_<split>_<pct>`` (the first
    logged epoch with ``value ≥ threshold``, NaN if never; ``pct = round(100·threshold)``) and,
    when both default splits are present, ``noisy_first_<pct>``: True when noisy-train reaches
    the threshold strictly before clean-train (a split that never reaches it counts as +∞, so
    noisy reaching it and clean not is True; neither reaching it is False), and
    ``noisy_lead_<pct>`` = clean epoch − noisy epoch (NaN unless both reach it).
    """
    _require(metrics, ("run_id", "epoch", "split", "metric", "value"), "learning_order")
    runs = pd.Index(metrics["run_id"].unique(), name="run_id")
    rows = metrics[(metrics["metric"] == metric) & metrics["split"].isin(list(splits))]
    out = pd.DataFrame(index=runs)
    for t in thresholds:
        pct = round(100 * t)
        hit = rows[rows["value"] >= t]
        first = hit.groupby(["run_id", "split"])["epoch"].min().unstack("split")  # [run, split]
        for s in splits:
            col = first[s] if s in first.columns else pd.Series(dtype=float)
            out[f"first_{s}_{pct}"] = col.reindex(runs).astype(float)
        if {"train_clean", "train_noisy"} <= set(splits):
            clean = out[f"first_train_clean_{pct}"]
            noisy = out[f"first_train_noisy_{pct}"]
            out[f"noisy_first_{pct}"] = noisy.fillna(np.inf) < clean.fillna(np.inf)
            out[f"noisy_lead_{pct}"] = clean - noisy
    return out.reset_index()


def final_values(metrics: pd.DataFrame, split: str = "test", metric: str = "acc") -> pd.Series:
    """Value at each run's last logged epoch for ``split``/``metric``: Series indexed by run_id."""
    _require(metrics, ("run_id", "epoch", "split", "metric", "value"), "final_values")
    rows = metrics[(metrics["split"] == split) & (metrics["metric"] == metric)]
    last = rows.sort_values("epoch", kind="stable").groupby("run_id")["value"].last()
    return last.astype(float)


def double_descent_table(
    runs: pd.DataFrame,
    metrics: pd.DataFrame | None = None,
    *,
    by: Sequence[str] | None = None,
    x: str = "width",
    value_col: str = "final_test_acc",
) -> pd.DataFrame:
    """Test accuracy vs width over seeds (SPEC M.4.1): ``*by, width, mean, std, min, max, n``.

    The per-run value is ``runs[value_col]`` when that column exists; otherwise each run's test
    accuracy at its last logged epoch in ``metrics``. When ``runs`` has ``status``, only
    ``"done"`` runs count. ``by`` defaults to the columns of :data:`DEFAULT_DD_BY` present in
    ``runs``. ``n`` counts runs (seeds) with a value; ``std`` is the sample std (NaN at n = 1).
    """
    _require(runs, ("run_id", x), "double_descent_table")
    by = [c for c in DEFAULT_DD_BY if c in runs.columns and c != x] if by is None else list(by)
    _require(runs, by, "double_descent_table")
    frame = runs
    if "status" in frame.columns:
        frame = frame[frame["status"].astype(str) == "done"]
    if value_col in frame.columns:
        values = pd.to_numeric(frame[value_col], errors="coerce")
    elif metrics is not None:
        values = frame["run_id"].map(final_values(metrics))
    else:
        raise KeyError(f"double_descent_table: runs has no {value_col!r} and no metrics given")
    data = frame[[*by, x]].assign(_value=values.to_numpy(dtype=float))
    table = (
        data.groupby([*by, x], dropna=False, sort=True)["_value"]
        .agg(mean="mean", std="std", min="min", max="max", n="count")
        .reset_index()
    )
    table["n"] = table["n"].astype(np.int64)
    return table
