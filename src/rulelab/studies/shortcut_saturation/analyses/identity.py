"""The group-gradient identity near saturation and its threshold (SPEC S.4.1–2, issues 8, 21).

The full-training-set mean gradient is ``g = r·g+ + (1−r)·g−`` (``r`` a member's actual share
of consistent examples). Write ``a = r·g+``, ``b = (1−r)·g− = g − a``, ``ε = ‖g‖/‖a‖`` and
``ρ = ‖b‖/‖a‖ = amplification / (r/(1−r))``. Then, exactly,

    ε² = ‖a + b‖²/‖a‖² = 1 + ρ² + 2ρ·cos,   cos = cos(g+, g−) = cos(a, b).

- **Amplification:** ``|ρ − 1| ≤ ε`` (triangle inequality), so ``ρ ∈ [1 − ε, 1 + ε]``;
  both ends are attained (cos = −1 gives ρ = 1 ± ε).
- **Conflict (tight, issue 21):** ``cos = (ε² − 1 − ρ²)/(2ρ) = −(1 − ε²)/(2ρ) − ρ/2``. For
  ``ε < 1`` both terms are negative; d cos/dρ = (1 − ε²)/(2ρ²) − ½ vanishes at
  ``ρ = √(1 − ε²)``, where cos takes its largest value over ρ > 0 (cos → −∞ at ρ → 0 and at
  ρ → ∞), ``−(1−ε²)/(2√(1−ε²)) − √(1−ε²)/2 = −√(1 − ε²)``. So ``cos ≤ −√(1 − ε²)``,
  attained at ρ = √(1 − ε²). At ``ε = 1``, cos = −ρ/2 < 0 (the bound, 0, is approached); for
  ``ε > 1`` the first term is positive and grows without bound as ρ → 0: every cos ∈ [−1, 1]
  is reachable, no constraint. (Issue 8's bound
  ``−1 + ε²/(2(1−ε)²)`` was valid but loose, and empty past ε = 2 − √2 ≈ 0.59.)

So whenever the full gradient is small next to the consistent group's share — near any
stationary point of the training loss, e.g. once the training set is fit — amplification is
pinned to the odds r/(1−r) and conflict to −1 *by the identity*, whatever the mechanism.
The flag is per run (per reading): a table counts the runs flagged; a run with NaN ε (an empty
group) is "undefined", never "not identity-dominated". Kept free of torch so reports can
import it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

COS_PINNED = -0.9
"""A conflict reading is *pinned* when the identity alone forces ``cos(g+, g−) ≤ −0.9``."""

EPS_IDENTITY = math.sqrt(1 - COS_PINNED**2)  # √0.19 ≈ 0.436
"""``ε`` below which amplification and conflict are *identity-dominated* (per run).

The ε at which the tight bound reaches :data:`COS_PINNED`: ``−√(1 − ε²) ≤ −0.9 ⇔ ε ≤ √0.19
≈ 0.436``. There the identity alone puts cos(g+, g−) within 0.1 of −1 and ‖g−‖/‖g+‖ within
±44% of r/(1−r) (at r = 0.9 inside 5.1–12.9×, the lower half of the paper's 9–17× band and
everything below it). Such a reading cannot tell a mechanism from a fitted training set, so it
is no evidence for amplification or conflict. Issue 21's example: study S's quick 2L r = 0.9
row (median ε 0.37, cos −0.94) is forced to cos ≤ −√(1 − 0.37²) = −0.929, and flagged.
(A stricter cut applies later since ``eps`` is stored: ε < 0.1 gives ±10% and cos ≤ −0.995.)
"""

UNDEFINED = "undefined"
DOMINATED, NOT_DOMINATED = "identity-dominated", "not identity-dominated"


def identity_bounds(eps):
    """What the identity alone forces: ``(ratio_lo, ratio_hi, cos_max)`` with
    ``amplification / odds ∈ [ratio_lo, ratio_hi]`` and ``cos(g+, g−) ∈ [−1, cos_max]``,
    ``cos_max = −√(1 − ε²)`` for ε ≤ 1 and 1 (no constraint) for ε > 1 (module docstring).
    Works on floats, numpy arrays and torch tensors alike; NaN stays NaN.
    """
    if hasattr(eps, "clamp"):  # a torch tensor (this module imports no torch)
        cos_max = -(1 - eps**2).clamp(min=0).sqrt()
        cos_max = cos_max.masked_fill(eps > 1, 1.0)
    else:
        e = np.asarray(eps, dtype=float)
        with np.errstate(invalid="ignore"):
            cos_max = np.where(e > 1, 1.0, -np.sqrt(np.clip(1 - e**2, 0, None)))
        cos_max = float(cos_max) if cos_max.ndim == 0 else cos_max
    return 1 - eps, 1 + eps, cos_max


def identity_flags(eps) -> pd.Series:
    """Per run: ``True`` (ε < :data:`EPS_IDENTITY`), ``False``, or ``<NA>`` where ε is NaN
    (undefined: an empty group). A nullable-boolean Series aligned to ``eps``."""
    e = pd.Series(eps, dtype=float) if not isinstance(eps, pd.Series) else eps.astype(float)
    return (e < EPS_IDENTITY).astype("boolean").mask(e.isna())


def identity_reading(eps: float) -> str:
    """One run's reading: "identity-dominated", "not identity-dominated" or "undefined"."""
    if eps is None or math.isnan(float(eps)):
        return UNDEFINED
    return DOMINATED if float(eps) < EPS_IDENTITY else NOT_DOMINATED


def identity_count(eps, keep=None) -> str:
    """``"k/n"`` runs identity-dominated (``n`` = all runs given), with ``" (u undefined)"``
    where ``u`` runs have NaN ε; ``keep`` (bool, aligned) leaves runs out of ``k`` and ``u``
    (e.g. saturated ones, whose ε means nothing) but not out of ``n``."""
    flags = identity_flags(eps)
    n = len(flags)
    if keep is not None:
        flags = flags[np.asarray(keep, dtype=bool)]
    k, u = int(flags.fillna(False).sum()), int(flags.isna().sum())
    return f"{k}/{n}" + (f" ({u} {UNDEFINED})" if u else "")
