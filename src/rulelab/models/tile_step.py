"""The transformer's training step depth first, tile by tile (engines 11 and 12, issue 25).

Engines 7–10 run a pass of hundreds of examples op by op: each op reads what the one before
wrote megabytes earlier, from L3 or memory (bench/cold_kernels.py), so their step is bound by
memory traffic. Here one native call (``step_kernels.cpp: rl_step``) runs the forward, the
loss and the backward of a tile of a few dozen examples of one member to the end before the
next tile starts: what each op of a tile reads (:func:`tile_examples`) was written moments
before and is still in L2. Every sum runs in one fixed order (within a tile by feature, across
tiles in order), so a member's numbers depend on its own weights and data and the tile, which
the shape alone fixes: a member equals its solo run. The numbers are the model's to float
rounding (closer to float64's than PyTorch's float32 autograd is: tests/engine/models/
test_tile_step.py), not engine 10's bits: a new engine version.

It computes the model of :class:`~rulelab.models.transformer.EnsembleTransformer` with a ReLU
MLP (or none), LayerNorms (or none), in fp32, or with its weight matmuls in bf16 under bf16
autocast where the kernel was built for AVX-512-BF16 (:func:`computes_bf16`); :func:`unsupported`
says why not where it cannot. Engine 12 also evaluates through the kernel's forward alone
(:func:`tile_logits`).
"""

from __future__ import annotations

import ctypes
import functools
import subprocess
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from rulelab.models import native_build
from rulelab.models.attention_sums import VML_MODE, torch_exp
from rulelab.models.passes import TILE_ENGINE, TILE_STEP_ENGINES

__all__ = ["TILE_ENGINE", "TILE_STEP_ENGINES", "check_range", "computes_bf16", "in_bf16",
           "notice_fallback", "reference_loss", "step_loss", "tile_examples", "tile_logits",
           "unsupported"]

SOURCE = Path(__file__).with_name("step_kernels.cpp")
# A tile: the largest multiple of 16 examples ≤ TILE_MAX whose scratch (activations and
# gradients) fits TILE_BYTES. Measured per member at the ladder's and the paper's widths
# (tiles of 16–96, 4 members × 2,048 examples, AMX Xeon with 2 MiB of L2): 48 is the fastest
# or within 3% of it at every width, tiles whose rows span an even number of cache lines
# (32, 64, 96) run 3–12% slower, and the whole tile need not sit in L2 (only what one op reads).
TILE_BYTES = 4 << 20
TILE_MAX = 48
MAX_POSITIONS, MAX_LAYERS, MAX_HEADS = 64, 16, 16  # what the kernel's fixed arrays hold
I64, F32, F64, PTR = ctypes.c_int64, ctypes.c_float, ctypes.c_double, ctypes.c_void_p


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.rl_step_scratch.argtypes = [I64] * 9
    lib.rl_step_scratch.restype = I64
    lib.rl_step.argtypes = [I64] * 10 + [F32, PTR, PTR, PTR, PTR, I64, F64, PTR, PTR,
                                         ctypes.c_longlong, I64, PTR]
    lib.rl_step.restype = F64
    lib.rl_step_vector_bits.restype = I64
    lib.rl_step_bf16.restype = I64
    return lib


def build_variant(out: Path, flags: tuple[str, ...], source: Path = SOURCE) -> ctypes.CDLL:
    """``source`` compiled with ``flags`` (``native_build.flags(march)`` and any ``-D``) into
    ``out`` and loaded, uncached: another target's build, a timing build, another revision's
    kernel, for the benches and the tests that compare them with :func:`native`'s."""
    done = subprocess.run([native_build.compiler(), *flags, str(source), "-o", str(out)],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"building {source} failed: {done.stderr[-2000:]}")
    return _declare(ctypes.CDLL(str(out)))


@functools.cache
def built() -> ctypes.CDLL | str:
    """The kernel library, or why it did not build (:func:`native_build.load`)."""
    return native_build.load(SOURCE, _declare)


def native() -> ctypes.CDLL | None:
    """The library where it built and PyTorch's exp was found, else None."""
    lib = built()
    return None if isinstance(lib, str) or torch_exp() is None else lib


