"""Batched SGD over stacked ``[E, ...]`` parameters with per-member hyperparameters (SPEC M.3).

Each member ``e`` follows exactly ``torch.optim.SGD`` (heavy-ball momentum, Polyak 1964;
Nesterov momentum in the form of Sutskever et al. 2013) with dampening 0 and its own
``lr[e], weight_decay[e]`` (coupled L2: ``g ← g + wd · p``), ``momentum[e], nesterov[e]`` and
linear warm-up ``warmup[e]``. Nothing reduces across the member axis; an inactive member is frozen
(parameters and momentum buffer unchanged, its NaN gradient never read).

:class:`BatchedMomentum` holds what SGD and Muon share: the ``[E]`` hyperparameters, warm-up,
``active`` mask, one momentum buffer per parameter and the (per-member) checkpoint API.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from rulelab.optim.state import BatchedOptimizer, per_member

__all__ = ["BatchedMomentum", "BatchedSGD", "member_mask", "member_view"]


def member_view(t: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """``[E]`` hyperparameter → ``[E, 1, ..., 1]`` on ``p``'s device and dtype."""
    return t.to(device=p.device, dtype=p.dtype).view((-1,) + (1,) * (p.dim() - 1))


def member_mask(t: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """``[E]`` bool → ``[E, 1, ..., 1]`` bool on ``p``'s device."""
    return t.to(p.device).view((-1,) + (1,) * (p.dim() - 1))


class BatchedMomentum(BatchedOptimizer):
    """Shared state machinery: ``[E]`` hyperparameters and one momentum buffer per parameter."""

    buffer_names = ("momentum_buffer",)

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        *,
        n_members: int,
        lr: Sequence[float] | float,
        weight_decay: Sequence[float] | float,
        momentum: Sequence[float] | float,
        nesterov: Sequence[bool] | bool,
        warmup: Sequence[int] | int = 0,
    ) -> None:
        self._setup(params, n_members, lr=lr, weight_decay=weight_decay, warmup=warmup)
        self.momentum = per_member(momentum, n_members, "momentum")
        self.nesterov = per_member(nesterov, n_members, "nesterov").bool()
        self.momentum_buffer = [torch.zeros_like(p) for p in self.params]

    def _masked_grad(self, p: torch.Tensor) -> torch.Tensor:
        """``p.grad`` with inactive members' rows zeroed (their NaNs must not reach any state)."""
        if bool(self.active.all()):
            return p.grad
        return torch.where(member_mask(self.active, p), p.grad, 0.0)


class BatchedSGD(BatchedMomentum):
    """SGD (momentum, optional Nesterov, L2 decay, dampening 0); hyperparameters are ``[E]``.

    ``momentum[e] == 0`` is plain SGD for that member (the buffer then just holds the last
    gradient; the update is bit-identical to torch's momentum-free path).
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        *,
        n_members: int,
        lr: Sequence[float] | float = 1e-3,
        weight_decay: Sequence[float] | float = 0.0,
        momentum: Sequence[float] | float = 0.0,
        nesterov: Sequence[bool] | bool = False,
        warmup: Sequence[int] | int = 0,
    ) -> None:
        super().__init__(params, n_members=n_members, lr=lr, weight_decay=weight_decay,
                         momentum=momentum, nesterov=nesterov, warmup=warmup)
        if bool((self.nesterov & (self.momentum <= 0)).any()):
            raise ValueError("nesterov: needs momentum > 0 (as torch.optim.SGD)")

    @torch.no_grad()
    def step(self) -> None:
        lr = self.lr_now() * self.active  # before counting this step: warm-up starts at 1/w
        self.step_count += 1
        # A frozen member keeps its buffer: buf · 1 + 0.
        keep = torch.where(self.active, self.momentum, 1.0)
        use_l2 = bool((self.weight_decay != 0).any())
        all_nesterov, any_nesterov = bool(self.nesterov.all()), bool(self.nesterov.any())
        for p, buf in zip(self.params, self.momentum_buffer, strict=True):
            if p.grad is None:
                continue
            g = p.grad  # [E, ...]
            if use_l2:  # torch: grad.add(param, alpha=weight_decay)
                g = g.add(p * member_view(self.weight_decay, p))
            if not bool(self.active.all()):
                g = torch.where(member_mask(self.active, p), g, 0.0)
            buf.mul_(member_view(keep, p)).add_(g)  # torch: buf.mul_(momentum).add_(grad)
            if any_nesterov:  # torch: grad.add(buf, alpha=momentum)
                nest = g.add(buf * member_view(self.momentum, p))
                d = nest if all_nesterov else torch.where(member_mask(self.nesterov, p), nest, buf)
            else:
                d = buf
            p.sub_(d * member_view(lr, p))  # torch: param.add_(d, alpha=-lr)
