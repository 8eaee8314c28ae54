"""Is fusing the step the GPU lever? Eager vs ``torch.compile`` of study S's ensemble model.

The H200 ran study S's paper config at 18% of its fp32 matmul peak, bound by elementwise
work (layer norms, softmax, GELU/ReLU, residual adds) that eager PyTorch runs as separate
kernels, and a 2-member ensemble at 27 ms per member-epoch, bound by the host (kernel
launches). This probe measures what the two usual cures would give before the engine adopts
either: ``torch.compile`` (Inductor fuses the elementwise work, forward and backward) and
``mode="reduce-overhead"`` (the same, replayed as CUDA graphs: no per-kernel launch cost).

For each ensemble size E: seed-epochs/s of eager and of each compiled mode (the model's
forward and its backward compiled; the batched optimizer stays eager), the compile time, and
the largest |Δ loss| against eager after the timed epochs (fusion reorders float sums, so a
compiled run is not bitwise an eager one: the size of the difference is part of the answer).

    python bench/gpu_compile_probe.py                  # cuda: E = 2 and 64, ≈ 2–4 min
    DEVICE=cpu python bench/gpu_compile_probe.py       # smoke: tiny sizes (compiles C++)

Environment: DEVICE (cuda), MEMBERS ("2 64"), N_TRAIN (16384), EPOCHS (20), MODES
("default reduce-overhead").
"""

from __future__ import annotations

import os
import time

import torch

from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

DEVICE = os.environ.get("DEVICE", "cuda")
CPU = DEVICE == "cpu"
MEMBERS = [int(e) for e in os.environ.get("MEMBERS", "2" if CPU else "2 64").split()]
N_TRAIN = int(os.environ.get("N_TRAIN", 512 if CPU else 16384))
EPOCHS = int(os.environ.get("EPOCHS", 2 if CPU else 20))
MODES = os.environ.get("MODES", "default" if CPU else "default reduce-overhead").split()


def sync() -> None:
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()


def trainer(members: int) -> MPSPTrainer:
    cfgs = [MPSPRunConfig(layers=2, seed=s, n_train=N_TRAIN, n_eval=256, epochs=EPOCHS + 2)
            for s in range(members)]
    return MPSPTrainer(cfgs, Settings(device=DEVICE, micro_batch=N_TRAIN))


def timed_epochs(tr: MPSPTrainer) -> tuple[float, float, torch.Tensor]:
    """(seconds of the first two epochs: warm-up and compile, seconds per later epoch, loss)."""
    start = time.perf_counter()
    for _ in range(2):
        tr.train_epoch()
    sync()
    warm = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(EPOCHS):
        loss = tr.train_epoch()
    sync()
    return warm, (time.perf_counter() - start) / EPOCHS, loss.double().cpu()


def main() -> None:
    name = torch.cuda.get_device_name() if DEVICE.startswith("cuda") else "cpu"
    print(f"compile probe on {name}, torch {torch.__version__}: study S paper config (2L·2H), "
          f"N = {N_TRAIN:,}, full batch in one pass, {EPOCHS} timed epochs")
    print(f"{'E':>5} {'mode':<16} {'seed-epochs/s':>13} {'× eager':>8} {'warm-up s':>9} "
          f"{'max |Δ loss|':>12}")
    for members in MEMBERS:
        _, eager_epoch, eager_loss = timed_epochs(trainer(members))
        print(f"{members:5d} {'eager':<16} {members / eager_epoch:13.1f} {1.0:8.2f} "
              f"{'':>9} {'':>12}", flush=True)
        for mode in MODES:
            tr = trainer(members)
            tr.model = torch.compile(tr.model, mode=mode)
            try:
                warm, epoch, loss = timed_epochs(tr)
            except Exception as err:  # a backend that cannot compile here: say so, go on
                print(f"{members:5d} {mode:<16} failed: {type(err).__name__}: "
                      f"{str(err).splitlines()[0] if str(err) else ''}")
                continue
            print(f"{members:5d} {mode:<16} {members / epoch:13.1f} {eager_epoch / epoch:8.2f} "
                  f"{warm:9.1f} {(loss - eager_loss).abs().max().item():12.1e}", flush=True)
            torch._dynamo.reset()


if __name__ == "__main__":
    main()
