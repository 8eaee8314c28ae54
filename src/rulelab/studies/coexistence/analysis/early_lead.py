"""Learning order as an early lead (SPEC M.4.2): does noisy-train accuracy rise before clean?

The paper's claim is about the first steps of full-batch training at *low* accuracy: on MNIST
(α = 0.05) after epoch 1 the noisy examples are fit to their corrupted labels at 10.9% while
the clean ones sit at 2.9%; at epoch 2 clean leads (46.3% vs 6.5%). A "first step to reach 50%"
reading scores that run "clean first", and drops every run whose noisy accuracy never reaches
50% from its count. This module reads the lead itself, per run, over the first ``T`` steps:

- ``lead(s) = acc_noisy(s) − acc_clean(s)`` at each evaluated step ``s``, where noisy-train
  accuracy is against the corrupted labels (memorization) and clean-train against the true ones.
- ``lead_area``: the trapezoid integral of ``lead`` over the evaluations in ``[s₀, T]`` divided
  by the span ``T − s₀`` (``s₀`` the first evaluation, normally step 0): a *mean lead* in
  accuracy (0.05 = noisy ahead by 5 points on average). When the run has an evaluation after
  ``T`` the curve is cut at ``T`` by linear interpolation; a run shorter than ``T`` is read over
  what it has (``window_end`` says where the reading ends). ``noisy_leads`` is ``lead_area > 0``.
- ``first_lead``: the lead at the first evaluation after step 0 (``first_step``; the paper's
  "epoch 1"), and ``lead_until``: the last step of the uninterrupted run of evaluations from
  ``first_step`` on which noisy leads (NaN when it does not lead at ``first_step``).
- ``init_lead``: the lead at the first evaluation (``s₀``, the untrained network). Both subsets
  start near chance, 1/P, but a small subset's accuracy at init is off by sampling noise (a
  point or more at P = 31); ``lead_area − init_lead`` is the mean lead in accuracy *gained*
  since init, which that offset does not move.
- ``loss_rate_<subset>``: the mean of ``−d loss / d step`` over the window, which telescopes to
  ``(L(s₀) − L(end)) / (end − s₀)``, and ``loss_drop_<subset>``: the relative drop
  ``(L(s₀) − L(end)) / L(s₀)``; subsets ``clean`` and ``noisy`` (the noisy loss is against the
  corrupted labels, as the trainer logs it).

Every run with both subsets non-empty gets a reading, however low its accuracy stays: nothing is
dropped from ``n``. ``T`` is a parameter (``--window`` of ``rulelab analyze order``), default
:data:`DEFAULT_WINDOW`; ``rulelab reproduce coexistence`` uses each preset's dense-evaluation
span (``log_eval_steps``), which the presets set to the paper's early window.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

DEFAULT_WINDOW = 100
SUBSETS = {"clean": "train_clean", "noisy": "train_noisy"}
LEAD_COLUMNS = ("window", "window_end", "lead_area", "noisy_leads", "init_lead", "first_step",
                "first_lead", "lead_until", "loss_rate_clean", "loss_rate_noisy",
                "loss_drop_clean", "loss_drop_noisy")


def _cut(steps: np.ndarray, values: np.ndarray, T: float) -> tuple[np.ndarray, np.ndarray]:
    """The curve on ``[steps[0], min(T, steps[-1])]``, with a linearly interpolated point at T."""
    inside = steps <= T
    s, v = steps[inside], values[inside]
    if steps[-1] > T and (len(s) == 0 or s[-1] < T):
        s, v = np.r_[s, T], np.r_[v, np.interp(T, steps, values)]
    return s, v


def mean_over_window(steps: np.ndarray, values: np.ndarray, T: float) -> tuple[float, float]:
    """``(mean of values over [steps[0], T] by the trapezoid rule, end of the window)``.

    NaN when the window holds fewer than two points (no span to average over).
    """
    s, v = _cut(np.asarray(steps, float), np.asarray(values, float), T)
    if len(s) < 2 or s[-1] <= s[0]:
        return math.nan, float(s[-1]) if len(s) else math.nan
    area = float(np.sum((v[1:] + v[:-1]) * np.diff(s)) / 2)
    return area / float(s[-1] - s[0]), float(s[-1])


def _loss_reading(steps: np.ndarray, loss: np.ndarray, T: float) -> tuple[float, float]:
    """``(mean −dL/ds over the window, relative drop)``; NaN without two finite points."""
    ok = np.isfinite(loss)
    if ok.sum() < 2:
        return math.nan, math.nan
    s, v = _cut(steps[ok], loss[ok], T)
    if len(s) < 2 or s[-1] <= s[0]:
        return math.nan, math.nan
    drop = float(v[0] - v[-1])
    return drop / float(s[-1] - s[0]), drop / float(v[0]) if v[0] != 0 else math.nan


def _one_run(curves: pd.DataFrame, T: float) -> dict:
    """Lead reading of one run; ``curves`` is indexed by step with columns ``acc_<subset>`` and
    optionally ``loss_<subset>``."""
    acc = curves[["acc_clean", "acc_noisy"]].dropna()
    out = dict.fromkeys(LEAD_COLUMNS, math.nan)
    out["window"], out["noisy_leads"] = float(T), None  # None: a null bool in Parquet
    if acc.empty:
        return out
    steps = acc.index.to_numpy(float)
    lead = (acc["acc_noisy"] - acc["acc_clean"]).to_numpy(float)
    out["lead_area"], out["window_end"] = mean_over_window(steps, lead, T)
    out["init_lead"] = float(lead[0])
    if not math.isnan(out["lead_area"]):
        out["noisy_leads"] = bool(out["lead_area"] > 0)
    after = np.flatnonzero(steps > 0)
    if len(after):
        i = int(after[0])
        out["first_step"], out["first_lead"] = steps[i], float(lead[i])
        if lead[i] > 0:
            stop = np.flatnonzero(lead[i:] <= 0)
            out["lead_until"] = steps[i + int(stop[0]) - 1] if len(stop) else steps[-1]
    for name in SUBSETS:
        col = f"loss_{name}"
        if col in curves:
            loss = curves[col].to_numpy(float)
            out[f"loss_rate_{name}"], out[f"loss_drop_{name}"] = _loss_reading(
                curves.index.to_numpy(float), loss, T)
    return out


def lead_readings(metrics: pd.DataFrame, *, window: float = DEFAULT_WINDOW) -> pd.DataFrame:
    """Early-lead reading per run (module docstring), one row per ``run_id`` that has both
    clean- and noisy-train accuracy (runs with α = 0 have no noisy subset and get no row).

    ``metrics`` is the store's long frame (``run_id, epoch, split, metric, value``); ``window``
    is ``T`` in steps (> 0). Columns: ``run_id`` and :data:`LEAD_COLUMNS`.
    """
    if not window > 0 or not math.isfinite(window):
        raise ValueError(f"lead_readings: window must be a number of steps > 0, got {window}")
    need = ("run_id", "epoch", "split", "metric", "value")
    missing = [c for c in need if c not in metrics.columns]
    if missing:
        raise KeyError(f"lead_readings: frame has no column(s) {missing}")
    rows = metrics[metrics["split"].isin(list(SUBSETS.values()))
                   & metrics["metric"].isin(["acc", "loss"])]
    rows = rows.assign(key=rows["metric"] + "_" + rows["split"].map(
        {v: k for k, v in SUBSETS.items()}))
    wide = rows.pivot_table(index=["run_id", "epoch"], columns="key", values="value",
                            aggfunc="last")
    out = []
    for run_id, curves in wide.groupby(level="run_id", sort=False):
        curves = curves.droplevel("run_id").sort_index()
        if not {"acc_clean", "acc_noisy"} <= set(curves.columns):
            continue
        if curves["acc_noisy"].notna().any() and curves["acc_clean"].notna().any():
            out.append({"run_id": run_id, **_one_run(curves, window)})
    return pd.DataFrame(out, columns=["run_id", *LEAD_COLUMNS])
