"""Attention over a few positions without tiny matmuls: the training layout of engines 7 and 8
(issue 25).

Study S attends over T = 11 positions with heads of 12–32: per example and head, ``q kᵀ`` is an
11 × d_head × 11 product, and a batched matmul over E·B·H of them runs at well under 1 GFLOP/s
on a CPU (each is a library call of its own), while the layout copies around it (q, k, v to
``[E·B, H, T, d_head]`` and back, the stacked gradient of q, k and v) cost as much again.

Here the batch axis ``B`` is innermost and contiguous: ``q, k, v [E, H, d_head, T, B]``, exactly
the rows of one QKV matmul computed transposed (``Wᵀ xᵀ``), and the softmax runs with the keys
outermost, ``[T_k, E, H, T_q, B]``. Attention is then three sums of products vectorized over
``B`` (``s_j = Σ_c q_c k_{j,c}``, ``z = Σ_j p_j v_j`` and, in the backward, sums over the
queries: :mod:`rulelab.models.attention_sums`, native loops or their PyTorch chains), forward
and backward by hand, with no layout copy and the gradient of q, k and v written straight into
one buffer.

Bitwise: every op is elementwise or sums over ``d_head``, the keys or the queries of one
example, in a fixed order, never across examples or members; ``B`` is a multiple of 16 (the
caller pads the batch), so no element of any member falls in a kernel's scalar tail (where
``exp`` rounds differently from its vector form). A member therefore equals its solo run.
"""

from __future__ import annotations

import torch

from rulelab.models.attention_sums import pairs, scores, weighted_sum

PAD = 16  # the batch axis is padded to a multiple of this (two AVX2 / one AVX-512 vector)


def scores_softmax(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """``q [E, H, dh, Tq, B]``, ``k [E, H, dh, T, B]`` → pattern ``p [T, E, H, Tq, B]``
    (softmax over the keys, the outermost axis) of ``scale · q·k``."""
    s = scores(q, k, q.new_empty(k.shape[3], *q.shape[:2], *q.shape[3:]))
    s.sub_(s.amax(0)).mul_(scale).exp_()
    return s.div_(s.sum(0))


def mix_values(p: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``p [T, E, H, Tq, B]``, ``v [E, H, dh, T, B]`` → ``z = Σ_j p_j v_j [E, H, dh, Tq, B]``."""
    return weighted_sum(p, v, v.new_empty(*v.shape[:3], p.shape[3], v.shape[4]))


def core_backward(dz, q, k, v, p, scale, dq, dk, dv) -> None:
    """Gradients of :func:`scores_softmax` + :func:`mix_values`, written into ``dq`` (shaped as
    q), ``dk`` and ``dv`` (shaped as k)."""
    dp = scores(dz, v, torch.empty_like(p))  # dp_j = Σ_c dz_c v_{c,j}: [T, E, H, Tq, B]
    pairs(p, dz, dv)  # dv_j = Σ_i p_{j,i} dz_i
    ds = dp.sub_((p * dp).sum(0)).mul_(p).mul_(scale)  # softmax backward, keys outermost
    weighted_sum(ds, k, dq)  # dq = Σ_j ds_j k_j
    pairs(ds, q, dk)  # dk_j = Σ_i ds_{j,i} q_i


class PackedAttention(torch.autograd.Function):
    """``qkv [E, 3, H, dh, T, B]`` (all queries) → ``z [E, H, dh, T, B]``."""

    @staticmethod
    def forward(ctx, qkv: torch.Tensor, scale: float) -> torch.Tensor:
        q, k, v = qkv.unbind(1)
        p = scores_softmax(q, k, scale)
        ctx.save_for_backward(qkv, p)
        ctx.scale = scale
        return mix_values(p, v)

    @staticmethod
    def backward(ctx, dz: torch.Tensor):
        qkv, p = ctx.saved_tensors
        d = torch.empty_like(qkv)
        core_backward(dz.contiguous(), *qkv.unbind(1), p, ctx.scale, *d.unbind(1))
        return d, None


class QueryAttention(torch.autograd.Function):
    """``q [E, H, dh, 1, B]`` (one query), ``kv [E, 2, H, dh, T, B]`` → ``z [E, H, dh, 1, B]``."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, kv: torch.Tensor, scale: float) -> torch.Tensor:
        k, v = kv.unbind(1)
        p = scores_softmax(q, k, scale)
        ctx.save_for_backward(q, kv, p)
        ctx.scale = scale
        return mix_values(p, v)

    @staticmethod
    def backward(ctx, dz: torch.Tensor):
        q, kv, p = ctx.saved_tensors
        dq, dkv = torch.empty_like(q), torch.empty_like(kv)
        core_backward(dz.contiguous(), q, *kv.unbind(1), p, ctx.scale, dq, *dkv.unbind(1))
        return dq, dkv, None
