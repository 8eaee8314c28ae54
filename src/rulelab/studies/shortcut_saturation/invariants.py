"""What a smaller scale must keep to be a fair test of study S's headline (issue 20).

The paper (SPEC S.1–S.3) trains a 2-layer transformer of 72,066 parameters on N = 16,384
examples — 4.4 parameters per example — with full-batch AdamW at lr 1e-3, weight decay 0.1,
for 15,000 steps. Three quantities carry its mechanism and must survive a cheaper copy:

- **parameters per training example** (2L; fair: 3–6.5, paper 4.4). With many more parameters
  per example the whole training set, anti examples included, is memorized within a few
  hundred steps (the medium preset's pilots: 34 per example, train loss exactly 0 by epoch
  300), which removes the persistent minority gradient the paper's mechanism runs on.
- **AdamW's weight-decay time** lr·wd·steps (fair: ≥ 1, paper 1.5): the number of decay time
  constants τ = 1/(lr·wd) the run lasts. Below one, weight decay has not yet acted, and the
  paper's transient generalization (S6) says it is how runs leave memorization.
- **Adam's optimization time** lr·steps (fair: within a factor of 2 of the paper's 15): how far
  a weight can travel, since Adam's steps have size ≈ lr whatever the gradient's scale.

and two that define the regime: **full batch** (the paper's; minibatch noise is another
regularizer) and **the task** (n = 10, V = 64, sum mod 2, max shortcut). A claim read where one
of these is broken reads "not testable at this scale", never "does not show".

One more is read from the runs' curves, not their configs: **the shortcut phase is reached**.
The paper's mechanism starts there — its models "first develop a strong shortcut circuit" (seeds
summary; SPEC S.4.6) and the rule can only win afterwards (phase 2). A scale whose imbalanced
runs (|r − ½| ≥ 0.4) memorize their anti examples before the shortcut has taken hold runs in
another regime, whatever its configs keep. Measured in rulelab (2L, r = 0.9, the paper's
schedule; `results/ladder/README.md`): the shortcut's peak agreement with the model's
predictions on val ∪ adv, before the anti examples are memorized, is 0.98 at the paper's own
setting (N 16,384, d 64, seed 0) and 0.84–0.87, 0.86–0.90 and 0.94 on the ladder's N 2,048,
4,096 and 8,192 rungs (2L). The SPEC's phase detector asks 99%; the paper's setting itself peaks
at 98.5% val in rulelab, so the gate asks val ≥ 95% with adv ≤ 5% (or the mirror image below
chance) at one evaluation — a threshold set after those probes, which the paper's setting passes
and no CPU rung does; the median peak agreement is printed beside it so a near miss reads as
one. The check uses no outcome the claims read (a run that generalizes counts as reaching it),
so it cannot turn a "shows" into "not testable".

Invariants are computed from the configs of the runs a lab holds, not from a recipe's name,
so a user's own lab at a faithful setting gets its claims read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rulelab.study import Invariant

PAPER_N = 16384
PAPER_PARAMS_2L = 72066  # the paper's 2-layer model: d_model 64, d_ff 128, 2 heads, V 64, n 10
PARAMS_PER_EXAMPLE = (3.0, 6.5)  # fair range for the 2-layer model (paper 4.4)
WD_TIME_MIN = 1.0  # at least one AdamW weight-decay time constant (paper 1.5)
OPT_TIME = (7.5, 30.0)  # lr·steps within a factor of 2 of the paper's 15
PAPER_TASK = {"seq_len": 10, "vocab": 64, "label_mod": 2, "shortcut": "max"}

PHASE1_AGREE = 0.95  # the shortcut phase: predictions follow the shortcut (s, or 1 − s below
PHASE1_OTHER = 0.05  # chance) on ≥ 95% of one split while the other stays ≤ 5% (see above)
IMBALANCED = 0.4  # runs with |r − ½| ≥ 0.4 (r ≤ 0.1 or ≥ 0.9) have a shortcut phase to reach
REGIME_MIN = 0.5  # a fair scale: at least half of them reach it (the paper's: all)

# Every invariant name, for a claim's ``needs``.
ALL = ("params_per_example", "wd_time", "opt_time", "full_batch", "task", "regime")


def param_count(*, layers: int, d_model: int, d_mlp: int, vocab: int, seq_len: int,
                label_mod: int, ln: bool = True, **_) -> int:
    """Parameters of one member of :class:`rulelab.models.transformer.EnsembleTransformer`
    (SPEC S.2): embeddings (V + 1 tokens with CLS, n + 1 positions), per block attention
    (W_Q, W_K, W_V, W_O over all heads, 4·d² + 4·d with biases), an MLP (2·d·d_mlp + d_mlp + d)
    and two LayerNorms, a final LayerNorm and the unembedding to k classes. Heads split d_model,
    so their number does not change the count."""
    d = d_model
    mlp = 2 * d * d_mlp + d_mlp + d if d_mlp else 0
    per_block = 4 * d * d + 4 * d + mlp + (4 * d if ln else 0)
    return ((vocab + 1) * d + (seq_len + 1) * d + layers * per_block + (2 * d if ln else 0)
            + d * label_mod + label_mod)


def _col(runs: pd.DataFrame, field: str) -> pd.Series:
    """``runs[field]``, the config's default where the column or a value is missing."""
    from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

    default = MPSPRunConfig.model_fields[field].default
    if field not in runs.columns:
        return pd.Series([default] * len(runs), index=runs.index)
    return runs[field].where(runs[field].notna(), default)


