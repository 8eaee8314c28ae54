"""Where engine 11's step spends its time (issue 25 goal 1: the non-matmul work ≤ 25% of a
step): the share of the weight matmuls in the native step, and the step against the whole
pass as the trainer runs it.

Builds ``step_kernels.cpp`` with ``-DRL_TIMING`` (the same arithmetic; each weight matmul —
``gemm`` for products, ``gram`` for their weights' gradients — and each ``rl_step`` call counts
its cycles) and trains one full-batch step of study S's 2-layer model, 4 members × 2,048
examples, at the scale ladder's widths and the paper's, on one thread. Prints per member the
step's milliseconds; the shares of the native step taken by the weight matmuls, the attention's
core (scores, softmax, values and their backward), the LayerNorms and the rest (embedding,
bias gradients, ReLU, residual copies, the loss); and the share of the whole step (Python, the
gradient buffers, autograd's accumulation included) outside the matmuls. Where the kernel
multiplies bf16 (AVX-512-BF16: ``--precision bf16``), each width is timed in both precisions,
alternating, and the fp32/bf16 speed ratio printed.

    python bench/tile_profile.py
    python bench/tile_profile.py --march x86-64-v3   # the kernel's AVX2 build, on this CPU

``--march`` builds the kernel for another target than this CPU (``-march=…``; the same fp32 bits
on every vector width, tests/engine/models/test_tile_step.py): ``x86-64-v3`` times its AVX2
build, the one an AVX2-only CPU (an older EPYC) trains with.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import statistics
import tempfile
import time
from pathlib import Path

import torch

from rulelab.engine.allocator import keep_heap
from rulelab.models import native_build, tile_step
from rulelab.models.transformer import EnsembleTransformer
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

E, N = 4, 2048
WIDTHS = {"2k (24/48)": (24, 48), "4k (32/64)": (32, 64), "8k (48/96)": (48, 96),
          "paper (64/128)": (64, 128)}


def study_config(d: int, f: int) -> MPSPRunConfig:
    """Study S's 2-layer model at width ``d`` / ``f`` (n = 10, V = 64, 2 heads)."""
    return MPSPRunConfig(layers=2, heads=2, d_model=d, d_mlp=f, seq_len=10, vocab=64)


def timing_build(out: Path, march: str = "native") -> ctypes.CDLL:
    built = tile_step.build_variant(out / "step_timing.so",
                                    (*native_build.flags(march), "-DRL_TIMING"))
    built.rl_step_cycles.argtypes = [ctypes.c_void_p]
    built.rl_rdtsc.restype = ctypes.c_ulonglong
    return built


def tsc_hz(lib: ctypes.CDLL) -> float:
    """The time-stamp counter's ticks per second (constant on every CPU PyTorch runs on)."""
    t, c = time.perf_counter(), lib.rl_rdtsc()
    time.sleep(0.3)
    return (lib.rl_rdtsc() - c) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--march", default="native", help="the kernel's -march (default native)")
    march = ap.parse_args().march
    keep_heap()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        lib = timing_build(Path(tmp), march)
        tile_step.native = lambda: lib  # the trainer's path, on the timing build
        cycles = (ctypes.c_ulonglong * 4)()
        hz = tsc_hz(lib)
        precisions = ("fp32", "bf16") if lib.rl_step_bf16() == 1 else ("fp32",)
        print(f"engine 11, one full-batch step of {N} examples × {E} members, 1 thread; kernel "
              f"built for -march={march}: {lib.rl_step_vector_bits()}-bit vectors")
        print(f"{'width':<16} {'':>4} {'ms/member':>9} {'matmuls':>8} {'attention':>9} "
              f"{'LayerNorm':>9} {'the rest':>8}   {'non-matmul / whole step':>23}")
        for name, (d, f) in WIDTHS.items():
            model = EnsembleTransformer(study_config(d, f), E).init_weights(list(range(E)))
            x, y = torch.randint(0, 64, (E, N, 10)), torch.randint(0, 2, (E, N))

            def step(bf16: bool, model=model, x=x, y=y) -> None:
                model.zero_grad()
                with (torch.autocast("cpu", dtype=torch.bfloat16) if bf16
                      else contextlib.nullcontext()):
                    tile_step.step_loss(model, x, y, float(N)).sum().backward()

            walls = {p: [] for p in precisions}
            counts = {p: [0, 0, 0, 0] for p in precisions}  # matmuls, native, attention, LN
            for p in precisions:
                step(p == "bf16")
            lib.rl_step_cycles(cycles)
            for _ in range(5):  # the precisions alternating
                for p in precisions:
                    t = time.perf_counter()
                    step(p == "bf16")
                    walls[p].append(time.perf_counter() - t)
                    lib.rl_step_cycles(cycles)
                    counts[p] = [a + b for a, b in zip(counts[p], cycles, strict=True)]
            for p in precisions:
                mm, native, attn, ln = counts[p]
                wall = statistics.median(walls[p])
                share = mm / native  # of the native step
                rest = 1 - mm / hz / sum(walls[p])  # of the whole step, Python and autograd in
                other = 1 - share - (attn + ln) / native
                print(f"{name:<16} {p:>4} {wall * 1e3 / E:9.1f} {100 * share:7.0f}% "
                      f"{100 * attn / native:8.0f}% {100 * ln / native:8.0f}% "
                      f"{100 * other:7.0f}%   {100 * rest:22.0f}%")
            if len(precisions) == 2:
                ratio = statistics.median(walls["fp32"]) / statistics.median(walls["bf16"])
                print(f"{'':<16} bf16 is {ratio:.2f}× fp32's speed")


if __name__ == "__main__":
    main()