def unsupported(shape) -> str | None:
    """Why engine 11 cannot train a transformer of ``shape`` (a ``TransformerShape``), or None."""
    if shape.act != "relu" and shape.d_mlp:
        return f"act {shape.act}: engine 11 runs a ReLU MLP only"
    if (shape.seq_len + 1 > MAX_POSITIONS or shape.layers > MAX_LAYERS
            or shape.heads > MAX_HEADS):
        return (f"engine 11 holds at most {MAX_POSITIONS} positions, {MAX_LAYERS} layers and "
                f"{MAX_HEADS} heads")
    why = native_build.why_not(built())
    if why is not None:
        return f"its native kernel did not build: {why}"
    if built().rl_step_vector_bits() == 0:
        return "its kernel needs fused multiply-adds in vectors (AVX2 and FMA, or AVX-512)"
    return None if torch_exp() is not None else "PyTorch's exp (MKL) was not found"


def computes_bf16() -> bool:
    """Whether the kernel built here multiplies bf16 (its AVX-512-BF16 build): the precision
    ``--precision bf16`` trains engine 11 in, with every weight matmul's operands rounded to
    bf16 and their products summed in fp32 (``step_kernels.cpp``)."""
    lib = native()
    return lib is not None and lib.rl_step_bf16() == 1


def in_bf16() -> bool:
    """Whether the step runs under bf16 autocast on the CPU (the trainer's ``--precision
    bf16``): engine 11 then computes its weight matmuls in bf16."""
    return torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16


@functools.cache
def notice_fallback(why: str, engine: int) -> None:
    """Say once per process and reason that runs engine 11 cannot train use ``engine``."""
    warnings.warn(f"engine {TILE_ENGINE} unavailable ({why}): training with engine {engine}",
                  RuntimeWarning, stacklevel=3)


def _dims(shape, tile: int) -> tuple[int, ...]:
    """The kernel's shape arguments: L, H, d_head, d, d_mlp, T, V, k and the tile."""
    return (shape.layers, shape.heads, shape.d_model // shape.heads, shape.d_model, shape.d_mlp,
            shape.seq_len + 1, shape.vocab, shape.label_mod, tile)


@functools.cache
def tile_examples(shape) -> int:
    """Examples per tile for ``shape``: the largest multiple of 16 ≤ :data:`TILE_MAX` whose
    scratch fits :data:`TILE_BYTES` (at least 16). Fixed by the shape alone: member ≡ solo."""
    lib = native()
    if lib is None:
        raise RuntimeError("engine 11's kernel is not built")
    tile = TILE_MAX
    while tile > 16 and 4 * _scratch_floats(lib, shape, tile) > TILE_BYTES:
        tile -= 16
    return tile


def _scratch_floats(lib: ctypes.CDLL, shape, tile: int, bf16: bool = False) -> int:
    """Floats of scratch one call needs; the tile is sized by fp32's (the same in bf16)."""
    L, H, dh, d, f, T, _, k, _ = _dims(shape, tile)
    return lib.rl_step_scratch(L, H, dh, d, f, T, k, tile, int(bf16))


def parameters(model) -> list[torch.Tensor | None]:
    """The model's parameters in the kernel's order (``step_kernels.cpp``), None where absent."""
    out: list[torch.Tensor | None] = [model.W_E, model.W_pos]
    for block in model.blocks:
        a, m, ln1, ln2 = block.attn, block.mlp, block.ln1, block.ln2
        out += [*((ln1.w, ln1.b) if ln1 else (None, None)),
                a.W_Q, a.W_K, a.W_V, a.b_Q, a.b_K, a.b_V, a.W_O, a.b_O,
                *((ln2.w, ln2.b) if ln2 else (None, None)),
                *((m.W_in, m.b_in, m.W_out, m.b_out) if m else (None,) * 4)]
    lnf = model.ln_final
    return out + [*((lnf.w, lnf.b) if lnf else (None, None)), model.W_U, model.b_U]


def _addresses(tensors: list[torch.Tensor | None], e: int):
    """Member ``e``'s slice of each ``[E, …]`` tensor, as a C array of addresses."""
    arr = (PTR * len(tensors))()
    for j, t in enumerate(tensors):
        arr[j] = None if t is None else t.data_ptr() + e * t.stride(0) * t.element_size()
    return arr


