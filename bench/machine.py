"""The machine a benchmark ran on (issue 13, DESIGN §6): what ``make bench`` prints first.

CPU model, its vector / matrix extensions, whether bf16 matmul is native, and the measured
fp32 (and, where native, bf16) matmul peaks and copy bandwidth (rulelab.hardware); the GPU too
when one is visible. Ratios from other machines are not comparable without these lines.
"""

from __future__ import annotations

import os

import torch

from rulelab import hardware


def main() -> None:
    print("== machine")
    for line in hardware.describe("cpu"):
        print(line)
    if torch.cuda.is_available():
        print("\n".join(hardware.describe("cuda")[3:]))
    print(f"load average {os.getloadavg()[0]:.2f} (ratios are meaningful only near 0)")


if __name__ == "__main__":
    main()
