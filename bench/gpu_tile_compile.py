"""Compile engine 13's Triton kernel for an NVIDIA GPU here, without one (issue 25 goal 5):
Triton's front end, its GPU passes and the bundled ptxas, for sm_90 (H100 / H200), at the
paper's shape. It says whether the kernel compiles, in how long, and with how many registers
and how much spilled local memory per thread (from the cubin's ptxas report), and how many
memory instructions its SASS holds (spills, global, shared) — what the
interpreter-run tests cannot: they check the numbers, not that CUDA can build it.

    python bench/gpu_tile_compile.py [--dot ieee|tf32] [--warps 16] [--stages 1] [--arch 90]
                                     [--bt 16] [--held]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # the GPU compiler, not the interpreter

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, compile  # noqa: E402

from rulelab.models import gpu_tile_kernels, gpu_tile_step  # noqa: E402
from rulelab.models.gpu_tile_step import (  # noqa: E402
    EXAMPLES_PER_PROGRAM,
    NUM_STAGES,
    NUM_WARPS,
    kernel_constants,
)
from rulelab.models.transformer import TransformerShape  # noqa: E402
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig  # noqa: E402

PAPER = TransformerShape.of(MPSPRunConfig(layers=2, heads=2))  # study S's defaults: the paper's


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dot", default="ieee")
    ap.add_argument("--warps", type=int, default=NUM_WARPS)
    ap.add_argument("--stages", type=int, default=NUM_STAGES,
                    help="software pipelining (at 3, every load of a loop buffered in shared "
                         "memory)")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--maxnreg", type=int, default=None,
                    help="registers a thread, at most (default: gpu_tile_step.max_registers)")
    ap.add_argument("--ptxas", default=None, help="ptxas options (e.g. -O1)")
    ap.add_argument("--layers", type=int, default=PAPER.layers)
    ap.add_argument("--heads", type=int, default=PAPER.heads)
    ap.add_argument("--bt", type=int, default=gpu_tile_step.BT,
                    help="examples per tile (below 16 the last block runs at every position)")
    ap.add_argument("--held", action="store_true",
                    help="the weight gradients as one product each from registers (the "
                         "kernel's STAGE=0), not from the scratch in chunks")
    ap.add_argument("--save-ptx", type=Path, default=None, help="write the PTX to this file")
    args = ap.parse_args()
    gpu_tile_step.BT = args.bt  # kernel_constants reads them
    gpu_tile_step.STAGE_GRADS = not args.held
    s = dataclasses.replace(PAPER, layers=args.layers, heads=args.heads)
    sig = {"p_ptr": "*fp32", "g_ptr": "*fp32", "x_ptr": "*i64", "y_ptr": "*i64",
           "loss_ptr": "*fp32", "scr_ptr": "*fp32", "B": "i32", "n_prog": "i32",
           "inv_denom": "fp32", "eps": "fp32", "scale": "fp32"}
    const = kernel_constants(s, EXAMPLES_PER_PROGRAM // args.bt, args.dot)
    sig.update({k: "constexpr" for k in const})
    src = ASTSource(gpu_tile_kernels.step, sig, constexprs=const)
    t = time.perf_counter()
    kernel = compile(src, target=GPUTarget("cuda", args.arch, 32),
                     options={"num_warps": args.warps, "num_stages": args.stages,
                              "maxnreg": args.maxnreg or gpu_tile_step.max_registers(args.warps),
                              "ptx_options": args.ptxas})
    took = time.perf_counter() - t
    ptx = kernel.asm["ptx"]
    if args.save_ptx:
        args.save_ptx.write_text(ptx)
    with tempfile.TemporaryDirectory() as tmp:  # the cubin Triton built, as cuobjdump reads it
        path = Path(tmp) / "step.cubin"
        path.write_bytes(kernel.asm["cubin"])
        cuobjdump = str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
                        / "cuobjdump")
        done = subprocess.run([cuobjdump, "--dump-resource-usage", str(path)],
                              capture_output=True, text=True)
        sass = subprocess.run([cuobjdump, "--dump-sass", str(path)], capture_output=True,
                              text=True).stdout
    report = " ".join(line.strip() for line in done.stdout.splitlines() if "REG" in line)
    # local memory the PTX itself declares (LLVM's stack: arrays it could not keep in registers),
    # as against what ptxas spills when the registers run out (the cubin's STACK beyond it)
    depot = sum(int(n) for n in re.findall(r"__local_depot\d+\[(\d+)\]", ptx))
    print(f"engine 13's kernel, paper shape ({s.layers} layers, {s.heads} heads), "
          f"tiles of {args.bt}, weight gradients {'held' if args.held else 'staged'}, "
          f"sm_{args.arch}, {args.warps} warps, {args.stages} stages, dot {args.dot}: "
          f"compiled in {took:.0f} s, "
          f"{len(ptx.splitlines()):,} lines of PTX ({depot:,} B of local memory declared there), "
          f"shared memory {kernel.metadata.shared:,} B; "
          f"resources: {report or done.stderr[-300:]}")
    print("SASS memory instructions, static (each written once, however often its loop runs): "
          + "; ".join(f"{op} {n:,} ({b:,} B)" for op, (n, b) in memory_ops(sass).items()))


def memory_ops(sass: str) -> dict[str, tuple[int, int]]:
    """{mnemonic: (instructions, bytes a thread moves)} for the spills (STL, LDL: local memory),
    the global loads and stores (LDG, STG: the scratch, weights, gradient sums) and shared memory
    (LDS, STS) in ``sass`` (``cuobjdump --dump-sass``); an unsuffixed op moves 4 bytes."""
    out = {}
    for op in ("STL", "LDL", "STG", "LDG", "STS", "LDS"):
        n = b = 0
        for suffixes in re.findall(rf"\b{op}((?:\.[A-Z0-9]+)*)\s", sass):
            n += 1
            widths = [int(w) for w in suffixes.split(".") if w in ("64", "128")]
            b += (widths[0] if widths else 32) // 8
        out[op] = (n, b)
    return out

if __name__ == "__main__":
    main()
