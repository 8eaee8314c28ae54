"""Ensemble-aware hook points, in the style of TransformerLens (DESIGN §1, §7).

Every activation passing a :class:`HookPoint` carries the leading member axis ``E``, so one
hook sees all members at once: ``blocks.0.attn.hook_pattern`` is ``[E, batch, head, q, k]``.
A hook function is called as ``fn(activation, hook=hook_point)``; returning a tensor replaces
the activation (patching, ablation), returning ``None`` leaves it unchanged (caching).

Hooks are always temporary here: :meth:`HookedEnsemble.hooks` and
:meth:`HookedEnsemble.run_with_cache` remove what they added when the block exits, even on an
exception, so a failed analysis never leaves a model silently patched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

HookFn = Callable[..., torch.Tensor | None]
NameFilter = str | Sequence[str] | Callable[[str], bool] | None


class HookPoint(nn.Module):
    """Identity module that runs its hook functions on the tensor passing through."""

    def __init__(self) -> None:
        super().__init__()
        self.name: str = ""
        self._fns: list[HookFn] = []

    @property
    def has_hooks(self) -> bool:
        return bool(self._fns)

    def add_hook(self, fn: HookFn) -> Callable[[], None]:
        """Attach ``fn``; returns a function that removes exactly this hook."""
        self._fns.append(fn)

        def remove() -> None:
            if fn in self._fns:
                self._fns.remove(fn)

        return remove

    def remove_hooks(self) -> None:
        self._fns.clear()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for fn in self._fns:
            out = fn(x, hook=self)
            if out is not None:
                x = out
        return x

    def extra_repr(self) -> str:
        return self.name


def _matcher(names: NameFilter) -> Callable[[str], bool]:
    if names is None:
        return lambda _: True
    if isinstance(names, str):
        return lambda n: n == names
    if callable(names):
        return names
    wanted = set(names)
    return lambda n: n in wanted


class HookedEnsemble(nn.Module):
    """Base class: names every :class:`HookPoint` by its module path after construction."""

    def setup_hooks(self) -> None:
        self.hook_dict: dict[str, HookPoint] = {}
        for name, module in self.named_modules():
            if isinstance(module, HookPoint):
                module.name = name
                self.hook_dict[name] = module

    @property
    def hook_names(self) -> list[str]:
        return list(self.hook_dict)

    def reset_hooks(self) -> None:
        for hp in self.hook_dict.values():
            hp.remove_hooks()

    @contextmanager
    def hooks(self, fwd_hooks: Sequence[tuple[NameFilter, HookFn]]) -> Iterator[HookedEnsemble]:
        """Temporarily attach ``(name or filter, fn)`` pairs; always removed on exit."""
        removers: list[Callable[[], None]] = []
        try:
            for names, fn in fwd_hooks:
                match = _matcher(names)
                hit = [hp for n, hp in self.hook_dict.items() if match(n)]
                if not hit and isinstance(names, str):
                    raise KeyError(f"unknown hook point {names!r}")
                removers.extend(hp.add_hook(fn) for hp in hit)
            yield self
        finally:
            for remove in removers:
                remove()

    def run_with_cache(
        self, *args, names_filter: NameFilter = None, detach: bool = True, **kwargs
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Run forward and return ``(output, cache)`` with the activations whose names match."""
        cache: dict[str, torch.Tensor] = {}

        def save(x: torch.Tensor, hook: HookPoint) -> None:
            cache[hook.name] = x.detach() if detach else x

        with self.hooks([(names_filter, save)]):
            out = self(*args, **kwargs)
        return out, cache
