"""Study M's detectors against their nulls at a lab's or preset's own setting, for
``rulelab calibrate coexistence`` (issue 21). The simulations are :mod:`.dip_null` (flat
width curves: seed noise plus the test set's binomial noise) and :mod:`.lead_null` (frozen
networks); this module reads their setting off the run configs.

- **double-descent dip**: per (noise, everything but width and seed) group of the configs, its
  widths and seeds per width, the test-set size of its split (``P² · (1 − f)`` pairs) and a
  seed SD of 2 points; flat curves at 50% accuracy. Power: a 10-point dip at the middle width.
- **noisy-first lead**: per noise level, frozen networks (right at chance 1/P and staying so)
  with the run's clean and noisy training-subset sizes, read over the lab's window.
"""

from __future__ import annotations

from collections.abc import Sequence

from rulelab.analysis.calibration import NullCheck
from rulelab.studies.coexistence.analyses import dip_null, lead_null
from rulelab.studies.coexistence.analyses.early_lead import DEFAULT_WINDOW
from rulelab.studies.coexistence.analyses.subsets import modular_sizes

SEED_SD, DEPTH = 0.02, 0.10


def _modular(configs: Sequence) -> list:
    return [c for c in configs if getattr(c, "task", None) == "modular"]


def dip_check(configs: Sequence, n_sims: int = 400, seed: int = 0) -> NullCheck | None:
    """The dip test's false-positive rate on flat curves at the configs' width grid and seeds
    (the largest grid among them), and its power at a 10-point dip."""
    runs = _modular(configs)
    if not runs:
        return None
    widths = sorted({c.width for c in runs})
    if len(widths) < 3:
        return None
    seeds = min(len({c.seed for c in runs if c.width == w}) for w in widths)  # per width
    c0 = runs[0]
    n_test = max(1, c0.p ** 2 - int(round(c0.train_frac * c0.p ** 2)))
    null = dip_null.false_positive_rate(len(widths), seeds, curves=n_sims, seed_sd=SEED_SD,
                                        n_test=n_test, rng_seed=seed)
    hit = dip_null.power(len(widths), seeds, DEPTH, curves=n_sims, seed_sd=SEED_SD,
                         n_test=n_test, rng_seed=seed + 1)
    old = dip_null.false_positive_rate(len(widths), seeds, curves=n_sims, seed_sd=SEED_SD,
                                       n_test=n_test, rng_seed=seed,
                                       detector=dip_null.seed_range_calls)
    return NullCheck(
        null=f"flat width curves at 50% (seed SD {SEED_SD * 100:.0f} points + the test set's "
             "binomial noise)",
        setting=f"{len(widths)} widths ({widths[0]}…{widths[-1]}) × {seeds} seeds, "
                f"{n_test:,} test pairs", n_null=null["n"], false_positives=null["k"],
        effect=f"a {DEPTH * 100:.0f}-point dip at the middle width", n_effect=hit["n"],
        detected=hit["k"],
        note=("1 seed per width: too few seeds to call; " if seeds < 2 else "")
        + f"the rule before issue 21 (seed ranges) called {old['rate']:.0%} of them")


def lead_check(configs: Sequence, n_sims: int = 400, seed: int = 0) -> NullCheck | None:
    """The noisy-first lead's false-positive rate on frozen networks at the configs' largest
    noise level (the subset sizes the lead is read between)."""
    noisy = [c for c in _modular(configs) if c.noise > 0]
    if not noisy:
        return None
    c = max(noisy, key=lambda c: c.noise)
    n_clean, n_noisy = modular_sizes(c.p, c.train_frac, c.noise)
    out = lead_null.false_positive_rate(n_clean, n_noisy, chance=1 / c.p, runs=n_sims,
                                        window=DEFAULT_WINDOW, rng_seed=seed)
    old = out["old"]
    return NullCheck(
        null="frozen networks: right at chance 1/P at init and staying so, a flip or so per "
             "evaluation", setting=f"P = {c.p}, α = {c.noise:g}: {n_clean:,} clean and "
             f"{n_noisy:,} noisy training pairs, a {DEFAULT_WINDOW:g}-step window",
        n_null=out["new"]["n"], false_positives=out["new"]["k"],
        note=f"the rule before issue 21 (lead area > 0) called {old['rate']:.0%} of them")
