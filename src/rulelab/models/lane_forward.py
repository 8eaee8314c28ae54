"""The ensemble transformer's eager forward on the CPU with the batch innermost everywhere
(engines 8 and 9, issue 25).

Engine 7 (:meth:`EnsembleTransformer.forward_fast
<rulelab.models.transformer.EnsembleTransformer>`) kept the residual stream ``[E, T, B, d]``
and computed attention batch-innermost, so every LayerNorm ran across the layout (its input
rows of ``d`` floats, the gradient coming back from the QKV matmul transposed). Here the
residual stream is ``[E, d, T, B]`` throughout, the layout :mod:`rulelab.models.fused_forward`
gives the compiled engine:

- every weight matmul is ``Wᵀ x`` on ``x [E, d, T·B]`` (one ``bmm`` per projection, its bias
  added after: the product rounded, then the sum), so its output is already the next op's
  layout: q, k and v ``[E, H, d_head, T, B]`` for :mod:`rulelab.models.attention_core`, the
  attention's ``z`` for the output projection, the MLP's hidden units for its second matmul;
- every LayerNorm reduces over ``d``, an outer axis, with the rows as vector lanes
  (:mod:`rulelab.models.layer_norm_lanes`: no transpose, no copy);
- the tokens and positions are embedded straight into that layout, and each sublayer's output
  bias, the residual add and the LayerNorm reading the sum run as one pass each way
  (:mod:`rulelab.models.lane_embedding`, :mod:`rulelab.models.residual_norm`: the numbers of
  the op-by-op chain they replaced, bit for bit);
- the last block keeps only the CLS position past its keys and values, as engine 7 does;
- engine 9 (``in_order``) adds each softmax's keys in key order and runs the attention core
  fused where it can (:mod:`rulelab.models.attention_core`); engine 8 keeps PyTorch's sums.

The batch is padded to a multiple of ``PAD`` with copies of its first example (their logits are
dropped, so their gradient is exactly 0). Bitwise: no op sums across members or examples, the
native kernels' numbers equal their PyTorch paths', and the matmuls are one per member; a member
equals its solo run (tests/studies/shortcut_saturation/test_mpsp_attention_engine.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from rulelab.models import lane_embedding
from rulelab.models.attention_core import PAD, PackedAttention, QueryAttention
from rulelab.models.layer_norm_lanes import LaneLayerNorm
from rulelab.models.residual_norm import ResidualLayerNorm


def layer_norm(ln, x: torch.Tensor) -> torch.Tensor:
    """``x [E, d, *rows]`` normalized over ``d`` with member ``e``'s ``ln.w, ln.b`` (``x``
    itself when ``ln`` is None: no LayerNorm)."""
    return x if ln is None else LaneLayerNorm.apply(x, ln.w, ln.b, ln.eps)


def projection(weight_t: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor,
               low: torch.dtype | None = None) -> torch.Tensor:
    """``weight_t [E, m, k] @ x [E, k, N]``, then ``bias [E, m]`` added to every column (None:
    the caller adds it, :func:`residual`): ``[E, m, N]`` in fp32. With ``low`` (bf16) the
    product takes both operands rounded to ``low`` and returns its sums (accumulated in fp32 by
    the library) rounded to ``low``, as autocast's matmul does; the bias is added in fp32."""
    # bf16: .float() then add_: the bits of ``y + bias`` promoted to fp32, in 0.6× its time
    # (measured: PyTorch's mixed-dtype add is not vectorized like either op alone)
    y = torch.bmm(weight_t, x) if low is None else torch.bmm(weight_t.to(low), x.to(low)).float()
    return y if bias is None else y.add_(bias.unsqueeze(2))