def _steps(runs: pd.DataFrame) -> np.ndarray:
    """AdamW steps per run: epochs × minibatches per epoch (one when full batch)."""
    n, b = _col(runs, "n_train").astype(int), _col(runs, "batch_size").astype(int)
    per_epoch = np.where((b == 0) | (b >= n), 1, -(-n // b.clip(lower=1)))
    return _col(runs, "epochs").astype(int).to_numpy() * per_epoch


def _span(values, fmt: str) -> str:
    lo, hi = float(np.min(values)), float(np.max(values))
    return format(lo, fmt) if np.isclose(lo, hi) else f"{format(lo, fmt)}–{format(hi, fmt)}"


def _headline_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs the headline claims read: MPSP runs that are not failed."""
    if "task" in runs.columns:
        runs = runs[runs["task"].fillna("mpsp") == "mpsp"]
    if "status" in runs.columns:
        runs = runs[runs["status"] != "failed"]
    return runs


def _val_adv(metrics: pd.DataFrame) -> pd.DataFrame:
    """``[run_id, epoch] × (val, adv)`` accuracies (empty columns where a split is missing)."""
    acc = metrics[(metrics["metric"] == "acc") & metrics["split"].isin(("val", "adv"))]
    wide = acc.pivot_table(index=["run_id", "epoch"], columns="split", values="value")
    return wide.reindex(columns=["val", "adv"])


def reached_shortcut_phase(runs: pd.DataFrame, metrics: pd.DataFrame) -> pd.Series:
    """Per run of ``runs`` (indexed like it): whether any evaluation shows the shortcut phase —
    val ≥ 95% with adv ≤ 5% (the shortcut s), or adv ≥ 95% with val ≤ 5% (1 − s, below
    chance) — or the run generalized. NaN where the run has no val/adv curve."""
    wide = _val_adv(metrics)
    val, adv = wide["val"], wide["adv"]
    phase = (((val >= PHASE1_AGREE) & (adv <= PHASE1_OTHER))
             | ((adv >= PHASE1_AGREE) & (val <= PHASE1_OTHER))
             | ((val >= PHASE1_AGREE) & (adv >= PHASE1_AGREE)))
    reached = phase[val.notna() & adv.notna()].groupby(level="run_id").any()
    out = runs["run_id"].map(reached).astype(float)
    if "generalized" in runs.columns:
        out[runs["generalized"].fillna(False).astype(bool).to_numpy()] = 1.0
    return out


def peak_agreement(runs: pd.DataFrame, metrics: pd.DataFrame) -> pd.Series:
    """Per run: the largest share of val ∪ adv (equal sizes) on which the predictions follow
    the shortcut, s or 1 − s — for k = 2, ``max((val + 1 − adv) / 2, (1 − val + adv) / 2)``
    over the evaluations. NaN without curves."""
    wide = _val_adv(metrics)
    s_share = (wide["val"] + 1 - wide["adv"]) / 2
    agree = np.maximum(s_share, 1 - s_share).groupby(level="run_id").max()
    return runs["run_id"].map(agree).astype(float)


def _regime(runs: pd.DataFrame, metrics: pd.DataFrame | None) -> Invariant:
    """The shortcut phase reached by at least half of the imbalanced runs (see the module's
    docstring); not measured without curves, and kept where no run is imbalanced."""
    label = ("imbalanced runs (|r − ½| ≥ 0.4) that reach the shortcut phase (val ≥ 95%, adv "
             "≤ 5%, or the mirror image)")
    paper, allowed = "1 of 1 (0.98; rulelab, 2L r = 0.9)", f"≥ {REGIME_MIN:.0%}"
    r = _col(runs, "ratio").astype(float)
    imbalanced = runs[(r - 0.5).abs().to_numpy() >= IMBALANCED - 1e-9]
    if metrics is None:
        return Invariant("regime", label, "not measured (no curves)", paper, allowed, True,
                         measured=False)
    if imbalanced.empty:
        return Invariant("regime", label, "no imbalanced runs", paper, allowed, True)
    reached = reached_shortcut_phase(imbalanced, metrics).dropna()
    if reached.empty:
        return Invariant("regime", label, "no curves yet", paper, allowed, True,
                         measured=False)
    peak = float(peak_agreement(imbalanced.loc[reached.index], metrics).median())
    value = f"{int(reached.sum())} of {len(reached)} (median peak agreement {peak:.2f})"
    return Invariant("regime", label, value, paper, allowed,
                     bool(reached.mean() >= REGIME_MIN))


def invariants(runs: pd.DataFrame, metrics: pd.DataFrame | None = None
               ) -> tuple[Invariant, ...]:
    """The scale's invariants from the configs of ``runs`` (a lab's runs frame) and, for the
    regime, the val/adv curves in ``metrics`` (long format: run_id, epoch, split, metric,
    value). Where runs differ the value is a range, kept only when every run keeps it."""
    runs = _headline_runs(runs)
    if runs.empty:
        return ()
    fields = ("layers", "d_model", "d_mlp", "vocab", "seq_len", "label_mod", "ln")
    cfg = pd.DataFrame({f: _col(runs, f) for f in fields})
    params = np.array([param_count(**row) for row in cfg.to_dict("records")])
    per_example = params / _col(runs, "n_train").astype(int).to_numpy()
    two = (cfg["layers"].astype(int) == 2).to_numpy()
    ppe = per_example[two] if two.any() else per_example
    lr = _col(runs, "lr").astype(float).to_numpy()
    wd = _col(runs, "weight_decay").astype(float).to_numpy()
    steps = _steps(runs)
    wd_time, opt_time = lr * wd * steps, lr * steps
    b, n = _col(runs, "batch_size").astype(int), _col(runs, "n_train").astype(int)
    full = ((b == 0) | (b >= n)).to_numpy()
    task_ok = np.logical_and.reduce([(_col(runs, f) == v).to_numpy()
                                     for f, v in PAPER_TASK.items()])
    tasks = sorted({f"n={r.seq_len}, V={r.vocab}, k={r.label_mod}, {r.shortcut}"
                    for r in pd.DataFrame({f: _col(runs, f) for f in PAPER_TASK}).itertuples()})
    return (
        Invariant("params_per_example", "parameters per training example"
                  + (" (2L)" if two.any() else f" ({int(cfg['layers'].iloc[0])}L)"),
                  _span(ppe, ".1f"), f"{PAPER_PARAMS_2L / PAPER_N:.1f}",
                  f"{PARAMS_PER_EXAMPLE[0]:g}–{PARAMS_PER_EXAMPLE[1]:g}",
                  bool(np.all((ppe >= PARAMS_PER_EXAMPLE[0]) & (ppe <= PARAMS_PER_EXAMPLE[1])))),
        Invariant("wd_time", "AdamW weight-decay time lr·wd·steps", _span(wd_time, ".2g"),
                  "1.5", f"≥ {WD_TIME_MIN:g}", bool(np.all(wd_time >= WD_TIME_MIN - 1e-9))),
        Invariant("opt_time", "Adam's optimization time lr·steps", _span(opt_time, ".3g"), "15",
                  f"{OPT_TIME[0]:g}–{OPT_TIME[1]:g}",
                  bool(np.all((opt_time >= OPT_TIME[0] - 1e-9) & (opt_time <= OPT_TIME[1])))),
        Invariant("full_batch", "full-batch steps", "yes" if full.all() else (
            "no" if not full.any() else "some runs"), "yes", "same", bool(full.all())),
        Invariant("task", "task (n, V, k, shortcut)", "; ".join(tasks),
                  "n=10, V=64, k=2, max", "same", bool(task_ok.all())),
        _regime(runs, metrics),
    )


def describe_invariants(runs: pd.DataFrame, metrics: pd.DataFrame | None = None) -> str:
    """One line per invariant: this lab's value beside the paper's and the fair range, and
    whether it is kept — what a reader needs to know before reading the rates as a test."""
    held = invariants(runs, metrics)
    if not held:
        return ""
    lines = [f"{i.mark} {i.label}: {i.value} (paper {i.paper}"
             + (f", fair {i.allowed}" if i.allowed not in ("same", i.paper) else "") + ")"
             for i in held]
    kept = all(i.kept for i in held)
    unmeasured = [i.label for i in held if not i.measured]
    head = ("This scale keeps the paper's invariants, so its rates test the headline:"
            if kept and not unmeasured else
            "This scale keeps the invariants measured so far (? : not measured yet), so its "
            "rates test the headline only if those hold too:" if kept
            else "This scale breaks an invariant the headline depends on (✗), so its rates "
            "cannot test the headline — read them as this regime's, not as evidence for or "
            "against the paper:")
    return "\n".join([head, *lines])
