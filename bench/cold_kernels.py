"""The native kernels with their operands in cache and out of it (issue 25): what a training
step sees. In a step every operand was written many megabytes earlier (the forward's q, k, v by
the time the backward reads them), so it comes from L3 or memory; a kernel timed alone, call
after call on the same tensors, reads it from L2. Each kernel here is timed both ways, in
alternating rounds: warm (called again on the same tensors) and cold (a 256 MB buffer written
between calls). docs/performance.md's "Same numbers, fewer passes" reads it: the cold/warm
ratio is the part of a kernel's time that only a fusion across ops (a block's data kept in L1/L2
from one op to the next) can remove.

    python bench/cold_kernels.py
"""

from __future__ import annotations

import statistics
import time

import torch

from rulelab.engine.allocator import keep_heap
from rulelab.models import layer_norm_lanes
from rulelab.models.attention_sums import attend, attend_backward, fusable
from step_parts import B, E, T

H = 2  # heads (the micro-batch's other sizes: step_parts)
SIZES = {"ladder 2k": 24, "paper": 64}  # d_model (2 heads of d_model / 2)


def times(f, flush: torch.Tensor | None, n: int = 11) -> float:
    """Median milliseconds of ``f()``, the cache flushed before each call where ``flush``."""
    out = []
    for _ in range(n):
        if flush is not None:
            flush.fill_(1.0)
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e3


def kernels(d: int) -> dict:
    """The kernels of one micro-batch at d_model ``d``: name → call."""
    gen = torch.Generator().manual_seed(d)
    dh = d // H
    qkv = torch.randn(E, 3, H, dh, T, B, generator=gen)
    q, k, v = qkv.unbind(1)
    q1 = q[:, :, :, :1].contiguous()
    lib = fusable(q, k, v)
    if lib is None:
        raise SystemExit("error: the fused attention kernels do not run here")
    calls = {}
    for name, qq in (("attention, all queries", q), ("attention, CLS query", q1)):
        z, p = attend(lib, qq, k, v, 0.3)
        dz = torch.randn(z.shape, generator=gen)
        grads = [torch.empty(t.shape) for t in (qq, k, v)]
        calls[f"{name}, forward"] = lambda qq=qq: attend(lib, qq, k, v, 0.3)
        calls[f"{name}, backward"] = (lambda qq=qq, dz=dz, p=p, grads=grads:
                                      attend_backward(lib, dz, qq, k, v, p, 0.3, *grads))
    x, g = torch.randn(E, d, T * B, generator=gen), torch.randn(E, d, T * B, generator=gen)
    w, b = torch.randn(E, d, generator=gen), torch.randn(E, d, generator=gen)
    _, mean, rstd = layer_norm_lanes.forward_lanes(x, w, b, 1e-5)
    calls["LayerNorm, forward"] = lambda: layer_norm_lanes.forward_lanes(x, w, b, 1e-5)
    calls["LayerNorm, backward"] = lambda: layer_norm_lanes.backward_lanes(x, g, w, mean, rstd)
    return calls


def main() -> None:
    keep_heap()
    torch.set_num_threads(1)
    flush = torch.empty(64 << 20)  # 256 MB
    print(f"one micro-batch ({E} members × {B} examples, {T} positions, {H} heads), one thread; "
          "median ms of 3 alternating rounds of 11 calls")
    print(f"{'shape':<10} {'kernel':<36} {'warm':>7} {'cold':>7} {'cold/warm':>9}")
    for size, d in SIZES.items():
        calls = kernels(d)
        warm, cold = {k: [] for k in calls}, {k: [] for k in calls}
        for _ in range(3):
            for name, f in calls.items():
                warm[name].append(times(f, None))
                cold[name].append(times(f, flush))
        for name in calls:
            w, c = statistics.median(warm[name]), statistics.median(cold[name])
            print(f"{size:<10} {name:<36} {w:7.2f} {c:7.2f} {c / w:8.2f}×")


if __name__ == "__main__":
    main()
