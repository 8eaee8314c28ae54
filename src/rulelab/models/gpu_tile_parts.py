"""The pieces engine 13's Triton kernel (:mod:`rulelab.models.gpu_tile_kernels`) is built
from, each inlined where the kernel calls it: LayerNorm's forward and backward, blocks of the
scratch and of the gradient row read, written and added to, ``tl.dot`` in the kernel's
precision, the weight gradients read back from the scratch in chunks of 16 rows, where a
block's parameters and a layer's scratch lie, and a tile's CLS rows and token ids.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def ln_fwd(x, w, b, D: tl.constexpr, eps):
    """Rows of ``x [M, D]`` → (``x̂·w + b``, ``x̂``, ``1/σ [M]``)."""
    mu = tl.sum(x, axis=1) / D
    xc = x - mu[:, None]
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=1) / D + eps)
    xhat = xc * rstd[:, None]
    return xhat * w[None, :] + b[None, :], xhat, rstd


@triton.jit
def ln_bwd(dh, xhat, rstd, w, D: tl.constexpr):
    """LayerNorm's backward: ``dx`` of rows ``[M, D]`` given ``dh`` of its output."""
    dxh = dh * w[None, :]
    m1 = tl.sum(dxh, axis=1) / D
    m2 = tl.sum(dxh * xhat, axis=1) / D
    return rstd[:, None] * (dxh - m1[:, None] - xhat * m2[:, None])


@triton.jit
def mat(ptr, R: tl.constexpr, C: tl.constexpr):
    """A ``[R, C]`` row-major block at ``ptr``."""
    return tl.load(ptr + tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :])


@triton.jit
def put(ptr, v, R: tl.constexpr, C: tl.constexpr):
    tl.store(ptr + tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :], v)


@triton.jit
def vec(ptr, C: tl.constexpr):
    return tl.load(ptr + tl.arange(0, C))


@triton.jit
def add_mat(ptr, v, R: tl.constexpr, C: tl.constexpr):
    """``partial += v``: the program's own slot, tile after tile (no other writer)."""
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tl.store(ptr + offs, tl.load(ptr + offs) + v)


@triton.jit
def add_vec(ptr, v, C: tl.constexpr):
    offs = tl.arange(0, C)
    tl.store(ptr + offs, tl.load(ptr + offs) + v)


@triton.jit
def dot(a, b, DOT: tl.constexpr):
    return tl.dot(a, b, input_precision=DOT)


@triton.jit
def dot_tn(a, b, DOT: tl.constexpr):
    """``aᵀ b`` (a weight's gradient: inputs ``[M, K]``ᵀ times output gradients ``[M, N]``)."""
    return tl.dot(tl.trans(a), b, input_precision=DOT)


@triton.jit
def dot_nt(a, b, DOT: tl.constexpr):
    """``a bᵀ`` (an input's gradient: output gradients times the weight transposed)."""
    return tl.dot(a, tl.trans(b), input_precision=DOT)


