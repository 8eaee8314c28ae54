"""Where one training step's time goes: each part of the paper's 2L model alone (issue 13).

One micro-batch of the paper's config as the trainer runs it (4 members × 512 examples,
d_model 64, 2 heads of 32, d_mlp 128, 11 positions with CLS), forward and backward, glibc's
heap kept as in training. Prints the median time of each part over 3 alternating rounds: the
whole model with its loss, each block's attention (all queries in block 1, the CLS query in
block 2), the matmuls inside them, block 1's MLP and its matmuls, and one LayerNorm. What is
not a matmul is the work eager PyTorch runs op by op; the README's benchmark section reads
the table.

    python bench/step_parts.py
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from rulelab.engine.allocator import keep_heap
from rulelab.models.components import MLP, Attention, LayerNorm
from rulelab.models.transformer import EnsembleTransformer
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

E, B, T, D = 4, 512, 11, 64  # members, micro-batch, positions (CLS + 10), d_model


def forward_backward(f):
    def step() -> None:
        out = f()
        out.backward(torch.ones_like(out))
    return step


def median_ms(step, n: int = 15) -> float:
    for _ in range(3):
        step()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    keep_heap()
    torch.manual_seed(0)
    cfg = MPSPRunConfig(layers=2, heads=2, d_model=D, d_mlp=128, seq_len=T - 1, vocab=64)
    model = EnsembleTransformer(cfg, E).init_weights(list(range(E)))
    tokens, labels = torch.randint(0, 64, (E, B, T - 1)), torch.randint(0, 2, (E * B,))
    attn, mlp, ln = Attention(E, D, 2), MLP(E, D, 128, "relu"), LayerNorm(E, D)
    for p in [*attn.parameters(), *mlp.parameters()]:
        torch.nn.init.normal_(p, std=0.1)
    x = torch.randn(E, B, T, D, requires_grad=True)
    w_qkv, b_qkv = torch.randn(E, D, 3 * D, requires_grad=True), torch.zeros(E, 1, 3 * D)
    w_o = torch.randn(E, D, D, requires_grad=True)
    w_in, w_out = (torch.randn(E, D, 128, requires_grad=True),
                   torch.randn(E, 128, D, requires_grad=True))
    rows = x.reshape(E, B * T, D)
    parts = {
        "whole model and loss": lambda: F.cross_entropy(model(tokens).reshape(E * B, -1),
                                                        labels),
        "attention, block 1 (all 11 queries)": lambda: attn(x),
        "attention, block 2 (the CLS query)": lambda: attn(x, query_pos=0),
        "  its Q/K/V projection matmul": lambda: torch.baddbmm(b_qkv, rows, w_qkv),
        "  block 1's output projection matmul": lambda: torch.baddbmm(b_qkv[..., :D], rows, w_o),
        "MLP, block 1": lambda: mlp(x),
        "  its two matmuls": lambda: torch.bmm(torch.bmm(rows, w_in), w_out),
        "one LayerNorm, all positions": lambda: ln(x),
    }
    times: dict[str, list[float]] = {k: [] for k in parts}
    for _ in range(3):
        for name, f in parts.items():
            times[name].append(median_ms(forward_backward(f)))
    print(f"one micro-batch ({E} members × {B} examples), forward + backward, "
          f"{torch.get_num_threads()} threads")
    for name, t in times.items():
        print(f"{name:<40} {statistics.median(t):7.1f} ms")


if __name__ == "__main__":
    main()
