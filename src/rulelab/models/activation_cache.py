"""The cache of ``MemberModel.run_with_cache``: a dict of activations with TransformerLens'
``ActivationCache`` readings of the residual stream (issue 23 item 3).

TransformerLens is optional here (heavy to import, and rulelab works without it), so this is
a small class of our own rather than TL's ``ActivationCache`` wrapped around our model: it is
a plain ``dict`` of ``{hook name: activation [batch, …]}`` (every existing caller keeps
working) plus TL's key shorthand (``cache["resid_pre", 0]``) and the three residual-stream
readings with TL's arguments, labels, ordering and LayerNorm handling (TransformerLens 4.3,
``ActivationCache.accumulated_resid`` / ``decompose_resid`` / ``stack_head_results`` /
``apply_ln_to_stack``). tests/engine/models/test_tl_parity.py checks each against TL's own cache of
the same weights.

Positions include the CLS token at 0 (our residual stream carries it), as in TL's cache of
the exported model fed ``model.to_tokens(x)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# TL's get_act_name for the names our models have: short name → (sub-module, hook)
_IN_ATTN = {"q", "k", "v", "z", "pattern", "attn_scores", "result"}
_IN_MLP = {"pre", "post"}
_ALIASES = {"attn": "pattern", "attn_logits": "attn_scores", "mlp_pre": "pre",
            "mlp_post": "post", "query": "q", "key": "k", "value": "v"}


def act_name(name: str, layer: int | None = None, layer_type: str | None = None) -> str:
    """TransformerLens' full hook name of a short one: ``("resid_pre", 0)`` →
    ``blocks.0.hook_resid_pre``, ``("z", 1)`` → ``blocks.1.attn.hook_z``,
    ``("scale", 0, "ln1")`` → ``blocks.0.ln1.hook_scale``; ``"embed"`` → ``hook_embed``."""
    if ("." in name or name.startswith("hook_")) and layer is None:
        return name
    name = _ALIASES.get(name, name)
    if layer is None:
        return f"ln_final.hook_{name}" if name in ("scale", "normalized") else f"hook_{name}"
    if name in ("scale", "normalized"):
        sub = f"{layer_type or 'ln1'}."
    elif name in _IN_ATTN:
        sub = "attn."
    elif name in _IN_MLP:
        sub = "mlp."
    else:
        sub = ""
    return f"blocks.{layer}.{sub}hook_{name}"


def _pos(t: torch.Tensor, pos_slice, dim: int) -> torch.Tensor:
    """TL's ``Slice(pos_slice).apply(t, dim)``: None keeps all, an int drops the axis, a
    slice / list / tensor selects."""
    if pos_slice is None:
        return t
    index = [slice(None)] * t.dim()
    if isinstance(pos_slice, (list, tuple)):
        pos_slice = torch.tensor(pos_slice)
    index[dim] = pos_slice
    return t[tuple(index)]


class ActivationCache(dict):
    """``{hook name: activation [batch, …]}`` of one model run, with TransformerLens'
    residual-stream readings. ``model`` is the :class:`~rulelab.models.member.MemberModel`
    the run went through (its ``cfg``, ``W_O`` and final LayerNorm are read)."""

    def __init__(self, cache: dict[str, torch.Tensor], model) -> None:
        super().__init__(cache)
        self.model = model

    def __getitem__(self, key) -> torch.Tensor:
        if isinstance(key, tuple):
            name, layer, *rest = key
            if layer is not None and layer < 0:  # TL allows counting layers from the end
                layer += self.model.cfg.n_layers
            key = act_name(name, layer, *rest)
        elif key not in self:
            key = act_name(key)
        return super().__getitem__(key)

    def __repr__(self) -> str:
        return f"ActivationCache with keys {list(self)}"

    @property
    def n_layers(self) -> int:
        return self.model.cfg.n_layers

    def _layer(self, layer: int | None) -> int:
        return self.n_layers if layer is None or layer == -1 else int(layer)

    # --- the residual stream, as TransformerLens reads it ----------------------------------
    def accumulated_resid(self, layer: int | None = None, incl_mid: bool = False,
                          apply_ln: bool = False, pos_slice=None, mlp_input: bool = False,
                          return_labels: bool = False):
        """The residual stream entering each layer up to ``layer`` (all, plus the final one,
        when None): ``[components, batch, pos, d_model]``, labels ``0_pre … final_post``."""
        layer = self._layer(layer)
        parts, labels = [], []
        for lay in range(layer + 1):
            if lay == self.n_layers:
                parts.append(self["resid_post", self.n_layers - 1])
                labels.append("final_post")
                continue
            parts.append(self["resid_pre", lay])
            labels.append(f"{lay}_pre")
            if (incl_mid and lay < layer) or (mlp_input and lay == layer):
                parts.append(self["resid_mid", lay])
                labels.append(f"{lay}_mid")
        stack = torch.stack([_pos(p, pos_slice, -2) for p in parts])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice,
                                           recompute_ln=layer == self.n_layers)
        return (stack, labels) if return_labels else stack

    def decompose_resid(self, layer: int | None = None, mlp_input: bool = False,
                        mode: str = "all", apply_ln: bool = False, pos_slice=None,
                        incl_embeds: bool = True, return_labels: bool = False):
        """The residual stream entering ``layer`` as the sum of what wrote to it: ``embed``,
        ``pos_embed``, then each layer's ``attn_out`` and ``mlp_out`` (``mode`` "attn" or
        "mlp" keeps one kind)."""
        layer = self._layer(layer)
        with_attn, with_mlp = mode != "mlp", mode != "attn" and not self.model.cfg.attn_only
        parts, labels = [], []
        if incl_embeds:
            for name in ("embed", "pos_embed"):
                if f"hook_{name}" in self:
                    parts.append(self[f"hook_{name}"])
                    labels.append(name)
        for lay in range(layer):
            if with_attn:
                parts.append(self["attn_out", lay])
                labels.append(f"{lay}_attn_out")
            if with_mlp:
                parts.append(self["mlp_out", lay])
                labels.append(f"{lay}_mlp_out")
        if mlp_input and with_attn:
            parts.append(self["attn_out", layer])
            labels.append(f"{layer}_attn_out")
        stack = torch.stack([_pos(p, pos_slice, -2) for p in parts])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice)
        return (stack, labels) if return_labels else stack

    def compute_head_results(self) -> None:
        """Each head's write to the residual stream, ``blocks.L.attn.hook_result``
        ``[batch, pos, head, d_model]`` = ``z @ W_O`` per head (without ``b_O``, as in TL)."""
        W_O = self.model.W_O  # [layer, head, d_head, d_model]
        for lay in range(self.n_layers):
            key = f"blocks.{lay}.attn.hook_result"
            if key not in self:
                self[key] = torch.einsum("...hd,hdm->...hm", self["z", lay], W_O[lay])

    def stack_head_results(self, layer: int = -1, return_labels: bool = False,
                           incl_remainder: bool = False, pos_slice=None,
                           apply_ln: bool = False):
        """Every head's write before ``layer`` (all when -1/None):
        ``[layer·head (+1), batch, pos, d_model]``, labels ``L0H0, L0H1, …`` (and
        ``remainder``: the rest of ``resid_post`` of layer − 1)."""
        layer = self._layer(layer)
        self.compute_head_results()
        heads = [_pos(self["result", lay], pos_slice, -3) for lay in range(layer)]
        labels = [f"L{lay}H{h}" for lay in range(layer) for h in range(self.model.cfg.n_heads)]
        if heads:  # [..., layer·head, d_model] → [layer·head, ..., d_model]
            stack = torch.cat(heads, dim=-2).movedim(-2, 0)
        else:
            empty = _pos(self["hook_embed"], pos_slice, -2)
            stack = empty.new_zeros(0, *empty.shape)
        if incl_remainder:
            rest = _pos(self["resid_post", layer - 1], pos_slice, -2) - stack.sum(0)
            stack = torch.cat([stack, rest[None]])
            labels.append("remainder")
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def apply_ln_to_stack(self, stack: torch.Tensor, layer: int | None = None,
                          mlp_input: bool = False, pos_slice=None,
                          recompute_ln: bool = False) -> torch.Tensor:
        """Each component as the input of ``layer``'s LayerNorm (the unembedding at
        ``n_layers``) would see it: centred and divided by the run's cached scale — the scale
        is of the whole stream, so it is shared by the components. ``recompute_ln`` at the
        final layer (logit lens) normalises each component by its own statistics and applies
        ``ln_final``'s weights instead. Unchanged for a model without LayerNorm."""
        layer = self._layer(layer)
        if self.model.cfg.normalization_type is None:
            return stack
        if recompute_ln and layer == self.n_layers:
            w, b = self.model.ln_final_weights
            return F.layer_norm(stack, stack.shape[-1:], w, b, eps=self.model.cfg.eps)
        stack = stack - stack.mean(-1, keepdim=True)
        key = ("ln_final.hook_scale" if layer == self.n_layers else
               f"blocks.{layer}.ln{2 if mlp_input else 1}.hook_scale")
        return stack / _pos(self[key], pos_slice, -2)
