"""The noisy-first reading under its null: frozen networks (SPEC M.4.2; issue 21, item 4).

A frozen network (lr ≈ 0) fits nothing: each training example is right at init with the chance
probability ``1/P`` and stays so, but for a few examples whose prediction flips back and forth
(``flips`` per subset and evaluation, on average). Its lead, noisy-train minus clean-train
accuracy, is then the init offset of two small subsets plus that jitter. The issue measured 11
of 16 frozen runs (lr 1e-7) reading "noisy leads" under ``lead_area > 0``, which counted the
offset; :func:`false_positive_rate` measures both readings on simulated frozen runs, for
``rulelab calibrate``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rulelab.analysis.stats import wilson
from rulelab.studies.coexistence.analyses.early_lead import lead_readings


def frozen_metrics(runs: int, n_clean: int, n_noisy: int, *, chance: float, steps: int = 100,
                   flips: float = 1.0, rng: np.random.Generator | None = None) -> pd.DataFrame:
    """The store's long frame (``run_id, epoch, split, metric, value``) of ``runs`` frozen
    networks evaluated at steps ``0..steps`` (module docstring)."""
    rng = np.random.default_rng(0) if rng is None else rng
    rows = []
    for r in range(runs):
        for split, n in (("train_clean", n_clean), ("train_noisy", n_noisy)):
            right = rng.binomial(n, chance)  # at init, and for good
            jitter = rng.poisson(flips, steps + 1) - rng.poisson(flips, steps + 1)
            jitter[0] = 0
            acc = np.clip(right + jitter, 0, n) / n
            rows += [(f"frozen{r}", s, split, "acc", float(a)) for s, a in enumerate(acc)]
    return pd.DataFrame(rows, columns=["run_id", "epoch", "split", "metric", "value"])


def false_positive_rate(n_clean: int, n_noisy: int, *, chance: float, runs: int = 400,
                        window: float = 100, flips: float = 1.0, rng_seed: int = 0) -> dict:
    """Shares of frozen runs read as "noisy leads": ``new`` (the test against the lead at init,
    :mod:`.analyses.early_lead`) and ``old`` (``lead_area > 0``), each ``{rate, k, n, ci_low,
    ci_high}``."""
    metrics = frozen_metrics(runs, n_clean, n_noisy, chance=chance, steps=int(window),
                             flips=flips, rng=np.random.default_rng(rng_seed))
    ids = metrics["run_id"].unique()
    sizes = pd.DataFrame({"run_id": ids, "n_clean": n_clean, "n_noisy": n_noisy})
    lead = lead_readings(metrics, window=window, sizes=sizes)
    out = {}
    for name, called in (("new", lead["noisy_leads"].astype(bool)), ("old", lead["lead_area"] > 0)):
        k, n = int(called.sum()), len(called)
        lo, hi = wilson(k, n)
        out[name] = {"rate": k / n, "k": k, "n": n, "ci_low": lo, "ci_high": hi}
    return out