def check_range(t: torch.Tensor, n: int, what: str) -> None:
    """IndexError unless every entry of ``t`` lies in ``[0, n)`` (as PyTorch's own ops raise)."""
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= n):
        raise IndexError(f"{what} ids must lie in [0, {n}): got {int(t.min())}…{int(t.max())}")


def _run(model, x: torch.Tensor, y: torch.Tensor | None, grads, denom: float, bf16: bool,
         out: torch.Tensor | None) -> torch.Tensor:
    """One ``rl_step`` call per member of ``x [E, B, n]``: with labels ``y [E, B]``, the loss
    and the gradients (added to ``grads``, in :func:`parameters`' order); with ``out [E, B, k]``
    instead, the forward alone, the logits written there. Returns the ``[E]`` losses (0 for a
    forward alone)."""
    lib = native()
    shape = model.cfg
    tile = tile_examples(shape)
    full = parameters(model)
    x = x.to(torch.int64).contiguous()
    check_range(x, shape.vocab, "token")  # the kernel reads rows by them: never unchecked
    if y is not None:
        y = y.to(torch.int64).contiguous()
        check_range(y, shape.label_mod, "label")
    if bf16 and not computes_bf16():
        raise RuntimeError("engine 11's kernel multiplies bf16 only where built for "
                           "AVX-512-BF16; this one was not")
    E, B = x.shape[:2]
    scratch = torch.empty(_scratch_floats(lib, shape, tile, bf16))
    ln = int(model.ln_final is not None)
    eps = model.ln_final.eps if ln else 1e-5
    losses = torch.empty(E)
    for e in range(E):
        losses[e] = lib.rl_step(
            *_dims(shape, tile), ln, eps, _addresses(full, e),
            None if grads is None else _addresses(grads, e), x[e].data_ptr(),
            None if y is None else y[e].data_ptr(), B, float(denom), scratch.data_ptr(),
            torch_exp(), VML_MODE, int(bf16), None if out is None else out[e].data_ptr())
    return losses


class TileStep(torch.autograd.Function):
    """``x [E, B, n]`` tokens, ``y [E, B]`` labels, ``denom`` and the model's parameters
    (:func:`parameters`, present ones) → the ``[E]`` losses (cross-entropy sums / ``denom``);
    its weight matmuls in bf16 under bf16 autocast (:func:`in_bf16`), else fp32.
    The forward computes the gradients too (one native pass per tile); the backward hands them
    on, times the incoming gradient of each member's loss."""

    @staticmethod
    def forward(ctx, x, y, denom, model, *params):
        grads = [None if p is None else torch.zeros_like(p) for p in parameters(model)]
        losses = _run(model, x, y, grads, denom, in_bf16(), None)
        ctx.grads = [g for g in grads if g is not None]
        return losses

    @staticmethod
    def backward(ctx, g_loss):
        out = [g.mul_(g_loss.view(-1, *[1] * (g.dim() - 1))) for g in ctx.grads]
        ctx.grads = None
        return (None, None, None, None, *out)


@torch.no_grad()
def tile_logits(model, x: torch.Tensor) -> torch.Tensor:
    """The logits ``[E, B, k]`` of ``x [E, B, n]`` through the kernel's forward alone, in fp32
    (engine 12's evaluation: the bits the step's own forward computes)."""
    out = torch.empty(*x.shape[:2], model.cfg.label_mod)
    _run(model, x, None, None, 1.0, False, out)
    return out


def step_loss(model, x: torch.Tensor, y: torch.Tensor, denom: float) -> torch.Tensor:
    """The ``[E]`` per-member cross-entropy sums of ``x [E, B, n]`` against ``y [E, B]``
    divided by ``denom``, whose backward gives the parameters' gradients (engine 11)."""
    present = [p for p in parameters(model) if p is not None]
    return TileStep.apply(x, y, float(denom), model, *present)


def reference_loss(model, x: torch.Tensor, y: torch.Tensor, denom: float) -> torch.Tensor:
    """The same loss through the model's PyTorch forward (engine 4's ops): the oracle."""
    logits = model(x)  # [E, B, k]
    return F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(
        y.shape).sum(1) / denom
