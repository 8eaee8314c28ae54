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
  what it has (``window_end`` says where the reading ends).
- ``first_lead``: the lead at the first evaluation after step 0 (``first_step``; the paper's
  "epoch 1"), and ``lead_until``: the last step of the uninterrupted run of evaluations from
  ``first_step`` on which noisy leads (NaN when it does not lead at ``first_step``).
- ``init_lead``: the lead at the first evaluation (``s₀``, the untrained network). Both subsets
  start near chance, 1/P, but a small subset's accuracy at init is off by sampling noise (a
  point or more at P = 31). ``lead_area > 0`` counted that offset as a lead: a frozen network
  (lr 1e-7) read "noisy leads" in 11 of 16 runs (issue 21, item 4).
- ``lead_gain = lead_area − init_lead``: the mean lead *gained* since init, which that offset
  does not move, and ``lead_se``: a bound on its standard error when noisy and clean examples
  are fit alike (the null). Then the noisy subset is a random draw of ``n_noisy`` of the
  ``N = n_noisy + n_clean`` training examples, and the gain at step ``s`` is the difference of
  the two subsets' means of ``d = correct(s) − correct(s₀)``, whose variance is at most
  ``E[d²]·N/(N − 1)·(1/n_noisy + 1/n_clean)``; ``E[d²]``, the share of examples whose
  correctness changed, is at most ``min(1, q(s) + q(s₀))`` with ``q`` the pooled training
  accuracy. The SE of the window mean is at most the window mean of these (0 at ``s₀``).
- ``noisy_leads``: ``lead_gain > z·lead_se`` with ``z = 1.645`` — one-sided, so that at most
  5% of runs without a preference for the noisy examples read "noisy leads" (a frozen network:
  none, since nothing changes). None (untested) when the subset sizes are unknown.
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
LEAD_Z = 1.6448536269514722  # Φ⁻¹(0.95): a one-sided test at 5%
SUBSETS = {"clean": "train_clean", "noisy": "train_noisy"}
LEAD_COLUMNS = ("window", "window_end", "lead_area", "init_lead", "lead_gain", "lead_se",
                "noisy_leads", "first_step", "first_lead", "lead_until", "loss_rate_clean",
                "loss_rate_noisy", "loss_drop_clean", "loss_drop_noisy")


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


def gain_se_bound(steps: np.ndarray, acc_clean: np.ndarray, acc_noisy: np.ndarray,
                  n_clean: float, n_noisy: float, T: float) -> float:
    """Bound on the SE of the mean lead gained over ``[steps[0], T]`` when noisy and clean
    examples are fit alike (module docstring); NaN without both subset sizes."""
    if not (n_clean > 0 and n_noisy > 0):
        return math.nan
    N = n_clean + n_noisy
    q = (n_noisy * np.asarray(acc_noisy, float) + n_clean * np.asarray(acc_clean, float)) / N
    changed = np.minimum(1.0, q + q[0])
    se = np.sqrt(changed * N / (N - 1) * (1.0 / n_noisy + 1.0 / n_clean))
    se[0] = 0.0  # the gain at s₀ is 0 by definition
    return mean_over_window(steps, se, T)[0]


def _one_run(curves: pd.DataFrame, T: float, sizes: tuple[float, float]) -> dict:
    """Lead reading of one run; ``curves`` is indexed by step with columns ``acc_<subset>`` and
    optionally ``loss_<subset>``; ``sizes`` is ``(n_clean, n_noisy)`` (NaN if unknown)."""
    acc = curves[["acc_clean", "acc_noisy"]].dropna()
    out = dict.fromkeys(LEAD_COLUMNS, math.nan)
    out["window"], out["noisy_leads"] = float(T), None  # None: a null bool in Parquet
    if acc.empty:
        return out
    steps = acc.index.to_numpy(float)
    lead = (acc["acc_noisy"] - acc["acc_clean"]).to_numpy(float)
    out["lead_area"], out["window_end"] = mean_over_window(steps, lead, T)
    out["init_lead"] = float(lead[0])
    out["lead_gain"] = out["lead_area"] - out["init_lead"]
    out["lead_se"] = gain_se_bound(steps, acc["acc_clean"].to_numpy(), acc["acc_noisy"].to_numpy(),
                                   *sizes, T)
    if not (math.isnan(out["lead_gain"]) or math.isnan(out["lead_se"])):
        out["noisy_leads"] = bool(out["lead_gain"] > LEAD_Z * out["lead_se"])
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


def lead_readings(metrics: pd.DataFrame, *, window: float = DEFAULT_WINDOW,
                  sizes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Early-lead reading per run (module docstring), one row per ``run_id`` that has both
    clean- and noisy-train accuracy (runs with α = 0 have no noisy subset and get no row).

    ``metrics`` is the store's long frame (``run_id, epoch, split, metric, value``); ``window``
    is ``T`` in steps (> 0); ``sizes`` has ``run_id, n_clean, n_noisy``
    (:func:`.analyses.subsets.subset_sizes`; without it nothing is tested: ``noisy_leads`` is
    None). Columns: ``run_id`` and :data:`LEAD_COLUMNS`.
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
    known = {} if sizes is None else {
        r.run_id: (float(r.n_clean), float(r.n_noisy)) for r in sizes.itertuples()}
    out = []
    for run_id, curves in wide.groupby(level="run_id", sort=False):
        curves = curves.droplevel("run_id").sort_index()
        if not {"acc_clean", "acc_noisy"} <= set(curves.columns):
            continue
        if curves["acc_noisy"].notna().any() and curves["acc_clean"].notna().any():
            n = known.get(run_id, (math.nan, math.nan))
            out.append({"run_id": run_id, **_one_run(curves, window, n)})
    return pd.DataFrame(out, columns=["run_id", *LEAD_COLUMNS])
