"""The nulls of the scale map's S5 and S6 verdicts (issue 21): how often "shows" is printed
when nothing differs between the cells compared (SPEC S.3; the readings: :mod:`..claims`).

- **S5** reads "shows" when, for the 2-layer model, the best rate among the ratios below chance
  and the best among those above each have a 95% Wilson interval entirely above the rate at
  chance (r = 1/2). Taking the best of several ratios is a search: under the null every ratio
  shares one true rate p, and the best of m cells is more often far from the cell at chance
  than one cell is. Simulated at the configs' ratios and seeds per ratio, worst over p.
  Power: the paper's 2L rates mirrored — 0% at chance (the paper's r = 0.5), 77% at the best
  ratio below and above (its r = 0.9).
- **S6** reads "shows" when the share of transient seeds at the largest weight decay has its
  interval entirely above the share at the smallest (2 layers, the ratios held at both
  pooled). Under the null both decays share one transient rate p; simulated at the pooled
  run counts, worst over p. The paper gives no transient rates: the power is at a stated
  effect, :data:`S6_EFFECT`.

Runs are Bernoulli trials, one per seed; the pooled S6 count treats the runs at different
ratios as independent (they are separate models and data draws).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rulelab.analysis.calibration import NullCheck
from rulelab.analysis.stats import wilson_arrays
from rulelab.studies.shortcut_saturation.claim_null import RATES
from rulelab.studies.shortcut_saturation.paper import PAPER_S

CHANCE = 0.5  # b = 1/k at k = 2, the headline task
S6_EFFECT = (0.1, 0.5)  # transient share at the smallest → largest weight decay (stated)


def _headline_2l(configs: Sequence, all_decays: bool) -> list:
    """2-layer configs of the headline task (k = 2, max shortcut), 2 heads where both head
    counts are present and — unless ``all_decays`` — the smallest weight decay."""
    out = [c for c in configs if getattr(c, "label_mod", None) == 2 and c.shortcut == "max"
           and c.layers == 2]
    if any(c.heads == 2 for c in out) and len({c.heads for c in out}) > 1:
        out = [c for c in out if c.heads == 2]
    if out and not all_decays:
        wd = min(c.weight_decay for c in out)
        out = [c for c in out if np.isclose(c.weight_decay, wd)]
    return out


def _counts(configs: Sequence, key) -> dict:
    out: dict = {}
    for c in configs:
        out[key(c)] = out.get(key(c), 0) + 1
    return out


def _above(k_hi, n_hi, k_lo, n_lo) -> np.ndarray:
    lo, _ = wilson_arrays(k_hi, np.broadcast_to(n_hi, np.shape(k_hi)))
    _, hi = wilson_arrays(k_lo, np.broadcast_to(n_lo, np.shape(k_lo)))
    return lo > hi


def s5_shows(rng, rates: dict[float, float], seeds: dict[float, int], sims: int) -> int:
    """How many of ``sims`` simulated labs (true rate ``rates[r]``, ``seeds[r]`` runs at ratio
    r) read S5 "shows": the best below and the best above chance each above it."""
    k = {r: rng.binomial(seeds[r], rates[r], size=sims) for r in seeds}
    at = CHANCE

    def best_beats(side: list[float]) -> np.ndarray:
        share = np.stack([k[r] / seeds[r] for r in side])  # [m, sims]
        pick = share.argmax(0)  # the best rate (first on ties, as idxmax)
        kb = np.stack([k[r] for r in side])[pick, np.arange(sims)]
        nb = np.asarray([seeds[r] for r in side])[pick]
        return _above(kb, nb, k[at], seeds[at])

    below = [r for r in seeds if r < at - 1e-9]
    above = [r for r in seeds if r > at + 1e-9]
    return int((best_beats(below) & best_beats(above)).sum())


def s5_check(configs: Sequence, n_sims: int = 400, seed: int = 0) -> NullCheck | None:
    """S5's false-positive rate (one common rate, worst over p) and power at the paper's
    mirrored 2L rates, at the configs' ratios and seeds (module docstring)."""
    seeds = {float(r): n for r, n in _counts(_headline_2l(configs, False),
                                             lambda c: round(c.ratio, 9)).items()}
    if CHANCE not in seeds or not any(r < CHANCE for r in seeds) or not any(
            r > CHANCE for r in seeds):
        return None
    rng = np.random.default_rng(seed)
    worst, at = max((s5_shows(rng, dict.fromkeys(seeds, p), seeds, n_sims), p) for p in RATES)
    effect = {r: PAPER_S["2L"][0.5] if r == CHANCE else PAPER_S["2L"][0.9] for r in seeds}
    hits = s5_shows(rng, effect, seeds, n_sims)
    return NullCheck(
        null="no distance-from-chance effect: every 2L ratio shares one true rate (worst over "
             "5%–95%)",
        setting="2L ratios " + ", ".join(f"{r:g} ({n} seeds)" for r, n in sorted(seeds.items())),
        n_null=n_sims, false_positives=worst,
        effect=f"{PAPER_S['2L'][0.5]:.0%} at chance, {PAPER_S['2L'][0.9]:.0%} at the best ratio "
               "below and above (the paper's 2L r = 0.5 and 0.9 rates)",
        n_effect=n_sims, detected=hits, note=f"worst common rate {at:.0%}")


def s6_counts(configs: Sequence) -> tuple[int, int] | None:
    """Runs pooled at the smallest and the largest weight decay (2L, ratios held at both)."""
    runs = _headline_2l(configs, True)
    decays = sorted({c.weight_decay for c in runs})
    if len(decays) < 2:
        return None
    held = [r for r in {c.ratio for c in runs}
            if len({c.weight_decay for c in runs if c.ratio == r}) == len(decays)]
    n = _counts([c for c in runs if c.ratio in held], lambda c: c.weight_decay)
    return n[decays[0]], n[decays[-1]]


def s6_check(configs: Sequence, n_sims: int = 400, seed: int = 0) -> NullCheck | None:
    """S6's false-positive rate (one transient rate at both decays, worst over p) and power at
    :data:`S6_EFFECT`, at the configs' pooled run counts (module docstring)."""
    counts = s6_counts(configs)
    if counts is None:
        return None
    n_lo, n_hi = counts
    rng = np.random.default_rng(seed)

    def shows(p_lo: float, p_hi: float) -> int:
        return int(_above(rng.binomial(n_hi, p_hi, n_sims), n_hi,
                          rng.binomial(n_lo, p_lo, n_sims), n_lo).sum())

    worst, at = max((shows(p, p), p) for p in RATES)
    lo, hi = S6_EFFECT
    return NullCheck(
        null="weight decay does not change the transient share: one true rate at both decays "
             "(worst over 5%–95%)",
        setting=f"2L runs pooled over the ratios held at both decays: {n_lo} at the smallest, "
                f"{n_hi} at the largest", n_null=n_sims, false_positives=worst,
        effect=f"transient {lo:.0%} → {hi:.0%} (stated: the paper gives no rates)",
        n_effect=n_sims, detected=shows(lo, hi), note=f"worst common rate {at:.0%}")
