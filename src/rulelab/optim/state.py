"""Checkpointing for batched optimizers: whole state or one member's slice (DESIGN §3).

Every batched optimizer keeps ``step_count``, an ``active`` ``[E]`` mask and a few lists of
per-parameter buffers stacked over members (named in ``buffer_names``). Per-run checkpoints
store one member's slice, so a resumed run can join any ensemble.
"""

from __future__ import annotations

from typing import ClassVar

import torch


class MemberStateMixin:
    """``state_dict`` / ``member_state`` and their loaders over ``buffer_names``."""

    buffer_names: ClassVar[tuple[str, ...]] = ()
    step_count: int
    active: torch.Tensor

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
