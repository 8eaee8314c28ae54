"""The ensemble transformer's forward in plain tensor ops, for ``torch.compile`` (engine 3,
issue 25).

What inductor traces when the compiled engine trains (:mod:`rulelab.engine.compiled`): the same
function as :meth:`EnsembleTransformer.forward <rulelab.models.transformer.EnsembleTransformer>`,
written so the compiler can fuse everything that is not a weight matmul.

- The residual stream is ``[E, d, T, B]``: features first, the batch innermost and
  contiguous. Every matmul is computed transposed (``Wᵀ x``), so each one reads and writes
  this layout, and so do their gradients.
- Q, K and V come from one such matmul, as ``[E, H, d_head, T, B]``.
- Attention over the ≤ 11 positions is written as broadcast products summed over ``d_head``
  (the scores) and over the keys (``z``), not as tiny batched matmuls.
- LayerNorm reduces over ``d``, an outer axis, and applies the per-member affine part.
- Every reduction then runs over an outer axis, with the batch as the vector lane: inductor
  turns attention, softmax, LayerNorm, activations and residual adds into loops vectorized over
  the batch, forward and backward, with no transposed tiles. (With ``d`` innermost, as in
  engine 1, the gradient coming back from each projection had to be transposed inside
  attention's backward kernel: 59 ms of a 322 ms paper-size micro-batch.)
- Only the weight matmuls (QKV, output, MLP in and out, unembedding) stay library calls.

Bitwise: every reduction runs over ``d``, ``d_head``, the keys or the rows of one member, never
across members. The compiled kernels are single-threaded (``cpp.threads = 1``), so no
reduction is split across threads in a way that depends on the ensemble's size. A member
therefore equals its solo run within this engine (a lone run computed beside a copy of itself:
:func:`rulelab.engine.compiled.paired`;
tests/studies/shortcut_saturation/test_mpsp_compiled_engine.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def member_layer_norm(x: torch.Tensor, ln) -> torch.Tensor:
    """``x [E, d, *]`` normalized over ``d`` (axis 1), then scaled and shifted by member
    ``e``'s ``ln.w, ln.b [E, d]`` (``x`` itself when ``ln`` is None: no LayerNorm)."""
    if ln is None:
        return x
    shape = x.shape[:2] + (1,) * (x.dim() - 2)
    var, mean = torch.var_mean(x, dim=1, correction=0, keepdim=True)
    y = (x - mean) * torch.rsqrt(var + ln.eps)
    return torch.addcmul(ln.b.view(shape), y, ln.w.view(shape))


def attention(attn, x: torch.Tensor, cls_only: bool) -> torch.Tensor:
    """``x [E, d, T, B] → [E, d, T', B]`` through the weights of ``attn``
    (:class:`~rulelab.models.components.Attention`). With ``cls_only``, only the query at
    position 0 is kept, so ``T' = 1``."""
    E, d, T, B = x.shape
    H, dh = attn.n_heads, attn.d_head
    n = H * dh
    Wt = torch.cat([attn.W_Q, attn.W_K, attn.W_V], dim=1).transpose(2, 3).reshape(E, 3 * n, d)
    b = torch.cat([attn.b_Q, attn.b_K, attn.b_V], dim=1).reshape(E, 3 * n, 1)
    qkv = torch.baddbmm(b, Wt, x.reshape(E, d, T * B))  # Wᵀ x: [E, 3·H·dh, T·B]
    q, k, v = qkv.view(E, 3, H, dh, T, B).unbind(1)  # [E, H, dh, T, B]
    if cls_only:
        q = q[:, :, :, :1]
    # scores [E, H, Tq, T, B] = Σ_c q_c k_c / √dh; softmax over the keys (axis 3)
    scores = (q.unsqueeze(4) * k.unsqueeze(3)).sum(2) * (1.0 / math.sqrt(dh))
    pattern = scores.softmax(3)
    z = (pattern.unsqueeze(2) * v.unsqueeze(3)).sum(4)  # Σ_j p_j v_j: [E, H, dh, Tq, B]
    Tq = z.shape[3]
    Wo_t = attn.W_O.reshape(E, n, d).transpose(1, 2)  # [E, d, H·dh]
    out = torch.baddbmm(attn.b_O.unsqueeze(2), Wo_t, z.reshape(E, n, Tq * B))  # W_Oᵀ z
    return out.view(E, d, Tq, B)


def mlp(m, x: torch.Tensor) -> torch.Tensor:
    """``x [E, d, *] → [E, d, *]`` through the weights of ``m``
    (:class:`~rulelab.models.components.MLP`), transposed: ``W_outᵀ φ(W_inᵀ x)``."""
    E, d = x.shape[:2]
    h = m.act(torch.baddbmm(m.b_in.unsqueeze(2), m.W_in.transpose(1, 2), x.reshape(E, d, -1)))
    return torch.baddbmm(m.b_out.unsqueeze(2), m.W_out.transpose(1, 2), h).view(x.shape)


def fused_forward(model, x: torch.Tensor) -> torch.Tensor:
    """``x [E, B, n]`` (integers, without CLS) → logits ``[E, B, k]`` of ``model`` (an
    :class:`~rulelab.models.transformer.EnsembleTransformer`), read at CLS."""
    E, B, n = x.shape
    tokens = model.add_cls(x).transpose(1, 2)  # [E, T, B]
    V = model.W_E.shape[1]
    # Gather from W_E flattened to [E·V, d], as engine 1 does: one embedding over all members.
    offset = torch.arange(E, device=x.device).view(E, 1, 1) * V
    embed = F.embedding(tokens + offset, model.W_E.reshape(E * V, -1))  # [E, T, B, d]
    resid = (embed + model.W_pos[:, : n + 1].unsqueeze(2)).permute(0, 3, 1, 2)  # [E, d, T, B]
    for i, block in enumerate(model.blocks):
        last = i == len(model.blocks) - 1  # the last block needs only the CLS position
        attn_out = attention(block.attn, member_layer_norm(resid, block.ln1), last)
        resid = (resid[:, :, :1] if last else resid) + attn_out
        if block.mlp is not None:
            resid = resid + mlp(block.mlp, member_layer_norm(resid, block.ln2))
    cls = member_layer_norm(resid[:, :, 0], model.ln_final)  # [E, d, B]
    logits = torch.baddbmm(model.b_U.unsqueeze(2), model.W_U.transpose(1, 2), cls)  # [E, k, B]
    return logits.transpose(1, 2)  # [E, B, k]
