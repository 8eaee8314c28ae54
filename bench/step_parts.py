"""Where one training step's time goes: each part of study S's 2L model alone, as the default
engine computes it (engine 9, :mod:`rulelab.models.lane_forward`; issues 13 and 25).

One micro-batch as the trainer runs it (4 members × 512 examples, 11 positions with CLS, the
residual stream ``[E, d, T, B]``), forward and backward, on one thread (every CPU training step
runs on one thread since engine 4), glibc's heap kept as in training. Sizes: the paper's
(d_model 64, 2 heads of 32, d_mlp 128) or the scale ladder's first rung (``--size ladder``:
24 / 48). Prints the median time of each part over 3 alternating rounds: the whole model with
its loss, each block's attention (all queries in block 1, the CLS query in block 2) and the
weight matmuls inside them, block 1's MLP and its matmuls, one LayerNorm; then the matmuls'
share of the whole (the rest — attention's sums and softmax, LayerNorms, bias and residual adds,
ReLU, the embedding, the loss — is what a fused kernel would have to cut). docs/performance.md
reads the table.

    python bench/step_parts.py [--size paper|ladder]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from rulelab.engine.allocator import keep_heap
from rulelab.models import lane_forward as lane
from rulelab.models.transformer import FUSED_LANE_ENGINE, EnsembleTransformer
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

E, B, T = 4, 512, 11  # members, micro-batch, positions (CLS + 10)
SIZES = {"paper": (64, 128), "ladder": (24, 48)}  # d_model, d_mlp
# the rows the matmuls' share is read from
WHOLE, QKV = "whole model and loss", "  its Q/K/V projection matmul"
OUT, KV_Q = "  its output projection matmul", "  its K/V (all) and Q (CLS) matmuls"
MLP2 = "  its two matmuls"


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


def size_argument(doc: str) -> str:
    """The ``--size`` a bench script was run with (:data:`SIZES`; default the paper's)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="paper")
    return ap.parse_args().size


def micro_batch(size: str) -> tuple[EnsembleTransformer, torch.Tensor, torch.Tensor]:
    """Study S's 2L model at ``size`` (:data:`SIZES`) under engine 9, and one micro-batch's
    tokens and labels — on one thread, glibc's heap kept, seeded — as the trainer runs it."""
    D, M = SIZES[size]
    keep_heap()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = MPSPRunConfig(layers=2, heads=2, d_model=D, d_mlp=M, seq_len=T - 1, vocab=64)
    model = EnsembleTransformer(cfg, E).init_weights(list(range(E)))
    model.engine = FUSED_LANE_ENGINE
    tokens, labels = torch.randint(0, 64, (E, B, T - 1)), torch.randint(0, 2, (E * B,))
    return model, tokens, labels


def main() -> None:
    size = size_argument(__doc__)
    D, M = SIZES[size]
    model, tokens, labels = micro_batch(size)
    block = model.blocks[0]
    x = torch.randn(E, D, T, B, requires_grad=True)  # the residual stream, engines 8 and 9's layout
    cols = x.reshape(E, D, T * B)
    w_qkv = torch.randn(E, 3 * D, D, requires_grad=True)  # Q, K and V of 2 heads of D / 2
    w_o = torch.randn(E, D, D, requires_grad=True)
    w_in, w_out = (torch.randn(E, M, D, requires_grad=True),
                   torch.randn(E, D, M, requires_grad=True))
    parts = {  # indented: the part's weight matmuls alone (no bias), Wᵀ x as engine 9 has them
        WHOLE: lambda: F.cross_entropy(model(tokens).reshape(E * B, -1), labels),
        "attention, block 1 (all 11 queries)": lambda: lane.attention(block.attn, x, False,
                                                                      in_order=True),
        QKV: lambda: torch.bmm(w_qkv, cols),
        OUT: lambda: torch.bmm(w_o, cols),
        "attention, block 2 (the CLS query)": lambda: lane.attention(block.attn, x, True,
                                                                     in_order=True),
        KV_Q: lambda: torch.cat([torch.bmm(w_qkv[:, D:], cols).flatten(1),
                                 torch.bmm(w_qkv[:, :D], cols[:, :, :B]).flatten(1)], 1),
        "MLP, block 1": lambda: lane.mlp(block.mlp, x),
        MLP2: lambda: torch.bmm(w_out, torch.bmm(w_in, cols)),
        "one LayerNorm, all positions": lambda: lane.layer_norm(block.ln1, x),
    }
    times: dict[str, list[float]] = {k: [] for k in parts}
    for _ in range(3):
        for name, f in parts.items():
            times[name].append(median_ms(forward_backward(f)))
    ms = {k: statistics.median(t) for k, t in times.items()}
    print(f"one micro-batch of the {size} shape (d_model {D}, d_mlp {M}; {E} members × {B} "
          f"examples), engine 9, forward + backward, {torch.get_num_threads()} thread")
    for name, t in ms.items():
        print(f"{name:<40} {t:7.1f} ms")
    # the whole model's weight matmuls: block 1's (Q/K/V, output, MLP), block 2's K/V and CLS
    # query (its output projection and MLP act on the CLS row alone: ≈ 1/11 of block 1's)
    mm = ms[QKV] + ms[KV_Q] + (ms[OUT] + ms[MLP2]) * (1 + 1 / T)
    whole = ms[WHOLE]
    print(f"weight matmuls ≈ {mm:.1f} ms of the whole {whole:.1f} ms ({100 * mm / whole:.0f}%); "
          f"the rest {100 * (1 - mm / whole):.0f}% (issue 25 goal 1: ≤ 25%)")


if __name__ == "__main__":
    main()
