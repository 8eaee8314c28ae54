"""Activation swap for Study M (SPEC M.4.4).

Evaluate trained weights ``U, V [E, M, P]``, ``W [E, P, M]``, ``μ [E, P]`` (or None) with every
activation in :data:`rulelab.studies.coexistence.mlp.ACTIVATIONS` (or a chosen subset) at
inference only.
Paper: a ReLU network scored with quadratic or reverse-ReLU keeps or improves its test accuracy
while its noisy-train (memorization) accuracy drops — the rule sits in the even part of φ.
Subsets follow :mod:`.analyses.fourier`: ``masks = {name: [E, N] bool}`` over the rows of
``x [E, N, 2]`` (or ``[N, 2]``) and ``y [E, N]`` (or ``[N]``); None scores all rows as ``"all"``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rulelab.studies.coexistence.analyses.fourier import network_accuracy
from rulelab.studies.coexistence.mlp import ACTIVATIONS


def activation_swap(
    U, V, W, mu, x, y, masks=None, acts: Sequence[str] | None = None
) -> dict[str, dict[str, torch.Tensor]]:
    """``{act: {subset: [E] accuracy}}`` for each activation in ``acts`` (default: all)."""
    acts = list(ACTIVATIONS) if acts is None else list(acts)
    unknown = [a for a in acts if a not in ACTIVATIONS]
    if unknown:
        raise ValueError(
            f"activation_swap: unknown activation(s) {unknown}; use any of {sorted(ACTIVATIONS)}"
        )
    return {a: network_accuracy(U, V, W, mu, x, y, masks, a) for a in acts}
