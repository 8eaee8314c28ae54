"""The group-gradient identity near saturation and its threshold (SPEC S.4.1–2, issue 8).

The full-training-set mean gradient is ``g = r·g+ + (1−r)·g−`` (``r`` a member's actual share
of consistent examples). With ``ε = ‖g‖ / (r‖g+‖)``, ``a = r·g+`` and ``b = (1−r)·g− = g − a``:

- ``‖g−‖/‖g+‖ = r/(1−r) · ‖b‖/‖a‖`` and ``‖b‖/‖a‖ = ‖g/‖a‖ − â‖ ∈ [1 − ε, 1 + ε]``
  (triangle inequality);
- ``cos(g+, g−) = cos(a, b) = (c − 1)/√(1 − 2c + ε²)`` with ``c = â·g/‖a‖ ∈ [−ε, ε]``. Writing
  ``q = (ε² − c²)/(1 − c)² ≥ 0``, ``1 + cos = 1 − 1/√(1 + q) ≤ q/2 ≤ ε²/(2(1 − ε)²)``, so
  ``−1 ≤ cos ≤ −1 + ε²/(2(1 − ε)²)``.

So whenever the full gradient is small next to the consistent group's share — near any
stationary point of the training loss, e.g. once the training set is fit — amplification is
pinned to the odds r/(1−r) and conflict to −1 *by the identity*, whatever the mechanism.
Kept free of torch so reports can import it.
"""

from __future__ import annotations

EPS_IDENTITY = 0.25
"""``ε`` below which amplification and conflict are *identity-dominated*.

At ``ε < 0.25`` the identity alone puts ‖g−‖/‖g+‖ within ±25% of r/(1−r) — at r = 0.9 inside
6.75–11.25, the lower half of the paper's 9–17× band and everything below it — and
cos(g+, g−) ≤ −1 + ε²/(2(1−ε)²) = −0.944. Such a reading cannot tell a mechanism from a fitted
training set, so it is no evidence for amplification or conflict. (At ε < 0.1 the bounds are
±10% and cos ≤ −0.994: a stricter cut, applicable later since ``eps`` is stored.)
"""


def identity_bounds(eps):
    """What the identity alone forces at ``eps < 1``: ``(ratio_lo, ratio_hi, cos_max)`` with
    ``amplification / odds ∈ [ratio_lo, ratio_hi]`` and ``cos(g+, g−) ∈ [−1, cos_max]``.
    Works on floats and arrays alike.
    """
    return 1 - eps, 1 + eps, -1 + eps**2 / (2 * (1 - eps) ** 2)
