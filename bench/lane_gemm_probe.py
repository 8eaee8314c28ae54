"""Can a fused per-block kernel do its own weight matmuls? A probe for issue 25's next engine.

What is left of a step at the ladder's sizes is not the matmuls but the passes over memory
around them (bench/step_parts.py: 67% of a 2k-rung micro-batch). A kernel that keeps a block of
examples in cache from one op to the next has to run the weight matmuls itself, with the
examples as vector lanes (engine 8's layout, ``Wᵀ x`` on ``[E, d, T·B]``). This times that inner
loop (``bench/lane_gemm.cpp``: each weight broadcast into four vectors of columns, four rows at
once, built by :mod:`rulelab.models.native_build`) against PyTorch's ``bmm`` at the
projections' shapes of the ladder's 2k rung and the paper's config (4 members, a micro-batch of
512 examples × 11 positions), plain and with the MLP's bias and ReLU fused in (against ``bmm``
+ ``add_`` + ``relu_``, engine 8's ops), one thread. "same" says whether its result equals
``bmm``'s bit for bit (it sums k in order, as the library happens to here). Prints GFLOP/s.

    python bench/lane_gemm_probe.py
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from rulelab.models import native_build
from step_parts import median_ms

SOURCE = Path(__file__).with_name("lane_gemm.cpp")
E, COLS = 4, 512 * 11  # members; columns: a micro-batch of 512 examples × 11 positions
SHAPES = {  # (rung, projection): (rows M = outputs, K = inputs)
    ("2k (24/48)", "Q/K/V"): (72, 24), ("2k (24/48)", "output"): (24, 24),
    ("2k (24/48)", "MLP in"): (48, 24), ("2k (24/48)", "MLP out"): (24, 48),
    ("paper (64/128)", "Q/K/V"): (192, 64), ("paper (64/128)", "output"): (64, 64),
    ("paper (64/128)", "MLP in"): (128, 64), ("paper (64/128)", "MLP out"): (64, 128),
}


def declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, i = ctypes.c_void_p, ctypes.c_int64
    lib.rl_lane_gemm.argtypes = [p, p, p, p, i, i, i, i]
    lib.rl_lane_gemm.restype = None
    return lib


def measure(lib: ctypes.CDLL, M: int, K: int) -> tuple[float, float, bool, float, float, bool]:
    """GFLOP/s of ``bmm`` and the lane kernel at ``[E, M, K] @ [E, K, COLS]``, whether they
    agree bitwise; then of ``bmm + add_ + relu_`` and the fused kernel, and whether those do."""
    W, x, b = torch.randn(E, M, K), torch.randn(E, K, COLS), torch.randn(E, M)
    y = torch.empty(E, M, COLS)

    def lane(bias: bool) -> None:
        for e in range(E):
            lib.rl_lane_gemm(W[e].data_ptr(), x[e].data_ptr(), y[e].data_ptr(),
                             b[e].data_ptr() if bias else None, int(bias), M, K, COLS)

    def eager() -> torch.Tensor:  # engine 8's MLP-in ops
        return torch.bmm(W, x).add_(b.unsqueeze(2)).relu_()
    gflop = 2 * E * M * K * COLS / 1e6  # per ms
    t_bmm, t_lane = median_ms(lambda: torch.bmm(W, x)), median_ms(lambda: lane(False))
    same = torch.equal(y, torch.bmm(W, x))
    t_eager, t_fused = median_ms(eager), median_ms(lambda: lane(True))
    return (gflop / t_bmm, gflop / t_lane, same, gflop / t_eager, gflop / t_fused,
            torch.equal(y, eager()))


def main() -> None:
    lib = native_build.load(SOURCE, declare)
    if isinstance(lib, str):
        raise SystemExit(f"error: bench/lane_gemm.cpp could not be built: {lib}")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"{E} members × {COLS} columns, one thread; GFLOP/s (2 per multiply-add)")
    print(f"{'rung':<15} {'projection':<10} {'bmm':>6} {'lane':>6} {'same':>5} "
          f"{'bmm+bias+relu':>13} {'fused':>6} {'same':>5}")
    for (rung, name), (M, K) in SHAPES.items():
        bmm, lane, same, eager, fused, fused_same = measure(lib, M, K)
        print(f"{rung:<15} {name:<10} {bmm:6.0f} {lane:6.0f} {'yes' if same else 'no':>5} "
              f"{eager:13.0f} {fused:6.0f} {'yes' if fused_same else 'no':>5}")


if __name__ == "__main__":
    main()
