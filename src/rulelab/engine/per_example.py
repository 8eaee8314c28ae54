"""Per-example cross-entropy, per-example scores of a model over a set in forward chunks, and
masked per-member means: the one copy every trainer and evaluation uses (issue 22; before,
each study wrote its own). Shapes carry the member axis ``E`` first."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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


@torch.no_grad()
def scores(model: Callable, x: torch.Tensor, labels: Sequence[torch.Tensor], chunk: int,
           loss: Callable = cross_entropy
           ) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    """``model`` on ``x [E, N, …]`` in forwards of ``chunk`` examples per member. Per label set
    ``y [E, N]``: ``(loss(logits, y) [E, N], correct [E, N] bool)``; and the predicted classes
    ``[E, N]``. Several label sets share the forwards (e.g. corrupted and true labels)."""
    E, N = x.shape[:2]
    losses: list[list[torch.Tensor]] = [[] for _ in labels]
    preds = []
    for s in range(0, N, chunk):
        logits = model(x[:, s : s + chunk])  # [E, b, k]
        preds.append(logits.argmax(-1))
        for i, y in enumerate(labels):
            losses[i].append(loss(logits, y[:, s : s + chunk]))
    if not preds:  # an empty set: empty scores, whose masked means are NaN
        empty = torch.zeros(E, 0, device=x.device)
        return [(empty, empty.bool()) for _ in labels], empty.long()
    pred = torch.cat(preds, 1)
    return [(torch.cat(parts, 1), pred == y) for parts, y in zip(losses, labels, strict=True)], pred
