"""Phase detection on val / adv accuracy curves, one row per run (SPEC S.4.6, S.3).

Definitions (all thresholds are fields of :class:`PhaseThresholds`; epochs are evaluation
epochs, so every answer is only as fine as ``eval_every``):

* **phase 1** (shortcut learned): the first evaluation with ``val ≥ val_high`` (0.99) while
  ``adv < adv_low`` (0.5). Undefined (NA) for a run that never shows it, e.g. one that learns
  the rule before the shortcut saturates.
* **phase-2 onset** (the rule starts to win): the first evaluation ``j`` after phase 1 at which
  ``adv[j] ≥ m_j + rise`` (``rise`` = 0.05), where ``m_j`` is the lowest adv accuracy seen from
  phase 1 up to (not including) ``j`` — measured from the trough, because adv often keeps
  falling after phase 1 before it climbs — with ``val[j] ≥ val_high``, and *sustained*: at each
  of the next ``sustain`` (3) evaluations adv stays ``≥ m_j + rise`` and val ``≥ val_high``
  (the window is cut at the end of the log). ``climb_start`` is the last evaluation before
  ``j`` at which adv sat at that trough ``m_j``: where the climb began.
* **generalization** (S.3): the first evaluation with ``adv ≥ generalized`` (1.0).
* **transient** (S.3): generalized, then adv fell below ``transient`` (0.95) later.

Evaluations where val or adv is NaN are dropped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

EPOCH_COLUMNS = ("phase1_epoch", "phase2_onset", "climb_start", "gen_epoch")


@dataclass(frozen=True)
class PhaseThresholds:
    """Thresholds of the S.4.6 phase definitions (see the module docstring)."""

    val_high: float = 0.99  # "val ≥ 99%": the shortcut (or rule) fits the val split
    adv_low: float = 0.5  # phase 1 needs adv below this: the shortcut, not the rule, is used
    rise: float = 0.05  # a climb: adv this far above its trough since phase 1
    sustain: int = 3  # evaluations after the onset that must hold the climb
    generalized: float = 1.0  # S.3: adv reaches 100%
    transient: float = 0.95  # S.3: after generalizing, falls below this


def detect_phases(
    epochs: np.ndarray, val: np.ndarray, adv: np.ndarray, th: PhaseThresholds | None = None
) -> dict:
    """One run's phases from its evaluations ``[T]`` (sorted by epoch). Epochs or ``None``."""
    th = th or PhaseThresholds()
    epochs, val, adv = (np.asarray(a) for a in (epochs, val, adv))
    out = dict(phase1_epoch=None, adv_at_phase1=np.nan, phase2_onset=None, climb_start=None,
               gen_epoch=None, generalized=False, transient=False,
               max_adv_acc=float(adv.max()) if len(adv) else np.nan,
               final_adv_acc=float(adv[-1]) if len(adv) else np.nan, n_evals=len(adv))
    gen = np.flatnonzero(adv >= th.generalized)
    if len(gen):
        g = gen[0]
        out.update(gen_epoch=int(epochs[g]), generalized=True,
                   transient=bool((adv[g + 1 :] < th.transient).any()))
    p1 = np.flatnonzero((val >= th.val_high) & (adv < th.adv_low))
    if not len(p1):
        return out
    i1 = p1[0]
    out.update(phase1_epoch=int(epochs[i1]), adv_at_phase1=float(adv[i1]))
    a, v = adv[i1:], val[i1:]  # [T'] from phase 1 on
    trough = np.minimum.accumulate(a)  # trough[j] = min a[0..j]
    prev = np.concatenate([[np.inf], trough[:-1]])  # m_j = min a[0..j-1]
    for j in np.flatnonzero((v >= th.val_high) & (a >= prev + th.rise)):
        level, window = prev[j] + th.rise, slice(j, j + th.sustain + 1)
        if (a[window] >= level).all() and (v[window] >= th.val_high).all():
            start = np.flatnonzero(a[:j] == prev[j])[-1]
            out.update(phase2_onset=int(epochs[i1 + j]), climb_start=int(epochs[i1 + start]))
            break
    return out


def phase_table(metrics: pd.DataFrame, th: PhaseThresholds | None = None) -> pd.DataFrame:
    """One row per run from a long metrics frame (S.4.6).

    ``metrics`` has columns ``run_id, epoch, split, metric, value`` (the store's schema); rows
    with ``metric == "acc"`` and split ``val`` / ``adv`` are used. Returns columns run_id,
    phase1_epoch, adv_at_phase1, phase2_onset, climb_start, gen_epoch (nullable Int64, NA when
    undefined), generalized, transient, max_adv_acc, final_adv_acc, n_evals; the thresholds
    used are attached as ``frame.attrs["thresholds"]``.
    """
    th = th or PhaseThresholds()
    missing = {"run_id", "epoch", "split", "metric", "value"} - set(metrics.columns)
    if missing:
        raise ValueError(f"metrics frame lacks column(s) {sorted(missing)}")
    acc = metrics[(metrics["metric"] == "acc") & metrics["split"].isin(["val", "adv"])]
    wide = acc.pivot_table(index=["run_id", "epoch"], columns="split", values="value",
                           aggfunc="last").reindex(columns=["val", "adv"]).dropna()
    rows = []
    for run_id, curve in wide.groupby(level="run_id", sort=True):
        epochs = curve.index.get_level_values("epoch").to_numpy()
        rows.append({"run_id": run_id, **detect_phases(
            epochs, curve["val"].to_numpy(), curve["adv"].to_numpy(), th)})
    columns = ["run_id", *EPOCH_COLUMNS[:1], "adv_at_phase1", *EPOCH_COLUMNS[1:], "generalized",
               "transient", "max_adv_acc", "final_adv_acc", "n_evals"]
    frame = pd.DataFrame(rows, columns=columns)
    for c in EPOCH_COLUMNS:
        frame[c] = frame[c].astype("Int64")
    frame["generalized"] = frame["generalized"].astype(bool)
    frame["transient"] = frame["transient"].astype(bool)
    frame.attrs["thresholds"] = asdict(th)
    return frame