def attention(attn, x: torch.Tensor, cls_only: bool, low: torch.dtype | None = None,
              in_order: bool = False, out_bias: bool = True, core_bias: bool = True
              ) -> torch.Tensor:
    """``x [E, d, T, B] → [E, d, T', B]`` through the weights of ``attn``
    (:class:`~rulelab.models.components.Attention`); ``cls_only`` keeps the query at position 0
    (``T' = 1``) and projects only its q; ``low``: the matmuls' operand dtype
    (:func:`projection`); ``in_order``: engine 9's core (:class:`PackedAttention`);
    ``out_bias=False``: without the output projection's bias (:func:`residual` adds it);
    ``core_bias``: q, k and v's biases added by the attention core as it reads them (else by
    the projections, a pass of their own: the same numbers, ``bench/native_pieces.py``)."""
    E, d, T, B = x.shape
    H, dh = attn.n_heads, attn.d_head
    n = H * dh
    Wt = torch.cat([attn.W_Q, attn.W_K, attn.W_V], dim=1).transpose(2, 3).reshape(E, 3 * n, d)
    b = torch.cat([attn.b_Q, attn.b_K, attn.b_V], dim=1).reshape(E, 3 * n)
    cols = x.reshape(E, d, T * B)  # columns (position, example)
    scale = 1.0 / math.sqrt(dh)
    by_proj, by_core = (None, b) if core_bias else (b, None)  # who adds q, k and v's biases
    if cls_only:
        q = projection(Wt[:, :n], _part(by_proj, 0, n), cols[:, :, :B], low).view(E, H, dh, 1, B)
        kv = projection(Wt[:, n:], _part(by_proj, n, None), cols, low).view(E, 2, H, dh, T, B)
        z = QueryAttention.apply(q, kv, scale, in_order, _part(by_core, 0, n),
                                 _part(by_core, n, None))  # [E, H, dh, 1, B]
    else:
        qkv = projection(Wt, by_proj, cols, low).view(E, 3, H, dh, T, B)
        z = PackedAttention.apply(qkv, scale, in_order, by_core)  # [E, H, dh, T, B]
    Tq = z.shape[3]
    Wo_t = attn.W_O.reshape(E, n, d).transpose(1, 2)  # [E, d, H·dh]
    b_O = attn.b_O if out_bias else None
    return projection(Wo_t, b_O, z.reshape(E, n, Tq * B), low).view(E, d, Tq, B)


def _part(b: torch.Tensor | None, start: int, stop: int | None) -> torch.Tensor | None:
    """Columns ``start:stop`` of a bias ``[E, m]`` (None: none)."""
    return None if b is None else b[:, start:stop]


def mlp(m, x: torch.Tensor, low: torch.dtype | None = None, out_bias: bool = True
        ) -> torch.Tensor:
    """``x [E, d, *] → [E, d, *]`` through the weights of ``m``
    (:class:`~rulelab.models.components.MLP`): ``W_outᵀ φ(W_inᵀ x)``; ``out_bias=False``:
    without ``b_out`` (:func:`residual` adds it)."""
    E, d = x.shape[:2]
    h = projection(m.W_in.transpose(1, 2), m.b_in, x.reshape(E, d, -1), low)
    h = h.relu_() if m.act is F.relu else m.act(h)  # in place: the same numbers, a pass less
    b_out = m.b_out if out_bias else None
    return projection(m.W_out.transpose(1, 2), b_out, h, low).view(x.shape)


