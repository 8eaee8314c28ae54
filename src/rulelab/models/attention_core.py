"""Attention over a few positions without tiny matmuls: the training layout of engine 2 (issue 25).

Study S attends over T = 11 positions with heads of 12–32: per example and head, ``q kᵀ`` is an
11 × d_head × 11 product, and a batched matmul over E·B·H of them runs at well under 1 GFLOP/s
on a CPU (each is a library call of its own), while the layout copies around it (q, k, v to
``[E·B, H, T, d_head]`` and back, the stacked gradient of q, k and v) cost as much again.

Here the batch axis ``B`` is innermost and contiguous: ``q, k, v [E, H, d_head, T, B]``, exactly
the rows of one QKV matmul computed transposed (``Wᵀ xᵀ``), and the softmax runs with the keys
outermost, ``[T_k, E, H, T_q, B]``. Every step is then a loop over the ≤ 11 key positions of
elementwise products and sums vectorized over ``B`` (``s_j = Σ_c q_c k_{j,c}``,
``z = Σ_j p_j v_j``), forward and backward by hand, with no layout copy anywhere and the
gradient of q, k and v written straight into one buffer.

Bitwise: every op is elementwise or sums over ``d_head``, the keys or the queries of one
example, in a fixed order, never across examples or members; ``B`` is a multiple of 16 (the
caller pads the batch), so no element of any member falls in a kernel's scalar tail (where
``exp`` rounds differently from its vector form). A member therefore equals its solo run.
"""

from __future__ import annotations

import torch

PAD = 16  # the batch axis is padded to a multiple of this (two AVX2 / one AVX-512 vector)


def scores_softmax(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """``q [E, H, dh, Tq, B]``, ``k [E, H, dh, T, B]`` → pattern ``p [T, E, H, Tq, B]``
    (softmax over the keys, the outermost axis) of ``scale · q·k``."""
    T, dh = k.shape[3], k.shape[2]
    s = q.new_empty(T, *q.shape[:2], *q.shape[3:])
    for j in range(T):  # s_j = Σ_c q_c k_{c,j}
        if q.shape[3] == 1:  # one query: one product [E, H, dh, 1, B] summed over c
            torch.sum(q * k[:, :, :, j : j + 1], dim=2, out=s[j])
            continue
        sj = s[j]  # all queries: dh products [E, H, Tq, B] accumulated in a cached s_j
        torch.mul(q[:, :, 0], k[:, :, 0, j : j + 1], out=sj)
        for c in range(1, dh):
            sj.addcmul_(q[:, :, c], k[:, :, c, j : j + 1])
    s.sub_(s.amax(0)).mul_(scale).exp_()
    return s.div_(s.sum(0))


def mix_values(p: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``p [T, E, H, Tq, B]``, ``v [E, H, dh, T, B]`` → ``z = Σ_j p_j v_j [E, H, dh, Tq, B]``."""
    z = v.new_empty(*v.shape[:3], p.shape[3], v.shape[4])
    _weighted_sum(p, v, z)
    return z


def _weighted_sum(w: torch.Tensor, a: torch.Tensor, out: torch.Tensor) -> None:
    """``out [E, H, dh, Tq, B] = Σ_j w_j a_j`` for ``w [T, E, H, Tq, B]``, ``a [E, H, dh, T, B]``,
    summed in key order: per c for many queries (outputs that stay in cache), per key for one."""
    T, dh = w.shape[0], a.shape[2]
    if w.shape[3] == 1:
        torch.mul(w[0].unsqueeze(2), a[:, :, :, 0:1], out=out)
        for j in range(1, T):
            out.addcmul_(w[j].unsqueeze(2), a[:, :, :, j : j + 1])
        return
    for c in range(dh):
        oc = out[:, :, c]
        torch.mul(w[0], a[:, :, c, 0:1], out=oc)
        for j in range(1, T):
            oc.addcmul_(w[j], a[:, :, c, j : j + 1])


def _pairs(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """``out [E, H, dh, B] = Σ_i a[:, :, i] b[:, :, :, i]`` for ``a [E, H, Tq, B]``,
    ``b [E, H, dh, Tq, B]``: a sum over the queries, in query order."""
    torch.mul(a[:, :, 0:1], b[:, :, :, 0], out=out)
    for i in range(1, a.shape[2]):
        out.addcmul_(a[:, :, i : i + 1], b[:, :, :, i])


def core_backward(dz, q, k, v, p, scale, dq, dk, dv) -> None:
    """Gradients of :func:`scores_softmax` + :func:`mix_values`, written into ``dq`` (shaped as
    q), ``dk`` and ``dv`` (shaped as k)."""
    T, dh, Tq = p.shape[0], q.shape[2], p.shape[3]
    dp = torch.empty_like(p)  # [T, E, H, Tq, B]
    for j in range(T):
        dpj = dp[j]
        if Tq == 1:
            torch.sum(dz * v[:, :, :, j : j + 1], dim=2, out=dpj)
        else:
            torch.mul(dz[:, :, 0], v[:, :, 0, j : j + 1], out=dpj)
            for c in range(1, dh):
                dpj.addcmul_(dz[:, :, c], v[:, :, c, j : j + 1])
        _pairs(p[j], dz, dv[:, :, :, j])
    ds = dp.sub_((p * dp).sum(0)).mul_(p).mul_(scale)  # softmax backward, keys outermost
    _weighted_sum(ds, k, dq)
    for j in range(T):
        _pairs(ds[j], q, dk[:, :, :, j])


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
