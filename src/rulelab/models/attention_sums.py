"""The three sums attention over a few positions is made of, in the batch-innermost layout of
:mod:`rulelab.models.attention_core` (engines 7, 8, issue 25): native loops where a C++ compiler
is found, else the same chains in PyTorch — the same numbers either way.

- :func:`scores`: ``s[j, e, h, i, b] = Σ_c q[e, h, c, i, b] · k[e, h, c, j, b]`` (the scores
  ``q·k``; in the backward ``dp = dz·v``);
- :func:`weighted_sum`: ``out[e, h, c, i, b] = Σ_j w[j, e, h, i, b] · a[e, h, c, j, b]``
  (``z = Σ_j p_j v_j``; ``dq = Σ_j ds_j k_j``);
- :func:`pairs`: ``out[e, h, c, j, b] = Σ_i w[j, e, h, i, b] · x[e, h, c, i, b]``
  (``dv``, ``dk``: a sum over the queries).

Each is a chain ``x₀y₀ + x₁y₁ + …`` summed in index order for every element. PyTorch runs it
as one ``mul`` and then ``addcmul_`` per term, each rounded once per product and once per sum;
the native kernels (``attention_kernels.cpp``) run the same chain per element, register-tiled,
so they round exactly as PyTorch does (tests/engine/models/test_attention_sums.py). Measured
on one thread of an AMD EPYC (AVX2), 4 members × 512 examples, 11 positions: 3–6× faster than
the op-by-op chain, whose every term is a pass over memory (the scores 0.63 vs 2.9 ms at
d_head 12, 3.3 vs 9.9 ms at d_head 32; one query: 0.38 vs 5.1 ms).

The native library is built once per source, compiler and CPU (:mod:`rulelab.models.native_build`:
``$RULELAB_KERNEL_CACHE``; ``RULELAB_NATIVE=0`` keeps the PyTorch path).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from rulelab.models import native_build

SOURCE = Path(__file__).with_name("attention_kernels.cpp")
BLOCK = 16  # examples per native block (attention_kernels.cpp: W); B must be a multiple


@functools.cache
def _build() -> ctypes.CDLL | str:
    """The loaded native library, or why there is none (one line)."""
    return native_build.load(SOURCE, _declare)


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, i = ctypes.c_void_p, ctypes.c_int64
    lib.rl_scores.argtypes = [p, i, i, i, i, p, i, i, i, i, p, i, i, i, i, i, i]
    for name in ("rl_weighted_sum", "rl_pairs"):
        getattr(lib, name).argtypes = [p, p, i, i, i, i, p, i, i, i, i, i, i, i, i, i, i]
    for name in ("rl_scores", "rl_weighted_sum", "rl_pairs"):
        getattr(lib, name).restype = None
    return lib


def unavailable() -> str | None:
    """Why the native kernels are not used here, or None when they are."""
    return native_build.why_not(_build())


def _native(*tensors: torch.Tensor) -> ctypes.CDLL | None:
    """The library, where it can take these tensors (fp32 on the CPU, a batch of whole blocks,
    within its bounds, innermost axis contiguous)."""
    if not native_build.fp32_cpu_rows(*tensors) or tensors[0].shape[-1] % BLOCK:
        return None
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return None
    return native_build.usable(_build(), "attention")


def scores(q: torch.Tensor, k: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out [T, E, H, Tq, B] = Σ_c q[:, :, c] · k[:, :, c, j]`` for ``q [E, H, dh, Tq, B]``,
    ``k [E, H, dh, T, B]`` (views, innermost axis contiguous)."""
    E, H, dh, Tq, B = q.shape
    T = k.shape[3]
    lib = _native(q, k, out) if out.is_contiguous() else None
    if lib is None:
        for j in range(T):
            sj = out[j]
            torch.mul(q[:, :, 0], k[:, :, 0, j : j + 1], out=sj)
            for c in range(1, dh):
                sj.addcmul_(q[:, :, c], k[:, :, c, j : j + 1])
        return out
    lib.rl_scores(q.data_ptr(), *q.stride()[:4], k.data_ptr(), *k.stride()[:4], out.data_ptr(),
                  E, H, dh, Tq, T, B)
    return out


def weighted_sum(w: torch.Tensor, a: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out [E, H, dh, Tq, B] = Σ_j w[j] · a[:, :, :, j]`` for ``w [T, E, H, Tq, B]``
    (contiguous), ``a [E, H, dh, T, B]``."""
    T, E, H, Tq, B = w.shape
    dh = a.shape[2]
    lib = _native(w, a, out) if w.is_contiguous() else None
    if lib is None and Tq == 1:  # one query: whole [E, H, dh, 1, B] terms, in key order
        torch.mul(w[0].unsqueeze(2), a[:, :, :, 0:1], out=out)
        for j in range(1, T):
            out.addcmul_(w[j].unsqueeze(2), a[:, :, :, j : j + 1])
        return out
    if lib is None:
        for c in range(dh):
            oc = out[:, :, c]
            torch.mul(w[0], a[:, :, c, 0:1], out=oc)
            for j in range(1, T):
                oc.addcmul_(w[j], a[:, :, c, j : j + 1])
        return out
    lib.rl_weighted_sum(w.data_ptr(), a.data_ptr(), *a.stride()[:4], out.data_ptr(),
                        *out.stride()[:4], E, H, dh, Tq, T, B)
    return out


def pairs(w: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out [E, H, dh, T, B]``: ``out[:, :, :, j] = Σ_i w[j, :, :, i] · x[:, :, :, i]`` for
    ``w [T, E, H, Tq, B]`` (contiguous), ``x [E, H, dh, Tq, B]``."""
    T, E, H, Tq, B = w.shape
    dh = x.shape[2]
    lib = _native(w, x, out) if w.is_contiguous() else None
    if lib is None:
        for j in range(T):
            oj, wj = out[:, :, :, j], w[j]
            torch.mul(wj[:, :, 0:1], x[:, :, :, 0], out=oj)
            for i in range(1, Tq):
                oj.addcmul_(wj[:, :, i : i + 1], x[:, :, :, i])
        return out
    lib.rl_pairs(w.data_ptr(), x.data_ptr(), *x.stride()[:4], out.data_ptr(), *out.stride()[:4],
                 E, H, dh, Tq, T, B)
    return out