def residual(base: torch.Tensor, o: torch.Tensor, bias: torch.Tensor, ln
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """The residual stream ``s = base + (o + bias)`` (a sublayer's output ``o`` without its
    bias) and ``LayerNorm(s)`` by ``ln`` — one native pass each way
    (:class:`~rulelab.models.residual_norm.ResidualLayerNorm`); ``s`` itself where ``ln`` is
    None (no LayerNorm)."""
    if ln is None:
        s = base + o.add_(bias.view(*bias.shape, *[1] * (o.dim() - 2)))
        return s, s
    return ResidualLayerNorm.apply(base, o, bias, ln.w, ln.b, ln.eps)


def padded_tokens(model, x: torch.Tensor) -> torch.Tensor:
    """``x [E, B, n]`` (integers, without CLS) → tokens ``[E, T, B']`` (CLS first; ``B'`` the
    batch padded to a multiple of ``PAD`` with copies of its first example)."""
    E, B, n = x.shape
    if pad := -B % PAD:
        x = torch.cat([x, x[:, :1].expand(E, pad, n)], dim=1)
    return model.add_cls(x).transpose(1, 2)


def embed_tokens(model, tokens: torch.Tensor) -> torch.Tensor:
    """``tokens [E, T, B']`` → the embedded tokens and positions ``[E, T, B', d]``."""
    E, T = tokens.shape[:2]
    V = model.W_E.shape[1]
    # Gathered from W_E flattened to [E·V, d], as every engine does: one embedding, members'
    # rows apart (its backward then sums each member's rows as a lone run would).
    offset = torch.arange(E, device=tokens.device).view(E, 1, 1) * V
    embed = F.embedding(tokens + offset, model.W_E.reshape(E * V, -1))  # [E, T, B', d]
    return embed + model.W_pos[:, :T].unsqueeze(2)


def embed_padded(model, x: torch.Tensor) -> torch.Tensor:
    """``x [E, B, n]`` (integers, without CLS) → the embedded tokens and positions
    ``[E, T, B', d]`` (:func:`padded_tokens`; engine 7)."""
    return embed_tokens(model, padded_tokens(model, x))


def embed_lanes(model, x: torch.Tensor) -> torch.Tensor:
    """``x [E, B, n]`` → the residual stream's start ``[E, d, T, B']`` (engines 8 and 9): one
    native pass each way where it builds (:class:`~rulelab.models.lane_embedding.LaneEmbedding`),
    else :func:`embed_tokens` transposed — the same numbers."""
    tokens = padded_tokens(model, x).contiguous()
    lib = lane_embedding.native(tokens, model.W_E, model.W_pos)
    if lib is None:
        return embed_tokens(model, tokens).permute(0, 3, 1, 2).contiguous()
    return lane_embedding.LaneEmbedding.apply(tokens, model.W_E, model.W_pos, lib)


def matmul_dtype() -> torch.dtype | None:
    """bf16 where the caller runs under CPU bf16 autocast (``--precision bf16``), else None."""
    on = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    return torch.bfloat16 if on else None


def lane_forward(model, x: torch.Tensor, in_order: bool = False) -> torch.Tensor:
    """``x [E, B, n]`` (integers, without CLS) → logits ``[E, B, k]`` of ``model`` (an
    :class:`~rulelab.models.transformer.EnsembleTransformer`), read at CLS; ``in_order``:
    engine 9's attention core (:func:`attention`), else engine 8's.

    Under bf16 autocast (``--precision bf16``) the weight matmuls alone take bf16 operands
    (:func:`projection`); the attention's sums, softmax, LayerNorms and residual stream stay
    fp32 — autocast itself would hand the native kernels bf16 tensors, whose PyTorch fallback
    would then sum the attention in bf16, every partial sum rounded to 8 bits."""
    low = matmul_dtype()
    with torch.autocast("cpu", enabled=False):
        return _lane_forward(model, x, low, in_order)


def _lane_forward(model, x: torch.Tensor, low: torch.dtype | None, in_order: bool
                  ) -> torch.Tensor:
    B = x.shape[1]
    blocks = model.blocks
    resid = embed_lanes(model, x)  # [E, d, T, B']
    normed = layer_norm(blocks[0].ln1, resid)  # what the next sublayer reads
    for i, block in enumerate(blocks):
        last = i == len(blocks) - 1  # the last block needs only the CLS position
        ln_next = model.ln_final if last else blocks[i + 1].ln1  # reads the block's output
        attn_out = attention(block.attn, normed, last, low, in_order, out_bias=False)
        base = resid[:, :, :1] if last else resid
        if block.mlp is None:
            resid, normed = residual(base, attn_out, block.attn.b_O, ln_next)
            continue
        resid, normed = residual(base, attn_out, block.attn.b_O, block.ln2)
        mlp_out = mlp(block.mlp, normed, low, out_bias=False)
        resid, normed = residual(resid, mlp_out, block.mlp.b_out, ln_next)
    cls = normed[:, :, 0]  # [E, d, B']: the final LayerNorm of the CLS position
    logits = projection(model.W_U.transpose(1, 2), model.b_U, cls, low)  # [E, k, B']
    logits = logits.transpose(1, 2)  # [E, B', k]
    return logits[:, :B] if logits.shape[1] != B else logits  # padding dropped
