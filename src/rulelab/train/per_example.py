"""Per-example cross-entropy and masked per-member means: the one copy every trainer and
evaluation uses (issue 22; before, each study wrote its own). Shapes carry the member axis
``E`` first."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``logits [E, b, k]``, ``y [E, b]`` → ``[E, b]`` cross-entropy of each example."""
    E, b, k = logits.shape
    return F.cross_entropy(logits.reshape(E * b, k), y.reshape(-1), reduction="none").view(E, b)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``values, mask [E, N]`` → ``[E]`` means over the mask in ``values``' dtype (pass float64
    values for float64 means); NaN where a member's mask is empty."""
    n = mask.sum(1)
    total = torch.where(mask, values, torch.zeros_like(values)).sum(1)
    return torch.where(n > 0, total / n.clamp(min=1), torch.full_like(total, float("nan")))
