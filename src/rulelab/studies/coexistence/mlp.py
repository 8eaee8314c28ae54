"""Study M's two-layer network with a leading member axis (SPEC M.2).

``f(a, b) = W φ(U e_a + V e_b) + μ`` with ``U, V [E, M, P]``, ``W [E, P, M]``, ``μ [E, P]``.
One-hot inputs make ``U e_a`` a column gather, so the forward is a gather, an add, ``φ`` and one
batched matmul. :func:`mlp_logits` is the same network as a pure function of weights, for the
analyses (frequency filtering, activation swap, pruning) that evaluate edited weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rulelab.models.hooks import HookedEnsemble, HookPoint

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "quadratic": torch.square,
    "gelu": F.gelu,
    "leaky_relu": F.leaky_relu,  # negative slope 0.01
    "reverse_relu": lambda x: F.relu(-x),  # max(0, −x)
    "abs": torch.abs,
}
INIT_SCALES = ("inv_sqrt", "doshi")


def init_std(kind: str, width: int) -> float:
    """``1/√M`` (default) or Doshi et al.'s ``0.5 / (2M)^{1/3}`` (SPEC M.2)."""
    if kind == "inv_sqrt":
        return 1.0 / math.sqrt(width)
    if kind == "doshi":
        return 0.5 / (2 * width) ** (1 / 3)
    raise ValueError(f"unknown init scale {kind!r}; use one of {INIT_SCALES}")


def pre_activations(U: torch.Tensor, V: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``U, V [E, M, P]``, ``x [E, B, 2]`` (a, b) → ``U e_a + V e_b`` as ``[E, B, M]``."""
    E, M, P = U.shape
    # Gather columns from the weights flattened to [E·P, M] (rows = tokens), member-offset,
    # so each member's backward accumulates in the same order as a lone run.
    offset = torch.arange(E, device=x.device).view(E, 1) * P
    Ut = U.transpose(1, 2).reshape(E * P, M)
    Vt = V.transpose(1, 2).reshape(E * P, M)
    return F.embedding(x[..., 0] + offset, Ut) + F.embedding(x[..., 1] + offset, Vt)


def mlp_logits(U, V, W, mu, x: torch.Tensor, act: str) -> torch.Tensor:
    """Pure forward: ``U, V [E, M, P]``, ``W [E, P, M]``, ``μ [E, P]`` or None → ``[E, B, P]``."""
    h = ACTIVATIONS[act](pre_activations(U, V, x))  # [E, B, M]
    out = torch.bmm(h, W.transpose(1, 2))  # [E, B, P]
    return out if mu is None else out + mu.unsqueeze(1)


class EnsembleMLP(HookedEnsemble):
    """``E`` two-layer networks on pairs ``(a, b)``: ``x [E, B, 2]`` → logits ``[E, B, P]``."""

    def __init__(self, n_members: int, p: int, width: int, *, act: str = "relu",
                 tied: bool = False, bias: bool = True) -> None:
        super().__init__()
        if act not in ACTIVATIONS:
            raise ValueError(f"unknown activation {act!r}; use one of {sorted(ACTIVATIONS)}")
        E, M, P = n_members, width, p
        self.act, self.tied, self.p, self.width = act, tied, p, width
        self.U = nn.Parameter(torch.empty(E, M, P))
        self.V = None if tied else nn.Parameter(torch.empty(E, M, P))
        self.W = nn.Parameter(torch.empty(E, P, M))
        self.mu = nn.Parameter(torch.zeros(E, P)) if bias else None
        self.hook_pre = HookPoint()  # [E, batch, M]
        self.hook_post = HookPoint()  # [E, batch, M]
        self.setup_hooks()

    @property
    def V_eff(self) -> torch.Tensor:
        return self.U if self.tied else self.V

    def init_weights(self, seeds: Sequence[int], scale: str = "inv_sqrt") -> EnsembleMLP:
        """Member ``e`` draws ``U, (V), W`` from its own generator seeded with ``seeds[e]``."""
        std = init_std(scale, self.width)
        weights = [w for w in (self.U, self.V, self.W) if w is not None]
        with torch.no_grad():
            for e, seed in enumerate(seeds):
                gen = torch.Generator().manual_seed(int(seed))
                for w in weights:
                    w[e].copy_(torch.randn(w.shape[1:], generator=gen) * std)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.hook_pre(pre_activations(self.U, self.V_eff, x))
        h = self.hook_post(ACTIVATIONS[self.act](h))
        out = torch.bmm(h, self.W.transpose(1, 2))  # [E, B, P]
        return out if self.mu is None else out + self.mu.unsqueeze(1)
