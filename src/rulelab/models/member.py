"""One member of an ensemble as a model of its own, without the member axis (issue 10).

Every model here carries a leading member axis ``E`` (DESIGN §1): inputs ``[E, batch, …]``,
activations ``[E, batch, …]``. A researcher looking at one run wants ``[batch, …]``.
:class:`MemberModel` wraps an ensemble and one member index: its forward, ``run_with_cache``
and ``hooks`` take and give tensors of that member alone, under the same TransformerLens-style
hook names (:mod:`rulelab.models.hooks`). A hook function sees ``[batch, …]`` and may return a
replacement of that shape, which is written back into that member's slot only.

For a transformer it also reads as a TransformerLens model (:mod:`rulelab.models.tl_face`):
``cfg``, ``W_Q`` … stacked over layers, ``OV`` / ``QK``, ``to_tokens``, ``run_with_hooks``; and
``run_with_cache`` gives an :class:`~rulelab.models.activation_cache.ActivationCache`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from rulelab.errors import UserError
from rulelab.models.activation_cache import ActivationCache
from rulelab.models.hooks import HookedEnsemble, HookFn, HookPoint, NameFilter
from rulelab.models.tl_face import TransformerLensFace


class MemberModel(TransformerLensFace, nn.Module):
    """Member ``member`` of ``ensemble`` as a model: ``x [batch, …]`` → logits ``[batch, k]``.

    ``config`` is the run's config (``model.config.layers``, …); ``data`` the run's data with
    the member axis taken out (e.g. ``model.data.val_x [N, n]``), when the caller has it.
    """

    def __init__(self, ensemble: nn.Module, member: int = 0, *, config=None,
                 data=None) -> None:
        super().__init__()
        n = ensemble_size(ensemble)
        if not 0 <= member < n:
            raise ValueError(f"member {member} is not in an ensemble of {n}")
        self.ensemble, self.member, self.config = ensemble, member, config
        self.data = member_data(data, member) if data is not None else None

    # --- the member axis in and out --------------------------------------------------------
    def stack(self, x: torch.Tensor) -> torch.Tensor:
        """``[batch, …]`` → ``[E, batch, …]``: the same input in every member's slot (tokens
        with CLS first, :meth:`to_tokens`, are taken as their inputs)."""
        x = self.to_input(x)
        E = ensemble_size(self.ensemble)
        return x.unsqueeze(0).expand(E, *x.shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ensemble(self.stack(x))[self.member]

    @property
    def hooked(self) -> HookedEnsemble:
        """The ensemble, when it has hook points (one line saying so when it has none)."""
        if not isinstance(self.ensemble, HookedEnsemble):
            raise UserError(f"this model ({type(self.ensemble).__name__}) has no hook points")
        return self.ensemble

    @property
    def hook_dict(self) -> dict[str, HookPoint]:
        return self.hooked.hook_dict

    @property
    def hook_names(self) -> list[str]:
        return self.hooked.hook_names

    @contextmanager
    def hooks(self, fwd_hooks: Sequence[tuple[NameFilter, HookFn]]) -> Iterator[MemberModel]:
        """Temporarily attach ``(name or filter, fn)`` pairs; ``fn(act [batch, …], hook)``."""
        with self.hooked.hooks([(names, self._on_member(fn)) for names, fn in fwd_hooks]):
            yield self

    def run_with_cache(self, x: torch.Tensor, *, names_filter: NameFilter = None,
                       detach: bool = True) -> tuple[torch.Tensor, ActivationCache]:
        """``(logits [batch, k], {hook name: activation [batch, …]})``; the cache is a dict
        with TransformerLens' ``accumulated_resid``, ``decompose_resid``,
        ``stack_head_results``."""
        logits, cache = self.hooked.run_with_cache(self.stack(x), names_filter=names_filter,
                                                   detach=detach)
        return logits[self.member], ActivationCache(
            {k: v[self.member] for k, v in cache.items()}, self)

    def _on_member(self, fn: HookFn) -> HookFn:
        e = self.member

        def hook(act: torch.Tensor, hook: HookPoint) -> torch.Tensor | None:
            out = fn(act[e], hook=hook)
            if out is None:
                return None
            act = act.clone()
            act[e] = out
            return act

        return hook

    # --- interop ---------------------------------------------------------------------------
    def to_transformer_lens(self):
        """This member as a TransformerLens ``TransformerBridge``
        (:func:`rulelab.models.tl_export.to_transformer_lens`; needs ``transformer_lens``)."""
        from rulelab.models.tl_export import to_transformer_lens

        return to_transformer_lens(self.ensemble, self.member)

    def extra_repr(self) -> str:
        return f"member={self.member}"


def ensemble_size(model: nn.Module) -> int:
    """``E``: the leading axis every parameter of an ensemble model carries."""
    n = getattr(model, "n_members", None)
    if n is None:
        n = next(model.parameters()).shape[0]
    return int(n)


def member_data(data, member: int):
    """``data`` (a dataclass of ``[E, …]`` tensors) with every tensor's member axis taken at
    ``member``; other fields are kept as they are."""
    if not dataclasses.is_dataclass(data):
        raise UserError(f"data of type {type(data).__name__} has no member fields to select")
    picked: dict[str, object] = {}
    for f in dataclasses.fields(data):
        v = getattr(data, f.name)
        picked[f.name] = v[member] if isinstance(v, torch.Tensor) and v.dim() > 0 else v
    return dataclasses.replace(data, **picked)

