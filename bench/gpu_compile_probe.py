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

    python bench/gpu_compile_probe.py                  # cuda: E = 64, fp32 and bf16, ≈ 4 min
    DEVICE=cpu python bench/gpu_compile_probe.py       # smoke: tiny sizes (compiles C++)

Modes: ``default`` and ``reduce-overhead`` compile the model (its own forward, engine 1's
layout; the loss and the optimizer stay eager); ``engine`` is the compiled engine as it ships
(``--engine compiled``, engine 5: the loss and the forward compiled together, tracing
:mod:`rulelab.models.fused_forward`); ``engine-plain`` is that engine tracing the model's own
forward instead (the layout ``default`` compiles): between them they say whether a gap between
``default`` and ``engine`` is the traced layout's.

Environment: DEVICE (cuda), MEMBERS ("64"), N_TRAIN (16384), EPOCHS (10), MODES
("engine-plain engine default"), PRECISIONS ("fp32 bf16"; each as ``--precision``).
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
# E = 2 and reduce-overhead were measured on the H200 on 2026-12-04 (bench/gpu-runs/): CUDA graphs
# gave 1.14× at E = 2 and nothing at 64; the open question is engine 5's traced layout.
MEMBERS = [int(e) for e in os.environ.get("MEMBERS", "2" if CPU else "64").split()]
N_TRAIN = int(os.environ.get("N_TRAIN", 512 if CPU else 16384))
EPOCHS = int(os.environ.get("EPOCHS", 2 if CPU else 10))
MODES = os.environ.get("MODES", "default" if CPU else "engine-plain engine default").split()
PRECISIONS = os.environ.get("PRECISIONS", "fp32" if CPU else "fp32 bf16").split()
PLAIN_ENGINE = 4  # a model engine whose forward is the model's own (not fused_forward)


def sync() -> None:
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()


def trainer(members: int, precision: str = "fp32", mode: str = "eager") -> MPSPTrainer:
    """Study S's paper config as one ensemble, trained as ``mode`` says (the module's doc)."""
    cfgs = [MPSPRunConfig(layers=2, seed=s, n_train=N_TRAIN, n_eval=256, epochs=EPOCHS + 2)
            for s in range(members)]
    engine = "compiled" if mode.startswith("engine") else "eager"
    tr = MPSPTrainer(cfgs, Settings(device=DEVICE, micro_batch=N_TRAIN, precision=precision,
                                    engine=engine))
    if mode == "engine-plain":
        tr.model.engine = PLAIN_ENGINE  # traced by the compiled step: the model's own forward
    elif not mode.startswith("engine") and mode != "eager":
        tr.model = torch.compile(tr.model, mode=mode)
    return tr


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
    print(f"{'E':>5} {'prec':>5} {'mode':<16} {'seed-epochs/s':>13} {'× eager':>8} "
          f"{'warm-up s':>9} {'max |Δ loss|':>12}")
    for members in MEMBERS:
        for precision in PRECISIONS:
            _, eager_epoch, eager_loss = timed_epochs(trainer(members, precision))
            print(f"{members:5d} {precision:>5} {'eager':<16} {members / eager_epoch:13.1f} "
                  f"{1.0:8.2f} {'':>9} {'':>12}", flush=True)
            for mode in MODES:
                try:
                    warm, epoch, loss = timed_epochs(trainer(members, precision, mode))
                except Exception as err:  # a backend that cannot compile here: say so, go on
                    print(f"{members:5d} {precision:>5} {mode:<16} failed: "
                          f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:160]}")
                    continue
                finally:
                    torch._dynamo.reset()
                print(f"{members:5d} {precision:>5} {mode:<16} {members / epoch:13.1f} "
                      f"{eager_epoch / epoch:8.2f} {warm:9.1f} "
                      f"{(loss - eager_loss).abs().max().item():12.1e}", flush=True)


if __name__ == "__main__":
    main()