@triton.jit
def add_rows_gram(g_ptr, a_ptr, b_ptr, ROWS: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                  w_ptr, c_ptr, A_OP: tl.constexpr, DOT: tl.constexpr):
    """``partial [M, N] += aᵀ b`` over ``ROWS`` rows of the row-major ``a [ROWS, M]`` and ``b
    [ROWS, N]`` in the scratch (a weight's gradient), 16 rows at a time chaining one
    accumulator, so the rows are added in order as one product over all of them adds them.
    Over all the tile's rows at once, an fp32 ``tl.dot`` runs on the FMA units with each thread
    holding its operand rows over every row of the tile: most of the fp32 build's spilled
    registers (bench/gpu_tile_compile.py). ``A_OP``: 0 ``a`` as stored, 1 ``a·w + c`` (a
    LayerNorm's x̂ to its output, ``w``, ``c`` ``[M]``), 2 ``max(a, 0)`` (a ReLU's input)."""
    acc = tl.zeros((M, N), tl.float32)
    for ch in range(ROWS // 16):
        a = mat(a_ptr + ch * 16 * M, 16, M)
        if A_OP == 1:
            a = a * vec(w_ptr, M)[None, :] + vec(c_ptr, M)[None, :]
        elif A_OP == 2:
            a = tl.maximum(a, 0.0)
        acc = tl.dot(tl.trans(a), mat(b_ptr + ch * 16 * N, 16, N), acc, input_precision=DOT)
    add_mat(g_ptr, acc, M, N)


@triton.jit
def dot_nt_k(a_ptr, ROWS: tl.constexpr, K: tl.constexpr, b_ptr, N: tl.constexpr,
             DOT: tl.constexpr):
    """``a bᵀ`` for a row-major ``a [ROWS, K]`` in the scratch and a row-major weight ``b [N,
    K]``, 16 of ``K`` at a time chaining one accumulator (the order of one product), so that
    ``a`` need not be held in registers across the loop that calls it."""
    r = tl.arange(0, ROWS)
    c16 = tl.arange(0, 16)
    n = tl.arange(0, N)
    acc = tl.zeros((ROWS, N), tl.float32)
    for kc in range(K // 16):
        a = tl.load(a_ptr + r[:, None] * K + kc * 16 + c16[None, :])
        b = tl.load(b_ptr + n[None, :] * K + kc * 16 + c16[:, None])
        acc = tl.dot(a, b, acc, input_precision=DOT)
    return acc


@triton.jit
def block_params(base, LN: tl.constexpr, D: tl.constexpr, H: tl.constexpr, DH: tl.constexpr):
    """A block's pointers from its first float, in :func:`layout`'s order (its gradient row's
    too): W_Q, W_K, W_V, b_Q, b_K, b_V, W_O, b_O, and the MLP's first float (LN₂ if any)."""
    o = 0
    if LN:  # LN₁'s w and b come first
        o = 2 * D
    wq = base + o
    wk = wq + H * D * DH
    wv = wk + H * D * DH
    bq = wv + H * D * DH
    bk = bq + H * DH
    bv = bk + H * DH
    wo = bv + H * DH
    bo = wo + H * DH * D
    return wq, wk, wv, bq, bk, bv, wo, bo, bo + D


@triton.jit
def layer_scratch(sl, R: tl.constexpr, D: tl.constexpr, H: tl.constexpr, DH: tl.constexpr,
                  BT: tl.constexpr, P: tl.constexpr):
    """A layer's scratch from its first float (x̂ ``[R, D]`` and 1/σ ``[R]`` first): q, k, v, z of
    each head (``[H, R, DH]`` each), the probabilities ``[H, BT, P, P]``, then the MLP's x̂₂, 1/σ₂
    and pre-activations."""
    sq = sl + R * D + R
    sprob = sq + 4 * H * R * DH
    return sq, sprob, sprob + H * BT * P * P


@triton.jit
def at_cls(x, BT: tl.constexpr, P: tl.constexpr, C: tl.constexpr):
    """The CLS rows ``[BT, C]`` of a tile's rows ``x [BT·P, C]`` (a masked sum: exact)."""
    cls = tl.arange(0, P)[None, :, None] == 0
    return tl.sum(tl.where(cls, tl.reshape(x, (BT, P, C)), 0.0), axis=1)


@triton.jit
def on_cls_rows(x, BT: tl.constexpr, P: tl.constexpr, C: tl.constexpr):
    """``x [BT, C]`` placed at a tile's CLS rows, zeros elsewhere: ``[BT·P, C]``."""
    cls = tl.arange(0, P)[None, :, None] == 0
    return tl.reshape(tl.where(cls, x[:, None, :], 0.0), (BT * P, C))


@triton.jit
def tile_tokens(x_ptr, e, B, first, rows, P: tl.constexpr, T: tl.constexpr, V1: tl.constexpr):
    """Member ``e``'s token ids at a tile's ``rows`` (example-major, position-minor, from
    example ``first``; CLS at position 0) and whether each row is a real token."""
    ex = first + rows // P
    pos = rows % P
    real = (ex < B) & (pos < T)
    tok = tl.load(x_ptr + (e.to(tl.int64) * B + ex) * (T - 1) + pos - 1,
                  mask=real & (pos > 0), other=0)
    return tl.where(pos == 0, V1 - 1, tok), real
