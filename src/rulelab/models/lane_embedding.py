"""The token and position embeddings of engines 8 and 9, written straight into the residual
stream's lane layout ``[E, d, T, B]`` (issue 25).

PyTorch's path (:func:`rulelab.models.lane_forward.embed_tokens`) gathers ``[E, T, B, d]``, adds
the positions, and copies the sum across to ``[E, d, T, B]``; its backward copies the gradient
back across and runs ``embedding_dense_backward``, which adds each token's gradient row into
the table one small PyTorch add at a time (22,528 of them per micro-batch of 4 × 512 examples:
measured 1.2 ms per step at the ladder's 2k shape, 3% of it). Here one native pass each way
(``embedding_kernels.cpp``): the forward adds ``W_E[token] + W_pos[t]`` as PyTorch does and
writes it transposed in tiles of 16 examples; the backward adds every gradient row into its
token's row in the order ``embedding_dense_backward`` does (index order, into zeros), and sums
the positions' gradient with PyTorch's own ``sum`` over the same contiguous rows — so the same
numbers as the PyTorch path, bit for bit (tests/engine/models/test_lane_embedding.py), which
runs where the library cannot build.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from rulelab.models import native_build

SOURCE = Path(__file__).with_name("embedding_kernels.cpp")
TILE = 16  # examples per tile (embedding_kernels.cpp: W); the caller pads B to a multiple
D_MAX = 256  # features the native kernels take (embedding_kernels.cpp: DMAX)


@functools.cache
def _build() -> ctypes.CDLL | str:
    """The loaded native library, or why there is none (one line)."""
    return native_build.load(SOURCE, _declare)


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, i = ctypes.c_void_p, ctypes.c_int64
    lib.rl_embed_forward.argtypes = [p, p, p, p, i, i, i, i, i, i]
    lib.rl_embed_forward.restype = ctypes.c_int64
    lib.rl_embed_backward.argtypes = [p, p, i, i, p, i, i, i, i, i]
    lib.rl_embed_backward.restype = None
    return lib


def unavailable() -> str | None:
    """Why the native kernels are not used here, or None when they are."""
    return native_build.why_not(_build())


def native(tokens: torch.Tensor, W_E: torch.Tensor, W_pos: torch.Tensor) -> ctypes.CDLL | None:
    """The library where it can embed these: fp32 tables on the CPU with at most
    :data:`D_MAX` features, ``tokens [E, T, B]`` int64 with ``B`` a multiple of :data:`TILE`."""
    if (not native_build.fp32_cpu_rows(W_E, W_pos) or W_E.shape[-1] > D_MAX
            or tokens.dtype != torch.int64 or tokens.shape[-1] % TILE):
        return None
    return native_build.usable(_build(), "embedding")


class LaneEmbedding(torch.autograd.Function):
    """``tokens [E, T, B]`` (int64, member ``e``'s ids index ``W_E[e]``), ``W_E [E, V, d]``,
    ``W_pos [E, P, d]`` (``P ≥ T``) → ``W_E[e, token] + W_pos[e, t]`` as ``[E, d, T, B]``,
    through ``lib`` (:func:`native`)."""

    @staticmethod
    def forward(ctx, tokens: torch.Tensor, W_E: torch.Tensor, W_pos: torch.Tensor,
                lib: ctypes.CDLL) -> torch.Tensor:
        tokens, W_E, W_pos = tokens.contiguous(), W_E.contiguous(), W_pos.contiguous()
        E, T, B = tokens.shape
        V, d = W_E.shape[1:]
        out = W_E.new_empty(E, d, T, B)
        if lib.rl_embed_forward(tokens.data_ptr(), W_E.data_ptr(), W_pos.data_ptr(),
                                out.data_ptr(), E, V, W_pos.shape[1], d, T, B):
            raise IndexError(f"embedding: a token id out of [0, {V}) (the table's rows)")
        ctx.save_for_backward(tokens)
        ctx.lib, ctx.V, ctx.P = lib, V, W_pos.shape[1]
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        (tokens,) = ctx.saved_tensors
        E, d, T, B = g.shape
        if g.stride(3) != 1 or g.stride(2) != B:
            g = g.contiguous()
        dW_E = g.new_empty(E, ctx.V, d)
        ctx.lib.rl_embed_backward(tokens.data_ptr(), g.data_ptr(), g.stride(0), g.stride(1),
                                  dW_E.data_ptr(), E, ctx.V, d, T, B)
        dW_pos = g.new_zeros(E, ctx.P, d)
        dW_pos[:, :T] = g.sum(3).transpose(1, 2)  # over the examples, as autograd's broadcast
        return None, dW_E, dW_pos, None
