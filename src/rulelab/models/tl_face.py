"""What a TransformerLens user reaches for on a model, on one member of our transformer
(issue 23 item 3): ``cfg``, the weights stacked as ``HookedTransformer`` stacks them (member
axis taken out), ``OV`` / ``QK``, ``to_tokens`` and ``run_with_hooks``.

Shapes (TL's): ``W_E [d_vocab, d_model]`` (``d_vocab = V + 1``: CLS is token ``V``),
``W_pos [n_ctx, d_model]``, ``W_Q, W_K, W_V [n_layers, n_heads, d_model, d_head]``,
``W_O [n_layers, n_heads, d_head, d_model]``, ``W_in [n_layers, d_model, d_mlp]``,
``W_out [n_layers, d_mlp, d_model]``, ``W_U [d_model, d_vocab_out]``; biases likewise.
They are views of (or stacks over) the trained parameters, so gradients flow, as in TL.
tests/engine/models/test_tl_parity.py checks them against the exported TransformerLens model's.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import torch

from rulelab.errors import UserError
from rulelab.models.hooks import HookFn, NameFilter


class TransformerLensFace:
    """Mixin for :class:`~rulelab.models.member.MemberModel` (``self.ensemble``,
    ``self.member``); every attribute is one line of error for a non-transformer."""

    ensemble: torch.nn.Module
    member: int

    @property
    def _transformer(self):
        from rulelab.models.transformer import EnsembleTransformer

        if not isinstance(self.ensemble, EnsembleTransformer):
            raise UserError(f"only transformers (EnsembleTransformer) have TransformerLens "
                            f"weights and cfg; this model is a {type(self.ensemble).__name__}")
        return self.ensemble

    @property
    def cfg(self) -> SimpleNamespace:
        """TransformerLens' config fields (``n_layers``, ``n_heads``, ``d_head``,
        ``d_vocab``, ``n_ctx``, ``normalization_type``, …; :func:`tl_export.tl_config`)."""
        from rulelab.models.tl_export import tl_config

        return SimpleNamespace(**tl_config(self._transformer.cfg))

    # --- weights ---------------------------------------------------------------------------
    def _top(self, name: str) -> torch.Tensor:
        return getattr(self._transformer, name)[self.member]

    def _stacked(self, part: str, name: str) -> torch.Tensor:
        """``blocks[l].part.name[member]`` stacked over layers (TL's ``model.W_Q`` etc.)."""
        blocks = self._transformer.blocks
        if part == "mlp" and blocks[0].mlp is None:
            raise UserError(f"{name}: this model is attention-only (d_mlp = 0)")
        return torch.stack([getattr(getattr(b, part), name)[self.member] for b in blocks])

    W_E = property(lambda self: self._top("W_E"), doc="[d_vocab, d_model]")
    W_pos = property(lambda self: self._top("W_pos"), doc="[n_ctx, d_model]")
    W_U = property(lambda self: self._top("W_U"), doc="[d_model, d_vocab_out]")
    b_U = property(lambda self: self._top("b_U"), doc="[d_vocab_out]")
    W_Q = property(lambda self: self._stacked("attn", "W_Q"), doc="[layer, head, d_model, d_head]")
    W_K = property(lambda self: self._stacked("attn", "W_K"), doc="[layer, head, d_model, d_head]")
    W_V = property(lambda self: self._stacked("attn", "W_V"), doc="[layer, head, d_model, d_head]")
    W_O = property(lambda self: self._stacked("attn", "W_O"), doc="[layer, head, d_head, d_model]")
    b_Q = property(lambda self: self._stacked("attn", "b_Q"), doc="[layer, head, d_head]")
    b_K = property(lambda self: self._stacked("attn", "b_K"), doc="[layer, head, d_head]")
    b_V = property(lambda self: self._stacked("attn", "b_V"), doc="[layer, head, d_head]")
    b_O = property(lambda self: self._stacked("attn", "b_O"), doc="[layer, d_model]")
    W_in = property(lambda self: self._stacked("mlp", "W_in"), doc="[layer, d_model, d_mlp]")
    W_out = property(lambda self: self._stacked("mlp", "W_out"), doc="[layer, d_mlp, d_model]")
    b_in = property(lambda self: self._stacked("mlp", "b_in"), doc="[layer, d_mlp]")
    b_out = property(lambda self: self._stacked("mlp", "b_out"), doc="[layer, d_model]")

    @property
    def OV(self):
        """TL's ``FactoredMatrix(W_V, W_O)`` ``[layer, head, d_model, d_model]`` (needs
        transformer_lens; the dense matrix is ``W_V @ W_O``)."""
        return _factored(self.W_V, self.W_O)

    @property
    def QK(self):
        """TL's ``FactoredMatrix(W_Q, W_Kᵀ)`` ``[layer, head, d_model, d_model]`` (needs
        transformer_lens; the dense matrix is ``W_Q @ W_K.transpose(-2, -1)``)."""
        return _factored(self.W_Q, self.W_K.transpose(-2, -1))

    @property
    def ln_final_weights(self) -> tuple[torch.Tensor, torch.Tensor] | tuple[None, None]:
        """``(w, b)`` of the final LayerNorm, ``(None, None)`` without LayerNorm."""
        ln = self._transformer.ln_final
        return (None, None) if ln is None else (ln.w[self.member], ln.b[self.member])

    # --- tokens ----------------------------------------------------------------------------
    def to_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """Inputs ``[batch, n]`` → tokens ``[batch, n + 1]`` with CLS (id ``V``) first: what
        the exported TransformerLens model takes, and the positions of every cached
        activation (CLS at 0). Tokens already starting with CLS are returned unchanged."""
        if self.is_tokens(x):
            return x
        return self._transformer.add_cls(x.unsqueeze(0))[0]

    def to_input(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens with CLS first → the inputs ``[batch, n]`` the model takes (inputs are
        returned unchanged)."""
        return x[..., 1:] if self.is_tokens(x) else x

    def is_tokens(self, x: torch.Tensor) -> bool:
        """Whether ``x`` holds tokens with CLS first (``n + 1`` long, column 0 all ``V``);
        unambiguous, since inputs are in ``0 … V − 1``."""
        from rulelab.models.transformer import EnsembleTransformer

        model = self.ensemble
        if not isinstance(model, EnsembleTransformer) or x.shape[-1] != model.cfg.seq_len + 1:
            return False
        return bool((x[..., 0] == model.cls_token).all())

    # --- hooks -----------------------------------------------------------------------------
    def run_with_hooks(self, x: torch.Tensor, fwd_hooks: Sequence[tuple[NameFilter, HookFn]]
                       = (), **_ignored) -> torch.Tensor:
        """Logits ``[batch, k]`` with ``(name or filter, fn)`` hooks attached for this run
        only, as TL's ``run_with_hooks``: ``fn(act [batch, …], hook)`` may return a
        replacement. ``x`` may be inputs or :meth:`to_tokens`. (TL's ``bwd_hooks``,
        ``reset_hooks_end`` … are not supported: our hooks are always removed after.)"""
        if _ignored.get("bwd_hooks"):
            raise UserError("run_with_hooks: bwd_hooks are not supported here; use "
                            "torch's tensor.register_hook in a forward hook")
        with self.hooks(list(fwd_hooks)):
            return self(x)


def _factored(A: torch.Tensor, B: torch.Tensor):
    from rulelab.models.tl_export import require_transformer_lens

    require_transformer_lens()
    from transformer_lens import FactoredMatrix

    return FactoredMatrix(A, B)
