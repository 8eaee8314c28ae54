"""A saturated training loss: where the group gradients are float32 rounding residue (SPEC
S.4.1–2).

Once a member fits its training set with large margins, the per-example loss
``ℓ_i = −log p_y`` falls below what float32 resolves next to 1. The cross-entropy gradient
with respect to the logits is ``p − e_y``; its true-class term ``p_y − 1 ≈ −ℓ_i`` is computed as
``exp(−ℓ_i) − 1`` and so moves in steps of ``2⁻²³ ≈ 1.2e-7``: at ``ℓ_i = 1e-6`` it is up to 6%
off, and below ``6e-8`` ``p_y`` rounds to 1 and the term is exactly 0 while the off-class terms
``p_c`` stay (``torch`` float32, two classes: margin 16 → ℓ = 1.19e-7 for a true 1.13e-7;
margin 17 → ℓ = 0 and gradient ``(0, 4.1e-8)`` for a true ``(−4.1e-8, 4.1e-8)``). The
per-example gradients then lack half their content and the group means ``g±`` — sums of such
vectors that largely cancel — are rounding residue: cos(g+, g−), ‖g−‖/‖g+‖ and ε read from
them mean nothing, whatever ε says.

Study S's medium lab (issue 11) is the case: every 2-layer run memorized its training set, its
stored train loss is exactly 0 in float32 and its mean per-example gradient norm ≈ 1e-7, yet
cos and the ratio came out like any other reading. Kept free of torch so reports can import it.
"""

from __future__ import annotations

import pandas as pd

LOSS_SATURATED = 1e-6
"""Mean cross-entropy (nats) of a training group below which its gradients are rounding noise.

``1e-6`` is about eight float32 rounding steps (2⁻²³ ≈ 1.2e-7) of the true-class term, where
an example's term is up to 6% off; a group whose *mean* loss is below it has at least half its
examples below 2e-6 (Markov), so most of its gradient terms are that coarse or gone. The
measured cases sit far on either side: saturated runs of the medium lab at ≤ 6e-10 (most
exactly 0), the smallest healthy ones 6e-5 (quick lab, 2L r = 0.5, ‖∇ℓ_i‖ ≈ 3e-3) and 4e-4
(medium 1L r = 0.5, ‖∇ℓ_i‖ ≈ 0.4).
"""

SATURATED = "saturated"  # the gradients table's per-row flag (bool)
MARK = "‡"  # beside a reading read from saturated-loss gradients (the identity's mark is †)
LEGEND = (f"{MARK} saturated loss (mean train-consistent or train-anti loss < "
          f"{LOSS_SATURATED:g} nats): float32 resolves a gradient's true-class term only in "
          "steps of 2⁻²³ ≈ 1.2e-7, so these gradients are rounding noise and their cos, "
          "ratio and ε mean nothing")

FIGURE_LABEL = (f"saturated loss (a group's mean < {LOSS_SATURATED:g}): rounding noise, not in "
                "the median")  # legend entry of the crossed readings in every figure


def is_saturated(loss_plus, loss_minus):
    """The flag from each group's mean loss: either group below :data:`LOSS_SATURATED` (a
    group's gradient enters every reading). A missing group (NaN) does not count. Works on
    floats, arrays and Series alike."""
    return (loss_plus < LOSS_SATURATED) | (loss_minus < LOSS_SATURATED)


def known(table: pd.DataFrame) -> bool:
    """Whether ``table`` carries the flag (tables stored before it do not)."""
    return SATURATED in table.columns and table[SATURATED].notna().any()


def saturated_rows(table: pd.DataFrame) -> pd.Series:
    """Per row, bool: the stored flag; False where the table or the row lacks it (unknown)."""
    if SATURATED not in table.columns:
        return pd.Series(False, index=table.index)
    return table[SATURATED].astype("boolean").fillna(False).astype(bool)
