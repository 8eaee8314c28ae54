"""What every batched optimizer shares (DESIGN §1, §3).

Parameters are stacked ``[E, ...]``; ``lr``, ``weight_decay`` and the linear ``warmup`` are
``[E]`` float64 vectors; ``active`` freezes members (e.g. one that went NaN); ``step_count``
counts steps. The per-parameter buffers named in ``buffer_names`` are checkpointed as a whole or
as one member's slice, so a resumed run can join any ensemble.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

import torch


def per_member(values: Sequence[float] | float, n: int, name: str) -> torch.Tensor:
    """One value or ``n`` values → an ``[n]`` float64 tensor (one hyperparameter per member)."""
    t = torch.as_tensor(values, dtype=torch.float64).flatten()
    if t.numel() == 1:
        t = t.expand(n)
    if t.numel() != n:
        raise ValueError(f"{name}: expected {n} per-member values, got {t.numel()}")
    return t.clone()


class BatchedOptimizer:
    """Member axis checks, ``[E]`` lr / weight decay / warm-up, freezing, and checkpoints."""

    buffer_names: ClassVar[tuple[str, ...]] = ()

    def _setup(self, params: Iterable[torch.nn.Parameter], n_members: int, *,
               lr, weight_decay, warmup) -> None:
        self.params = list(params)
        E = self.n_members = n_members
        for p in self.params:
            if p.dim() == 0 or p.shape[0] != E:
                raise ValueError(f"parameter of shape {tuple(p.shape)} lacks the member axis {E}")
        self.lr = per_member(lr, E, "lr")
        self.weight_decay = per_member(weight_decay, E, "weight_decay")
        self.warmup = per_member(warmup, E, "warmup")
        self.active = torch.ones(E, dtype=torch.bool)
        self.step_count = 0

    def lr_now(self) -> torch.Tensor:
        """``[E]`` learning rate at the coming step: linear warm-up, then constant."""
        t = self.step_count + 1
        ramp = torch.where(self.warmup > 0, (t / self.warmup.clamp(min=1)).clamp(max=1.0), 1.0)
        return self.lr * ramp

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def deactivate(self, members: torch.Tensor) -> None:
        """Freeze the members where ``members`` ([E] bool) is true."""
        self.active &= ~members.cpu()

    def _buffers(self) -> list[list[torch.Tensor]]:
        return [getattr(self, name) for name in self.buffer_names]

    def state_dict(self) -> dict:
        state = {"step_count": self.step_count, "active": self.active.clone()}
        for name, bufs in zip(self.buffer_names, self._buffers(), strict=True):
            state[name] = [b.detach().cpu().clone() for b in bufs]
        return state

    def load_state_dict(self, state: dict) -> None:
        self.step_count = int(state["step_count"])
        self.active = state["active"].clone()
        with torch.no_grad():
            for name, bufs in zip(self.buffer_names, self._buffers(), strict=True):
                for dst, src in zip(bufs, state[name], strict=True):
                    dst.copy_(src)

    def member_state(self, e: int) -> dict:
        """The state of member ``e`` alone (for per-run checkpoints)."""
        state = {"step_count": self.step_count, "active": bool(self.active[e])}
        for name, bufs in zip(self.buffer_names, self._buffers(), strict=True):
            state[name] = [b[e].detach().cpu().clone() for b in bufs]
        return state

    def load_member_state(self, e: int, state: dict) -> None:
        if int(state["step_count"]) != self.step_count and self.step_count != 0:
            raise ValueError("members of one ensemble must resume from the same step")
        self.step_count = int(state["step_count"])
        self.active[e] = bool(state["active"])
        with torch.no_grad():
            for name, bufs in zip(self.buffer_names, self._buffers(), strict=True):
                for dst, src in zip(bufs, state[name], strict=True):
                    dst[e].copy_(src)
