"""The nulls of study S's phase readings (SPEC S.4.6, issue 21): how often the phase-2 onset and
the transient flag fire on simulated runs in which nothing happens, at a lab's own schedule.

Each simulated run has the lab's number of evaluations (``epochs // eval_every + 1``) and its
evaluation set size ``n_eval``: every accuracy is a binomial draw of ``n_eval`` examples
around a true accuracy, so the test-set noise is the lab's own. The detector is
:func:`~rulelab.studies.shortcut_saturation.analyses.phases.detect_phases` itself.

- **Onset null**: a run held in phase 1 from its first evaluation (val at 99.5%, adv at 0.5%),
  whose adv accuracy creeps up 10 points over the whole run — a slow drift, not a climb.
  **Effect**: the same run with a climb of 20 points over 5% of the run (held after), starting
  between 20% and 70% of the run.
- **Transient null**: a run that generalized at its first evaluation and stays there (true
  val and adv accuracy 99.9%). **Effect**: adv falls to 90% for 10% of the run, then recovers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rulelab.analysis.calibration import NullCheck
from rulelab.studies.shortcut_saturation.analyses.phases import PhaseThresholds, detect_phases

VAL, ADV_PHASE1, DRIFT = 0.995, 0.005, 0.10
CLIMB, CLIMB_FRAC = 0.20, 0.05
HELD, DIP, DIP_FRAC = 0.999, 0.90, 0.10


def _setting(configs: Sequence) -> tuple[int, int, str] | None:
    """(evaluations per run, n_eval, words) of the longest schedule among ``configs``."""
    if not configs:
        return None
    c = max(configs, key=lambda c: c.epochs // c.eval_every)
    n_evals = c.epochs // c.eval_every + 1
    return n_evals, c.n_eval, (f"{n_evals} evaluations (every {c.eval_every} of {c.epochs:,} "
                               f"epochs), val and adv n = {c.n_eval:,} each")


def _draw(rng: np.random.Generator, p: np.ndarray, n: int) -> np.ndarray:
    return rng.binomial(n, np.clip(p, 0.0, 1.0)) / n


# The onset rule before issue 21: the trough taken over everything since phase 1.
SINCE_PHASE1 = PhaseThresholds(window_frac=1.0)


def _called(val: np.ndarray, adv: np.ndarray, key: str, th: PhaseThresholds | None = None
            ) -> bool:
    epochs = np.arange(len(val), dtype=float)
    out = detect_phases(epochs, val, adv, th, k=2)
    return bool(out[key] is not None) if key == "phase2_onset" else bool(out[key])


def onset_check(configs: Sequence, n_sims: int = 400, seed: int = 0) -> NullCheck | None:
    """The phase-2 onset's false-positive rate on slowly drifting phase-1 runs, and its power
    on a 20-point climb (module docstring)."""
    setting = _setting(configs)
    if setting is None:
        return None
    T, n, words = setting
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, T)
    val_p = np.full(T, VAL)
    nulls = [(_draw(rng, val_p, n), _draw(rng, ADV_PHASE1 + DRIFT * t, n)) for _ in range(n_sims)]
    fp = sum(_called(v, a, "phase2_onset") for v, a in nulls)
    old = sum(_called(v, a, "phase2_onset", SINCE_PHASE1) for v, a in nulls)
    hits = 0
    for _ in range(n_sims):
        start = rng.uniform(0.2, 0.7)
        climb = CLIMB * np.clip((t - start) / CLIMB_FRAC, 0.0, 1.0)
        hits += _called(_draw(rng, val_p, n), _draw(rng, ADV_PHASE1 + climb, n), "phase2_onset")
    return NullCheck(
        null=f"phase 1 held (val {VAL:.1%}, adv {ADV_PHASE1:.1%}) with adv drifting up "
             f"{DRIFT * 100:.0f} points over the run", setting=words, n_null=n_sims,
        false_positives=int(fp), effect=f"a {CLIMB * 100:.0f}-point climb over "
        f"{CLIMB_FRAC:.0%} of the run", n_effect=n_sims, detected=int(hits),
        note=f"the rule before issue 21 (trough since phase 1) called {old / n_sims:.0%} of them")


def transient_check(configs: Sequence, n_sims: int = 400, seed: int = 0) -> NullCheck | None:
    """The transient flag's false-positive rate on runs that generalize and stay (true
    accuracy 99.9%), and its power on a fall to 90% for a tenth of the run."""
    setting = _setting(configs)
    if setting is None:
        return None
    T, n, words = setting
    rng = np.random.default_rng(seed + 1)
    # generalized at the first evaluation: the draws start from a perfect evaluation
    held = np.full(T, HELD)

    def run(adv_p: np.ndarray) -> bool:
        val, adv = _draw(rng, held, n), _draw(rng, adv_p, n)
        val[0] = adv[0] = 1.0
        return _called(val, adv, "transient")

    fp = sum(run(held) for _ in range(n_sims))
    hits = 0
    t = np.linspace(0.0, 1.0, T)
    for _ in range(n_sims):
        start = rng.uniform(0.2, 0.8)
        hits += run(np.where((t >= start) & (t < start + DIP_FRAC), DIP, HELD))
    return NullCheck(
        null=f"generalized and held (true val and adv {HELD:.1%})", setting=words,
        n_null=n_sims, false_positives=int(fp),
        effect=f"adv falling to {DIP:.0%} for {DIP_FRAC:.0%} of the run", n_effect=n_sims,
        detected=int(hits))
