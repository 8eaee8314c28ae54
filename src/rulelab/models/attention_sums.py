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

The same library fuses the whole core — scores, softmax and values, and its backward — per
block of 16 examples (:func:`attend`, :func:`attend_backward`): the same chains and ops in the
same order, the softmax's ``exp`` by the routine PyTorch's ``exp_`` itself runs (MKL's
``vmsExp``, found in ``libtorch_cpu``: :func:`torch_exp`), so the same numbers;
:func:`rulelab.models.attention_core.fused` checks that on this CPU before using it.

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
    strided = [p, i, i, i, i]  # a tensor and its (e, h, c, position) strides
    shape = [i] * 6  # E, H, dh, Tq, T, B
    f = ctypes.c_float
    biases = [p, i] * 3  # q's, k's and v's bias and member stride (null: none)
    # q k v z, p, shape, scale, exp and its mode, biases
    lib.rl_attend.argtypes = [*strided * 4, p, *shape, f, p, ctypes.c_longlong, *biases]
    lib.rl_attend_backward.argtypes = [*strided * 4, p, *strided * 3, *shape, f, *biases]
    for name in ("rl_scores", "rl_weighted_sum", "rl_pairs", "rl_attend", "rl_attend_backward"):
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


# PyTorch's exp_ on float32 (ATen's vml.h, where built with MKL, as its x86 wheels are): MKL's
# vmsExp at high accuracy, denormals kept, errors ignored (VML_HA | VML_FTZDAZ_OFF |
# VML_ERRMODE_IGNORE); the same bits as torch.exp for any length (tests/engine/models)
VML_EXP, VML_MODE = "vmsExp", 0x2 | 0x140000 | 0x100


@functools.cache
def torch_exp() -> int | None:
    """The address of the ``exp`` PyTorch's ``exp_`` runs here (:data:`VML_EXP` in
    ``libtorch_cpu``), or None where this build of PyTorch has none."""
    try:
        lib = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
        return ctypes.cast(getattr(lib, VML_EXP), ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None


def fusable(*tensors: torch.Tensor) -> ctypes.CDLL | None:
    """The library where it can run the fused core on these tensors: built, PyTorch's exp
    found, the tensors as :func:`scores` needs them."""
    lib = _native(*tensors)
    return lib if lib is not None and torch_exp() is not None else None


def _strided(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), *t.stride()[:4])


Biases = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # q's, k's, v's: [E, H·dh] each


def _biases(bias: Biases | None) -> tuple:
    """The kernels' bias arguments: each bias's address and member stride (its H·dh floats
    contiguous), or none."""
    if bias is None:
        return (None, 0) * 3
    if any(b.stride(-1) != 1 or b.dtype != torch.float32 for b in bias):
        raise ValueError("attention biases: float32 with each member's H·dh floats contiguous")
    return tuple(x for b in bias for x in (b.data_ptr(), b.stride(0)))


def attend(lib: ctypes.CDLL, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
           bias: Biases | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The fused core: ``q [E, H, dh, Tq, B]``, ``k, v [E, H, dh, T, B]`` (each with its
    projection's bias added first, where ``bias`` gives them) → ``z [E, H, dh, Tq, B]`` and
    the pattern ``p [T, E, H, Tq, B]`` (for :func:`attend_backward`)."""
    E, H, dh, Tq, B = q.shape
    T = k.shape[3]
    z = q.new_empty(E, H, dh, Tq, B)
    p = q.new_empty(T, E, H, Tq, B)
    lib.rl_attend(*_strided(q), *_strided(k), *_strided(v), *_strided(z), p.data_ptr(),
                  E, H, dh, Tq, T, B, scale, torch_exp(), VML_MODE, *_biases(bias))
    return z, p


def attend_backward(lib: ctypes.CDLL, dz, q, k, v, p, scale, dq, dk, dv,
                    bias: Biases | None = None) -> None:
    """Gradients of :func:`attend` (q, k, v and ``bias`` as given to it) written into ``dq``
    (shaped as q), ``dk`` and ``dv``: the gradients of the biased q, k, v."""
    E, H, dh, Tq, B = q.shape
    lib.rl_attend_backward(*_strided(q), *_strided(k), *_strided(v), *_strided(dz),
                           p.data_ptr(), *_strided(dq), *_strided(dk), *_strided(dv),
                           E, H, dh, Tq, k.shape[3], B, scale, *_biases(bias))
