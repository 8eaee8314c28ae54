"""The ensemble transformer's forward in plain tensor ops, for ``torch.compile`` (engine 3,
issue 25).

What inductor traces when the compiled engine trains (:mod:`rulelab.train.compiled`): the same
function as :meth:`EnsembleTransformer.forward <rulelab.models.transformer.EnsembleTransformer>`,
written so the compiler can fuse everything that is not a weight matmul.

- The residual stream is ``[E, T, B, d]``, positions outermost (engine 2's layout).
- Q, K and V come from one transposed matmul, as ``[E, H, d_head, T, B]`` with the batch
  innermost and contiguous.
- Attention over the ≤ 11 positions is written as broadcast products summed over ``d_head``
  (the scores) and over the keys (``z``), not as tiny batched matmuls. Inductor turns each of
  these, with its softmax, into a loop vectorized over the batch, forward and backward.
- LayerNorm is ``F.layer_norm`` followed by the per-member affine part, which inductor fuses
  into one pass.
- Only the four weight matmuls per block (QKV, output, MLP in and out) stay library calls.

Bitwise: every reduction runs over ``d``, ``d_head``, the keys or the rows of one member, never
across members. The compiled kernels are single-threaded (``cpp.threads = 1``), so no
reduction is split across threads in a way that depends on the ensemble's size. A member
therefore equals its solo run within this engine
(tests/unit/test_compiled_engine.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def member_layer_norm(x: torch.Tensor, ln) -> torch.Tensor:
    """``x [E, *, d]`` normalized, then scaled and shifted by member ``e``'s ``ln.w, ln.b [E, d]``
    (``x`` itself when ``ln`` is None: a model without LayerNorm)."""
    if ln is None:
        return x
    shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],)
    y = F.layer_norm(x, x.shape[-1:], eps=ln.eps)
    return torch.addcmul(ln.b.view(shape), y, ln.w.view(shape))


def attention(attn, x: torch.Tensor, cls_only: bool) -> torch.Tensor:
    """``x [E, T, B, d] → [E, T', B, d]`` through the weights of ``attn``
    (:class:`~rulelab.models.components.Attention`). With ``cls_only``, only the query at
    position 0 is kept, so ``T' = 1``."""
    E, T, B, d = x.shape
    H, dh = attn.n_heads, attn.d_head
    n = H * dh
    Wt = torch.cat([attn.W_Q, attn.W_K, attn.W_V], dim=1).transpose(2, 3).reshape(E, 3 * n, d)
    b = torch.cat([attn.b_Q, attn.b_K, attn.b_V], dim=1).reshape(E, 3 * n, 1)
    xt = x.reshape(E, T * B, d).transpose(1, 2)  # [E, d, T·B]
    q, k, v = torch.baddbmm(b, Wt, xt).view(E, 3, H, dh, T, B).unbind(1)  # [E, H, dh, T, B]
    if cls_only:
        q = q[:, :, :, :1]
    # scores [E, H, Tq, T, B] = Σ_c q_c k_c / √dh; softmax over the keys (axis 3)
    scores = (q.unsqueeze(4) * k.unsqueeze(3)).sum(2) * (1.0 / math.sqrt(dh))
    pattern = scores.softmax(3)
    z = (pattern.unsqueeze(2) * v.unsqueeze(3)).sum(4)  # Σ_j p_j v_j: [E, H, dh, Tq, B]
    Tq = z.shape[3]
    zt = z.reshape(E, n, Tq * B).transpose(1, 2)  # [E, Tq·B, H·dh]
    out = torch.baddbmm(attn.b_O.unsqueeze(1), zt, attn.W_O.reshape(E, n, d))
    return out.view(E, Tq, B, d)


def mlp(m, x: torch.Tensor) -> torch.Tensor:
    """``x [E, *, d] → [E, *, d]`` through the weights of ``m``
    (:class:`~rulelab.models.components.MLP`)."""
    E, d = x.shape[0], x.shape[-1]
    h = m.act(torch.baddbmm(m.b_in.unsqueeze(1), x.reshape(E, -1, d), m.W_in))
    return torch.baddbmm(m.b_out.unsqueeze(1), h, m.W_out).view(x.shape)  # h [E, rows, d_mlp]


def fused_forward(model, x: torch.Tensor) -> torch.Tensor:
    """``x [E, B, n]`` (integers, without CLS) → logits ``[E, B, k]`` of ``model`` (an
    :class:`~rulelab.models.transformer.EnsembleTransformer`), read at CLS."""
    E, B, n = x.shape
    tokens = model.add_cls(x).transpose(1, 2)  # [E, T, B]
    V = model.W_E.shape[1]
    # Gather from W_E flattened to [E·V, d], as engine 1 does: one embedding over all members.
    offset = torch.arange(E, device=x.device).view(E, 1, 1) * V
    resid = F.embedding(tokens + offset, model.W_E.reshape(E * V, -1))  # [E, T, B, d]
    resid = resid + model.W_pos[:, : n + 1].unsqueeze(2)
    for i, block in enumerate(model.blocks):
        last = i == len(model.blocks) - 1  # the last block needs only the CLS position
        attn_out = attention(block.attn, member_layer_norm(resid, block.ln1), last)
        resid = (resid[:, :1] if last else resid) + attn_out
        if block.mlp is not None:
            resid = resid + mlp(block.mlp, member_layer_norm(resid, block.ln2))
    cls = member_layer_norm(resid[:, 0], model.ln_final)  # [E, B, d]
    return torch.baddbmm(model.b_U.unsqueeze(1), cls, model.W_U)  # [E, B, k]
