"""Phase detection on val / adv curves, one row per run (SPEC S.4.6, S.3).

Definitions (all thresholds are fields of :class:`PhaseThresholds`; epochs are evaluation
epochs, so every answer is only as fine as ``eval_every``):

* **phase 1** (shortcut learned): the first evaluation at which the model's predictions agree
  with a *shortcut map* on ≥ ``shortcut_fit`` (99%) of val ∪ adv (val and adv are weighted
  equally: both hold ``n_eval`` examples). The shortcut map is s itself or, for k = 2, its flip
  1 − s — the better of the two, i.e. the best permutation of the two classes — so phase 1 is
  found below chance (r < ½ rewards 1 − s) as well as above it. ``phase1_map`` says which.
  The agreement is read from the stored ``shortcut_acc`` (predictions equal to s, on val and
  adv) when present; for k = 2 it also follows from the accuracies (binary predictions, val
  label = s, adv label = 1 − s: agreement with s is ``val acc`` on val and ``1 − adv acc`` on
  adv), which is how labs written before ``shortcut_acc`` are read. For k = 3 without
  ``shortcut_acc``, and for k = 3 at r < 1/3 (anti examples then outnumber each consistent
  class, so no shortcut map fits the training data), phase 1 is **undefined** (NA, and
  ``phase1_basis`` says why).
* **phase-2 onset** (the rule starts to win): after phase 1, the split the shortcut map gets
  *wrong* (adv for s, val for 1 − s) must climb while the split it gets right stays
  ``≥ val_high`` (0.99). The onset is the first evaluation ``j`` at which the climbing split is
  ``≥ m_j + rise`` (``rise`` = 0.05), where ``m_j`` is its lowest value over the ``window``
  evaluations before ``j`` (``window_frac`` = 10% of the evaluations from phase 1 on, at least
  ``sustain`` + 1) — measured from the trough, because it often keeps falling after phase 1 —
  and *sustained*: at each of the next ``sustain`` (3) evaluations it stays ``≥ m_j + rise``
  with the other split ``≥ val_high``. The window makes the onset a *climb*, not a drift: a
  trough taken since phase 1 (the rule before issue 21) called a slow creep of a few points
  over the whole run an onset (``rulelab calibrate``: 100% of such nulls; now ≤ 1%). A
  candidate whose sustain window runs past the end of the log cannot be judged: it is
  **censored** (``phase2_onset`` NA, ``phase2_censored`` True), never counted as an onset.
  ``climb_start`` is the last evaluation before ``j`` at the trough ``m_j``.
* **generalization** (S.3): the first evaluation with val and adv both ``≥ generalized`` (1.0)
  (``gen_epoch``); the paper's adv-only event is ``adv_gen_epoch`` / ``adv_generalized``.
* **transient** (S.3): generalized, then adv fell below ``transient`` (0.95) later.

Evaluations where val or adv accuracy is NaN are dropped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

EPOCH_COLUMNS = ("phase1_epoch", "phase2_onset", "climb_start", "gen_epoch", "adv_gen_epoch")
FLAG_COLUMNS = ("phase2_censored", "generalized", "adv_generalized", "transient")
COLUMNS = ["run_id", "phase1_epoch", "phase1_map", "phase1_basis", "adv_at_phase1",
           "phase2_onset", "phase2_censored", "climb_start", "gen_epoch", "generalized",
           "adv_gen_epoch", "adv_generalized", "transient", "max_adv_acc", "final_adv_acc",
           "n_evals"]


@dataclass(frozen=True)
class PhaseThresholds:
    """Thresholds of the S.4.6 phase definitions (see the module docstring)."""

    shortcut_fit: float = 0.99  # phase 1: a shortcut map predicts ≥ 99% of val ∪ adv
    val_high: float = 0.99  # phase 2: the split the shortcut gets right stays ≥ 99%
    rise: float = 0.05  # a climb: this far above its trough since phase 1
    sustain: int = 3  # evaluations after the onset that must hold the climb
    window_frac: float = 0.1  # the trough is read over this share of the evaluations before j
    generalized: float = 1.0  # S.3: val and adv both reach 100% at one evaluation
    transient: float = 0.95  # S.3: after generalizing, adv falls below this


def shortcut_agreement(val: np.ndarray, adv: np.ndarray, *, k: int | None,
                       shortcut_acc: tuple[np.ndarray, np.ndarray] | None = None,
                       ratio: float | None = None) -> tuple[dict[str, np.ndarray], str]:
    """``({map: agreement on val ∪ adv [T]}, basis)`` for the shortcut maps that apply.

    ``shortcut_acc`` = (val, adv) fractions of predictions equal to s. Maps: ``"s"`` and, for
    k = 2, ``"1-s"`` (binary predictions: agreement with 1 − s is 1 − agreement with s). An
    empty dict means phase 1 is undefined; ``basis`` then says why.
    """
    if k == 3 and ratio is not None and ratio < 1 / 3:
        return {}, "undefined: k=3 at r<1/3 (no shortcut map fits)"
    if shortcut_acc is not None:
        s, basis = (shortcut_acc[0] + shortcut_acc[1]) / 2, "shortcut_acc"
    elif k == 2:
        s, basis = (val + (1 - adv)) / 2, "acc (k=2)"
    else:
        why = "k unknown" if k is None else f"k={k}"
        return {}, f"undefined: {why} without shortcut_acc"
    return ({"s": s, "1-s": 1 - s} if k == 2 else {"s": s}), basis


def detect_phases(epochs: np.ndarray, val: np.ndarray, adv: np.ndarray,
                  th: PhaseThresholds | None = None, *, k: int | None = 2,
                  shortcut_acc: tuple[np.ndarray, np.ndarray] | None = None,
                  ratio: float | None = None) -> dict:
    """One run's phases from its evaluations ``[T]`` (sorted by epoch). Epochs or ``None``.

    ``k`` is the label modulus (None: unknown), ``shortcut_acc`` the stored (val, adv)
    agreement with s per evaluation, ``ratio`` the run's r (see :func:`shortcut_agreement`).
    """
    th = th or PhaseThresholds()
    epochs, val, adv = (np.asarray(a, dtype=float) for a in (epochs, val, adv))
    out = dict(phase1_epoch=None, phase1_map=None, phase1_basis=None, adv_at_phase1=np.nan,
               phase2_onset=None, phase2_censored=False, climb_start=None, gen_epoch=None,
               generalized=False, adv_gen_epoch=None, adv_generalized=False, transient=False,
               max_adv_acc=float(adv.max()) if len(adv) else np.nan,
               final_adv_acc=float(adv[-1]) if len(adv) else np.nan, n_evals=len(adv))
    if len(a_gen := np.flatnonzero(adv >= th.generalized)):
        out.update(adv_gen_epoch=int(epochs[a_gen[0]]), adv_generalized=True)
    if len(gen := np.flatnonzero((adv >= th.generalized) & (val >= th.generalized))):
        g = gen[0]
        out.update(gen_epoch=int(epochs[g]), generalized=True,
                   transient=bool((adv[g + 1 :] < th.transient).any()))
    maps, out["phase1_basis"] = shortcut_agreement(val, adv, k=k, shortcut_acc=shortcut_acc,
                                                   ratio=ratio)
    fits = {m: np.flatnonzero(a >= th.shortcut_fit) for m, a in maps.items()}
    fits = {m: f[0] for m, f in fits.items() if len(f)}
    if not fits:
        return out
    shortcut = min(fits, key=fits.get)  # the map that fits first
    i1 = fits[shortcut]
    out.update(phase1_epoch=int(epochs[i1]), phase1_map=shortcut, adv_at_phase1=float(adv[i1]))
    climbing, holding = (adv, val) if shortcut == "s" else (val, adv)
    onset = _phase2(climbing[i1:], holding[i1:], th)
    if onset == "censored":
        out["phase2_censored"] = True
    elif onset is not None:
        j, start = onset
        out.update(phase2_onset=int(epochs[i1 + j]), climb_start=int(epochs[i1 + start]))
    return out


def _phase2(a: np.ndarray, v: np.ndarray, th: PhaseThresholds):
    """``(onset, climb start)`` indices into ``a`` (the climbing split from phase 1 on, ``v``
    the holding one), ``"censored"`` when the first candidate that holds runs off the log's
    end, or None."""
    w = max(th.sustain + 1, int(np.ceil(th.window_frac * len(a))))
    # m_j = min a[j-w .. j-1]: the trough of the last w evaluations (inf at j = 0)
    padded = np.concatenate([np.full(w, np.inf), a])
    prev = np.lib.stride_tricks.sliding_window_view(padded, w)[: len(a)].min(axis=1)
    for j in np.flatnonzero((v >= th.val_high) & (a >= prev + th.rise)):
        level, window = prev[j] + th.rise, slice(j, j + th.sustain + 1)
        if (a[window] >= level).all() and (v[window] >= th.val_high).all():
            if j + th.sustain >= len(a):  # the window is cut by the end of the log
                return "censored"
            lo = max(0, j - w)
            return j, lo + np.flatnonzero(a[lo:j] == prev[j])[-1]
    return None


def _run_info(runs: pd.DataFrame | None) -> dict:
    """run_id → (k, ratio) from a runs frame (columns ``label_mod``, ``ratio``)."""
    if runs is None or "run_id" not in runs.columns:
        return {}
    k = runs["label_mod"] if "label_mod" in runs.columns else pd.Series(np.nan, runs.index)
    r = runs["ratio"] if "ratio" in runs.columns else pd.Series(np.nan, runs.index)
    return {rid: (None if pd.isna(kk) else int(kk), None if pd.isna(rr) else float(rr))
            for rid, kk, rr in zip(runs["run_id"], k, r, strict=True)}


def phase_table(metrics: pd.DataFrame, th: PhaseThresholds | None = None, *,
                runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run from a long metrics frame (S.4.6).

    ``metrics`` has columns ``run_id, epoch, split, metric, value`` (the store's schema); rows
    with ``metric`` ``acc`` (and ``shortcut_acc`` where stored) on split ``val`` / ``adv`` are
    used. ``runs`` (``run_id``, ``label_mod``, ``ratio``) gives each run's k and r; without it
    k is unknown, so phase 1 needs the stored ``shortcut_acc`` and only the map s is tried.
    Returns the columns of ``COLUMNS``: epochs nullable Int64 (NA when undefined), flags bool;
    the thresholds used are attached as ``frame.attrs["thresholds"]``.
    """
    th = th or PhaseThresholds()
    missing = {"run_id", "epoch", "split", "metric", "value"} - set(metrics.columns)
    if missing:
        raise ValueError(f"metrics frame lacks column(s) {sorted(missing)}")
    rows_ = metrics[metrics["metric"].isin(["acc", "shortcut_acc"])
                    & metrics["split"].isin(["val", "adv"])]
    wide = rows_.pivot_table(index=["run_id", "epoch"], columns=["metric", "split"],
                             values="value", aggfunc="last")
    wide.columns = [f"{split}_{m}" for m, split in wide.columns]
    wide = wide.reindex(columns=["val_acc", "adv_acc", "val_shortcut_acc", "adv_shortcut_acc"])
    wide = wide.dropna(subset=["val_acc", "adv_acc"])
    info = _run_info(runs)
    rows = []
    for run_id, curve in wide.groupby(level="run_id", sort=True):
        epochs = curve.index.get_level_values("epoch").to_numpy()
        sa = curve[["val_shortcut_acc", "adv_shortcut_acc"]]
        stored = (sa["val_shortcut_acc"].to_numpy(), sa["adv_shortcut_acc"].to_numpy()) if (
            sa.notna().all().all()) else None
        k, ratio = info.get(run_id, (None, None))
        rows.append({"run_id": run_id, **detect_phases(
            epochs, curve["val_acc"].to_numpy(), curve["adv_acc"].to_numpy(), th, k=k,
            shortcut_acc=stored, ratio=ratio)})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for c in EPOCH_COLUMNS:
        frame[c] = frame[c].astype("Int64")
    for c in FLAG_COLUMNS:
        frame[c] = frame[c].astype(bool)
    frame.attrs["thresholds"] = asdict(th)
    return frame
