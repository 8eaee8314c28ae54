"""Attention over a few positions without tiny matmuls: the training layout of engines 7, 8 and
9 (issue 25).

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
example, in a fixed order, never across examples or members (``B`` is a multiple of 16: the
caller pads the batch), so a member equals its solo run — in engine 9 (``in_order``), which adds
each softmax's keys as a chain in key order (:func:`key_sum`). Engines 7 and 8 keep PyTorch's
``sum(0)`` there, whose order depends on an element's place in the tensor: at one head with a
batch of an odd number of 16-example blocks, a member's last block could differ from its solo
run.

Engine 9 runs the core fused where it can (:func:`fused`): one native pass forward and one
backward per block of 16 examples, the scores and their gradients never leaving the block — the
same chains and ops in the same order, so the same bits; each process checks that once before
it trusts it.
"""

from __future__ import annotations

import ctypes
import functools
import warnings

import torch

from rulelab.models.attention_sums import (
    Biases,
    attend,
    attend_backward,
    fusable,
    pairs,
    scores,
    weighted_sum,
)

PAD = 16  # the batch axis is padded to a multiple of this (two AVX2 / one AVX-512 vector)


def key_sum(x: torch.Tensor, in_order: bool) -> torch.Tensor:
    """``x [T, ...]`` summed over the keys: with ``in_order`` (engine 9) the chain
    ``x₀ + x₁ + …`` for every element; else (engines 7, 8) PyTorch's ``sum(0)``, which adds
    the keys in order only for the elements in whole blocks of 32 (counting over all the rest of
    the tensor: members, heads, queries, examples), the others in another order (``row_sum``'s
    four partial sums), and past 16 keys none in order — so at one head with a batch of an odd
    number of 16-example blocks a member's last block summed its softmax otherwise than its
    solo run did."""
    if not in_order:
        return x.sum(0)
    total = x[0].clone()
    for j in range(1, x.shape[0]):
        total.add_(x[j])
    return total


def scores_softmax(q: torch.Tensor, k: torch.Tensor, scale: float, in_order: bool
                   ) -> torch.Tensor:
    """``q [E, H, dh, Tq, B]``, ``k [E, H, dh, T, B]`` → pattern ``p [T, E, H, Tq, B]``
    (softmax over the keys, the outermost axis) of ``scale · q·k``; ``in_order``:
    :func:`key_sum`."""
    s = scores(q, k, q.new_empty(k.shape[3], *q.shape[:2], *q.shape[3:]))
    s.sub_(s.amax(0)).mul_(scale).exp_()
    return s.div_(key_sum(s, in_order))


