"""An ensemble of plain feed-forward networks over vectors (DESIGN §1: every parameter has a
leading member axis).

``x [E, B, d₀] → φ(x W₁ + b₁) → … → · W_L + b_L → [E, B, d_L]`` with weights stored
``[E, in, out]`` (``x @ W``) and biases ``[E, out]``; parameter names ``weights.i`` /
``biases.i``. Each member initializes like ``torch.nn.Linear`` (weights and biases uniform in
``±1/√fan_in``, layer by layer, weight then bias) from its own generator seeded with its seed,
so a member's start does not depend on the ensemble it sits in. Study M's digits / MNIST runs
(SPEC M.4.7) use it with two hidden layers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "tanh": torch.tanh}


class EnsembleFeedForward(nn.Module):
    """``E`` networks of the layer sizes ``sizes`` (``[d_in, hidden…, d_out]``)."""

    def __init__(self, n_members: int, sizes: Sequence[int], act: str = "relu") -> None:
        super().__init__()
        if act not in ACTIVATIONS:
            raise ValueError(f"unknown activation {act!r}; use one of {sorted(ACTIVATIONS)}")
        self.act = act
        pairs = list(zip(sizes[:-1], sizes[1:], strict=True))
        self.weights = nn.ParameterList(nn.Parameter(torch.empty(n_members, i, o))
                                        for i, o in pairs)
        self.biases = nn.ParameterList(nn.Parameter(torch.empty(n_members, o)) for _, o in pairs)

    def init_weights(self, seeds) -> EnsembleFeedForward:
        with torch.no_grad():
            for e, seed in enumerate(seeds):
                gen = torch.Generator().manual_seed(int(seed))
                for W, b in zip(self.weights, self.biases, strict=True):
                    bound = 1.0 / math.sqrt(W.shape[1])
                    W[e].copy_((torch.rand(W.shape[1:], generator=gen) * 2 - 1) * bound)
                    b[e].copy_((torch.rand(b.shape[1:], generator=gen) * 2 - 1) * bound)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        phi = ACTIVATIONS[self.act]
        h = x
        for i, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.baddbmm(b.unsqueeze(1), h, W)  # [E, B, out]
            if i < len(self.weights) - 1:
                h = phi(h)
        return h
