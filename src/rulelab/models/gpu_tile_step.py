"""Engine 13's training step on CUDA: the transformer's forward, loss and backward fused per tile
of examples in one Triton kernel (:mod:`rulelab.models.gpu_tile_kernels`; issue 25 goal 5).

``step_loss(model, x, y, denom)`` returns the ``[E]`` losses (cross-entropy sums / ``denom``)
whose backward hands on the kernel's gradients, as engine 12's CPU step does
(:mod:`rulelab.models.tile_step`). Parameters are packed per member into one flat row
(:func:`layout`; each tensor's own memory order), the kernel writes one row of gradient sums
per program, and those rows are added per member one after another (a number of programs
that depends on the batch alone): a member computes the same sums in any
ensemble, and a run repeated gives the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rulelab.models.passes import GPU_TILE_ENGINE
from rulelab.models.tile_step import TileStep, check_range, parameters

__all__ = ["BT", "GPU_TILE_ENGINE", "layout", "run_step", "step_loss", "unsupported"]

# Examples per tile: 16, tl.dot's smallest block, lets the last block work at CLS alone; a
# smaller tile (a power of two) runs it at every position and reads CLS after it (the tests
# check both; bench/gpu_tile_compile.py --bt compiles either).
BT = 16
EXAMPLES_PER_PROGRAM = 512  # a program's share of a member's batch (its tiles, in order)
# Launch options (bench/gpu_tile_compile.py, sm_90, compiled here without a GPU): 16 warps
# keep a tile's [256, 128] tensors at 64 values a thread; one stage, because Triton's software
# pipelining buffers every load of the head loop in shared memory (576 KiB at 3 stages, past
# the 227 KiB a block may hold; 224 KiB at one).
NUM_WARPS, NUM_STAGES = 16, 1
# The weight gradients over a tile's rows read their operands back from the scratch, 16 rows at
# a time (gpu_tile_parts.add_rows_gram): half the spilled registers of one product each from
# registers (bench/gpu_tile_compile.py --held), for ≈ 2 MB more scratch traffic a tile. Only a
# GPU can weigh the two; bench/gpu_check.py times both (TILE_SHAPES "16:16" and "16:16:held").
STAGE_GRADS = True


def max_registers(warps: int) -> int:
    """Registers a thread may use: the SM's 65,536 shared by one block of ``warps`` warps (at
    most 255). Set explicitly because ptxas -O3 gave this kernel 32 registers and spilled the
    rest (10.5 KB of stack a thread, tiles of 4; 5.0 KB at 128: bench/gpu_tile_compile.py)."""
    return min(255, 65536 // (32 * warps))


def _pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def triton_missing() -> str | None:
    """Why Triton cannot be imported here, or None."""
    try:
        import triton  # noqa: F401
    except ImportError as err:
        return f"Triton is not installed ({err})"
    return None


def unsupported(shape) -> str | None:
    """Why engine 13 cannot train a transformer of ``shape`` (a ``TransformerShape``), or None."""
    if shape.d_mlp and shape.act != "relu":
        return f"act {shape.act}: engine 13 runs a ReLU MLP only"
    dh = shape.d_model // shape.heads
    for name, v in (("d_model", shape.d_model), ("d_head", dh), ("d_mlp", shape.d_mlp)):
        if v and (v < 16 or v & (v - 1)):
            return f"{name} {v}: engine 13 needs powers of two ≥ 16 (tl.dot's blocks)"
    return triton_missing()


@dataclass(frozen=True)
class Layout:
    """Offsets (floats) into a member's packed parameters, and the kernel's padded sizes."""

    n_params: int
    o_pos: int  # W_pos
    o_layer0: int  # the first block
    layer_stride: int  # floats per block
    o_final: int  # final LayerNorm (if any), W_U, b_U
    P: int  # positions, padded
    VP: int  # vocabulary with CLS, padded
    KP: int  # classes, padded
    scratch: int  # floats of scratch a program: each layer's, the rows' gradient, dpre or dq/dk/dv


def layout(shape) -> Layout:
    """Where each parameter lies in a member's packed row, in
    :func:`rulelab.models.tile_step.parameters`' order."""
    d, H, f, k = shape.d_model, shape.heads, shape.d_mlp, shape.label_mod
    T, V1, L = shape.seq_len + 1, shape.vocab + 1, shape.layers
    ln = 2 * d if shape.ln else 0
    block = ln + 3 * d * d + 3 * d + d * d + d  # LN1, W_Q/K/V, b_Q/K/V, W_O, b_O (H·dh = d)
    if f:
        block += (ln + 2 * d * f + f + d)
    o_pos = V1 * d
    o_layer0 = o_pos + T * d
    o_final = o_layer0 + L * block
    P = max(16, _pow2(T))
    R = BT * P
    per_layer = R * (2 * d + 4 * d + f + 2) + H * BT * P * P
    return Layout(n_params=o_final + ln + d * k + k, o_pos=o_pos, o_layer0=o_layer0,
                  layer_stride=block, o_final=o_final, P=P, VP=max(16, _pow2(V1)),
                  KP=max(16, _pow2(k)), scratch=L * per_layer + R * (d + f + 3 * (d // H)))


def programs(n_examples: int) -> tuple[int, int]:
    """(programs per member, tiles per program) for a batch of ``n_examples``: fixed by the
    batch alone (member ≡ solo)."""
    tiles = EXAMPLES_PER_PROGRAM // BT
    return max(1, math.ceil(n_examples / (tiles * BT))), tiles


def pack(tensors: list[torch.Tensor]) -> torch.Tensor:
    """``[E, n_params]``: each member's parameters flattened, in order."""
    return torch.cat([t.detach().reshape(t.shape[0], -1).float() for t in tensors], dim=1)


def kernel_constants(shape, tiles: int, dot: str) -> dict:
    """The kernel's compile-time arguments for ``shape`` (a ``TransformerShape``), ``tiles``
    per program and ``tl.dot``'s input precision (``"ieee"`` or ``"tf32"``)."""
    lay = layout(shape)
    return dict(NP=lay.n_params, V1=shape.vocab + 1, VP=lay.VP, T=shape.seq_len + 1, P=lay.P,
                D=shape.d_model, H=shape.heads, DH=shape.d_model // shape.heads, F=shape.d_mlp,
                K=shape.label_mod, KP=lay.KP, L=shape.layers, LN=bool(shape.ln), BT=BT,
                TILES=tiles, DOT=dot, O_POS=lay.o_pos, O_L0=lay.o_layer0,
                LSTRIDE=lay.layer_stride, O_FIN=lay.o_final, STAGE=STAGE_GRADS)


def products() -> str:
    """``tl.dot``'s input precision: TF32 where the trainer's ``--precision tf32`` switched
    PyTorch's CUDA matmuls to it (``engine.base.tf32_matmuls``), else fp32."""
    return "tf32" if torch.backends.cuda.matmul.fp32_precision == "tf32" else "ieee"


def _programs_in_order(t: torch.Tensor) -> torch.Tensor:
    """``t [E, programs, …]`` summed over its programs one after another: the same sums
    whatever E is (a reduction kernel's split could depend on the tensor's size)."""
    out = t[:, 0].clone()
    for j in range(1, t.shape[1]):
        out += t[:, j]
    return out


def run_step(model, x: torch.Tensor, y: torch.Tensor, denom: float, dot: str = "ieee"
             ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The kernel over ``x [E, B, n]``, ``y [E, B]``: the ``[E]`` losses and every present
    parameter's gradient (in :func:`rulelab.models.tile_step.parameters`' order). On the CPU
    it runs only under Triton's interpreter (``TRITON_INTERPRET=1`` before the kernel module's
    first import: the tests)."""
    from rulelab.models import gpu_tile_kernels

    shape = model.cfg
    params = [p for p in parameters(model) if p is not None]
    lay = layout(shape)
    E, B = x.shape[:2]
    flat = pack(params)
    if flat.shape[1] != lay.n_params:
        raise RuntimeError(f"engine 13's layout holds {lay.n_params} floats a member, the model "
                           f"{flat.shape[1]}")
    x = x.to(torch.int64).contiguous()
    y = y.to(torch.int64).contiguous()
    check_range(x, shape.vocab, "token")  # the kernel reads rows by them: never unchecked
    check_range(y, shape.label_mod, "label")
    n_prog, tiles = programs(B)
    dev = flat.device
    partial = torch.zeros(E, n_prog, lay.n_params, device=dev)
    losses = torch.zeros(E, n_prog, device=dev)
    scratch = torch.empty(E * n_prog * lay.scratch, device=dev)
    ln = model.ln_final
    gpu_tile_kernels.step[(E, n_prog)](
        flat, partial, x, y, losses, scratch, B, n_prog, 1.0 / float(denom),
        ln.eps if ln is not None else 1e-5, 1.0 / math.sqrt(shape.d_model // shape.heads),
        **kernel_constants(shape, tiles, dot), num_warps=NUM_WARPS, num_stages=NUM_STAGES,
        maxnreg=max_registers(NUM_WARPS))
    g = _programs_in_order(partial)  # [E, n_params]
    grads, at = [], 0
    for p in params:
        n = p[0].numel()
        grads.append(g[:, at : at + n].view_as(p).to(p.dtype))
        at += n
    return _programs_in_order(losses), grads


class GpuTileStep(TileStep):
    """``x, y, denom, model, *params`` → ``[E]`` losses, as :class:`tile_step.TileStep` (whose
    backward hands the gradients on), computed by engine 13's kernel."""

    @staticmethod
    def forward(ctx, x, y, denom, model, *params):
        losses, ctx.grads = run_step(model, x, y, denom, products())
        return losses


def step_loss(model, x: torch.Tensor, y: torch.Tensor, denom: float) -> torch.Tensor:
    """The ``[E]`` cross-entropy sums of ``x [E, B, n]`` against ``y [E, B]`` divided by
    ``denom``, whose backward gives every parameter's gradient (engine 13; TF32 products under
    ``--precision tf32``: :func:`products`)."""
    present = [p for p in parameters(model) if p is not None]
    return GpuTileStep.apply(x, y, float(denom), model, *present)
