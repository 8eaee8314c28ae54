"""Test-wide settings: one thread, so results do not depend on OpenMP scheduling and a
test run does not stall when another process holds the second core."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)
