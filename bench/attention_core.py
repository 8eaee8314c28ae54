"""Engine 9's fused attention core against engine 8's op-by-op core (issue 25): the forward
(scores, softmax, values) and the backward alone, at the ladder's 2k shape (d_head 12) and the
paper's (d_head 32), for the block of all 11 queries and for the CLS query; 4 members × 512
examples, 2 heads, one thread, medians of 3 alternating rounds of 30. docs/performance.md's
"Engine 9" table reads it.

    python bench/attention_core.py
"""

from __future__ import annotations

import statistics

import torch

from rulelab.engine.allocator import keep_heap
from rulelab.models.attention_core import core_backward, unfused
from rulelab.models.attention_sums import attend, attend_backward, fusable
from step_parts import median_ms

E, H, T, B = 4, 2, 11, 512  # members, heads, positions, examples


def core_times(lib, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[str, float]:
    """Median milliseconds of each engine's forward and backward at these q, k, v."""
    z, p = unfused(q, k, v, 0.3, False)
    dz = torch.randn_like(z)
    grads = [torch.empty(t.shape) for t in (q, k, v)]
    parts = {
        "engine 8 forward": lambda: unfused(q, k, v, 0.3, False),
        "engine 9 forward": lambda: attend(lib, q, k, v, 0.3),
        "engine 8 backward": lambda: core_backward(dz, q, k, v, p, 0.3, *grads, False),
        "engine 9 backward": lambda: attend_backward(lib, dz, q, k, v, p, 0.3, *grads),
    }
    times: dict[str, list[float]] = {part: [] for part in parts}
    for _ in range(3):  # alternating rounds
        for part, f in parts.items():
            times[part].append(median_ms(f, 30))
    return {part: statistics.median(t) for part, t in times.items()}


def main() -> None:
    keep_heap()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for dh in (12, 32):
        q, k, v = torch.randn(E, 3, H, dh, T, B).unbind(1)
        lib = fusable(q, k, v)
        if lib is None:
            raise SystemExit("the fused core does not run here (no compiler, or no MKL exp)")
        for name, query in (("11 queries", q), ("CLS query", q[:, :, :, :1].contiguous())):
            ms = core_times(lib, query, k, v)
            f8, f9 = ms["engine 8 forward"], ms["engine 9 forward"]
            b8, b9 = ms["engine 8 backward"], ms["engine 9 backward"]
            print(f"d_head {dh}, {name}: forward {f8:.2f} → {f9:.2f} ms ({f8 / f9:.2f}×); "
                  f"backward {b8:.2f} → {b9:.2f} ms ({b8 / b9:.2f}×)")


if __name__ == "__main__":
    main()
