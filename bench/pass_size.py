"""How many examples a training pass should hold: engine 10's passes sized to the model
(:func:`rulelab.models.passes.pass_examples`) against engine 9's 512 (issue 25).

A step's gradient is summed pass by pass (micro-batches of ``--micro-batch`` examples per
member). A larger pass costs less Python and dispatch per example, but its activations — written
in the forward, read back in the backward — outgrow the caches: every op then reads operands
written megabytes earlier (bench/cold_kernels.py). For study S's 2-layer transformer at the
ladder's widths and the paper's, with 4, 8 and 16 members, this times one step over 1,024
examples per member (forward, loss and backward; engine 10's kernels, one thread, glibc's heap
kept) in passes of 128, 256 and 512, alternating over 3 rounds, and prints the median
milliseconds per member, engine 10's pass for the shape, and how much faster it is than 512.
The pass depends on the shape alone (member ≡ solo), so one pass must do well at every member
count. Run on an idle machine.

    python bench/pass_size.py [--members 4,8,16] [--layers 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from rulelab.engine.allocator import keep_heap
from rulelab.models.passes import SIZED_PASS_ENGINE, pass_examples
from rulelab.models.transformer import EnsembleTransformer
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

N, T = 1024, 11  # examples per member per step; positions (CLS + 10)
PASSES = (128, 256, 512)
WIDTHS = {"2k": (24, 48), "4k": (32, 64), "8k": (48, 96), "paper": (64, 128)}  # d_model, d_mlp


def step_ms(model: EnsembleTransformer, tokens: torch.Tensor, labels: torch.Tensor,
            examples: int) -> float:
    """One step's forward and backward over ``tokens [E, N, n]`` in passes of ``examples``."""
    t = time.perf_counter()
    for s in range(0, N, examples):
        logits = model(tokens[:, s : s + examples])
        F.cross_entropy(logits.reshape(-1, 2), labels[:, s : s + examples].reshape(-1)).backward()
    return (time.perf_counter() - t) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", default="4,8,16")
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args()
    keep_heap()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"{args.layers}L, {N} examples per member per step, one thread; ms per member per step")
    print(f"{'width':6s} {'E':>3s} " + " ".join(f"{f'pass {p}':>9s}" for p in PASSES)
          + "   engine 10's pass   512 / it")
    for name, (d, f) in WIDTHS.items():
        cfg = MPSPRunConfig(layers=args.layers, heads=2, d_model=d, d_mlp=f, seq_len=T - 1,
                            vocab=64)
        chosen = pass_examples(cfg, SIZED_PASS_ENGINE)
        for E in (int(m) for m in args.members.split(",")):
            model = EnsembleTransformer(cfg, E).init_weights(list(range(E)))
            model.engine = SIZED_PASS_ENGINE
            tokens = torch.randint(0, 64, (E, N, T - 1))
            labels = torch.randint(0, 2, (E, N))
            times: dict[int, list[float]] = {p: [] for p in PASSES}
            for _ in range(3):
                for p in PASSES:
                    step_ms(model, tokens, labels, p)  # warm
                    times[p].append(step_ms(model, tokens, labels, p))
            ms = {p: statistics.median(v) / E for p, v in times.items()}
            cells = " ".join(f"{ms[p]:9.1f}" for p in PASSES)
            gain = ms[512] / ms[chosen] if chosen in ms else float("nan")
            print(f"{name:6s} {E:3d} {cells}   {chosen:>16d}   {gain:7.2f}×", flush=True)


if __name__ == "__main__":
    main()