def mix_values(p: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``p [T, E, H, Tq, B]``, ``v [E, H, dh, T, B]`` → ``z = Σ_j p_j v_j [E, H, dh, Tq, B]``."""
    return weighted_sum(p, v, v.new_empty(*v.shape[:3], p.shape[3], v.shape[4]))


def core_backward(dz, q, k, v, p, scale, dq, dk, dv, in_order: bool) -> None:
    """Gradients of :func:`scores_softmax` + :func:`mix_values`, written into ``dq`` (shaped as
    q), ``dk`` and ``dv`` (shaped as k)."""
    dp = scores(dz, v, torch.empty_like(p))  # dp_j = Σ_c dz_c v_{c,j}: [T, E, H, Tq, B]
    pairs(p, dz, dv)  # dv_j = Σ_i p_{j,i} dz_i
    # softmax backward, keys outermost
    ds = dp.sub_(key_sum(p * dp, in_order)).mul_(p).mul_(scale)
    weighted_sum(ds, k, dq)  # dq = Σ_j ds_j k_j
    pairs(ds, q, dk)  # dk_j = Σ_i ds_{j,i} q_i


def unfused(q, k, v, scale: float, in_order: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``z, p`` op by op (with ``in_order``: as :func:`rulelab.models.attention_sums.attend`
    gives them)."""
    p = scores_softmax(q, k, scale, in_order)
    return mix_values(p, v), p


def with_bias(q, k, v, bias: Biases | None) -> tuple[torch.Tensor, ...]:
    """``q, k, v [E, H, dh, *, B]`` each plus its projection's bias ``[E, H·dh]`` (PyTorch's
    add, as the projection's ``add_`` was); themselves where ``bias`` is None."""
    if bias is None:
        return q, k, v
    return tuple(x + b.view(*x.shape[:3], 1, 1) for x, b in zip((q, k, v), bias, strict=True))


def core_library(in_order: bool, *tensors: torch.Tensor) -> ctypes.CDLL | None:
    """Engine 9's (``in_order``) fused core where it runs on these tensors (:func:`fused`)."""
    return fused(*tensors) if in_order else None


def forward_core(lib: ctypes.CDLL | None, q, k, v, scale: float, in_order: bool,
                 bias: Biases | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``z [E, H, dh, Tq, B]`` and the pattern ``p [T, E, H, Tq, B]`` of q, k, v (each with
    its bias added first, where ``bias`` gives them): by ``lib``, engine 9's fused core
    (:func:`core_library`; the biases added as it packs q, k, v), or op by op — the same
    numbers."""
    if lib is None:
        return unfused(*with_bias(q, k, v, bias), scale, in_order)
    return attend(lib, q, k, v, scale, bias)


def backward_core(dz, q, k, v, p, scale, dq, dk, dv, in_order: bool,
                  bias: Biases | None = None) -> None:
    """:func:`core_backward` (of :func:`forward_core`'s q, k, v and bias), engine 9's
    (``in_order``) fused where it can run."""
    lib = core_library(in_order, dz, q, k, v, p)
    if lib is None:
        core_backward(dz, *with_bias(q, k, v, bias), p, scale, dq, dk, dv, in_order)
    else:
        attend_backward(lib, dz, q, k, v, p, scale, dq, dk, dv, bias)


def bias_grad(d: torch.Tensor, n: int) -> torch.Tensor:
    """The gradient of a projection's bias ``[E, n]`` from the gradient ``d`` of its output
    ``[E, n, …]``: the sum over the columns as autograd's broadcast ``add_`` formed it
    (``at::sum_to``: a keepdim sum over the flattened columns)."""
    return d.reshape(d.shape[0], n, -1).sum(2, keepdim=True).view(d.shape[0], n)


def fused(*tensors: torch.Tensor) -> ctypes.CDLL | None:
    """The native library where it runs the fused core on these tensors (:func:`fusable`) and
    reproduces the unfused core on this CPU (:func:`reproduces`), else None."""
    lib = fusable(*tensors)
    return lib if lib is not None and reproduces(lib) else None


@functools.cache
def reproduces(lib) -> bool:
    """Whether ``lib``'s fused core gives the unfused core's bits on this CPU, forward and
    backward, on a probe of both shapes the model runs (all queries; one) with scores large
    enough for ``exp`` to span its range — checked once per process (a few milliseconds), so a
    CPU or PyTorch build whose ``exp`` is not the one found runs the unfused path, saying so
    once."""
    gen = torch.Generator().manual_seed(0)
    qkv = torch.randn(2, 3, 2, 5, 7, 32, generator=gen) * 4  # [E, 3, H, dh, T, B]
    q, k, v = qkv.unbind(1)
    bias = tuple(torch.randn(3, 2, 10, generator=gen).unbind(0))  # [E, H·dh] each
    probes = [(q, k, v, None), (q[:, :, :, :1], k, v, None), (q, k, v, bias)]
    for pq, pk, pv, pb in probes:
        dz = torch.randn(*pq.shape, generator=gen)
        want = unfused(*with_bias(pq, pk, pv, pb), 0.4, True)
        got = attend(lib, pq, pk, pv, 0.4, pb)
        grads = [[torch.empty(t.shape) for t in (pq, pk, pv)] for _ in range(2)]
        core_backward(dz, *with_bias(pq, pk, pv, pb), want[1], 0.4, *grads[0], True)
        attend_backward(lib, dz, pq, pk, pv, want[1], 0.4, *grads[1], pb)
        pairs_ = zip([*want, *grads[0]], [*got, *grads[1]], strict=True)
        if not all(torch.equal(a, b) for a, b in pairs_):
            warnings.warn("the fused attention kernel is not used: its numbers differ from the "
                          "unfused kernels' on this CPU (PyTorch's exp is not the one found); "
                          "attention runs unfused, the same numbers", RuntimeWarning, stacklevel=2)
            return False
    return True


class PackedAttention(torch.autograd.Function):
    """``qkv [E, 3, H, dh, T, B]`` (all queries) → ``z [E, H, dh, T, B]``; ``in_order``: the
    softmax's sums as engine 9 adds them (:func:`key_sum`); ``bias [E, 3·H·dh]`` (optional):
    the QKV projection's bias, added to ``qkv`` first — by the fused core as it packs q, k, v,
    rather than in a pass over ``qkv`` of its own (op by op: by PyTorch before the core, as
    the projection did)."""

    @staticmethod
    def forward(ctx, qkv: torch.Tensor, scale: float, in_order: bool = False,
                bias: torch.Tensor | None = None) -> torch.Tensor:
        ctx.has_bias = bias is not None
        lib = core_library(in_order, *qkv.unbind(1))
        if bias is not None and lib is None:
            qkv, bias = qkv + bias.view(*qkv.shape[:4], 1, 1), None  # op by op: added first
        n = qkv.shape[2] * qkv.shape[3]
        biases = None if bias is None else (bias[:, :n], bias[:, n:2 * n], bias[:, 2 * n:])
        z, p = forward_core(lib, *qkv.unbind(1), scale, in_order, biases)
        ctx.save_for_backward(qkv, p, bias)
        ctx.scale, ctx.in_order = scale, in_order
        return z

    @staticmethod
    def backward(ctx, dz: torch.Tensor):
        qkv, p, bias = ctx.saved_tensors
        n = qkv.shape[2] * qkv.shape[3]
        biases = None if bias is None else (bias[:, :n], bias[:, n:2 * n], bias[:, 2 * n:])
        d = torch.empty_like(qkv)
        backward_core(dz.contiguous(), *qkv.unbind(1), p, ctx.scale, *d.unbind(1), ctx.in_order,
                      biases)
        return d, None, None, bias_grad(d, 3 * n) if ctx.has_bias else None


class QueryAttention(torch.autograd.Function):
    """``q [E, H, dh, 1, B]`` (one query), ``kv [E, 2, H, dh, T, B]`` → ``z [E, H, dh, 1, B]``;
    ``in_order`` as :class:`PackedAttention`'s; ``q_bias [E, H·dh]``, ``kv_bias [E, 2·H·dh]``
    (optional, together): the projections' biases, added first as :class:`PackedAttention`
    adds its own."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, kv: torch.Tensor, scale: float, in_order: bool = False,
                q_bias: torch.Tensor | None = None, kv_bias: torch.Tensor | None = None
                ) -> torch.Tensor:
        ctx.has_bias = q_bias is not None
        lib = core_library(in_order, q, *kv.unbind(1))
        if q_bias is not None and lib is None:
            q = q + q_bias.view(*q.shape[:3], 1, 1)  # op by op: added first
            kv, q_bias, kv_bias = kv + kv_bias.view(*kv.shape[:4], 1, 1), None, None
        n = q.shape[1] * q.shape[2]
        biases = None if q_bias is None else (q_bias, kv_bias[:, :n], kv_bias[:, n:])
        z, p = forward_core(lib, q, *kv.unbind(1), scale, in_order, biases)
        ctx.save_for_backward(q, kv, p, q_bias, kv_bias)
        ctx.scale, ctx.in_order = scale, in_order
        return z

    @staticmethod
    def backward(ctx, dz: torch.Tensor):
        q, kv, p, q_bias, kv_bias = ctx.saved_tensors
        n = q.shape[1] * q.shape[2]
        biases = None if q_bias is None else (q_bias, kv_bias[:, :n], kv_bias[:, n:])
        dq, dkv = torch.empty_like(q), torch.empty_like(kv)
        backward_core(dz.contiguous(), q, *kv.unbind(1), p, ctx.scale, dq, *dkv.unbind(1),
                      ctx.in_order, biases)
        if not ctx.has_bias:
            return dq, dkv, None, None, None, None
        return dq, dkv, None, None, bias_grad(dq, n), bias_grad(dkv, 2 * n)
