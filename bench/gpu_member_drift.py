"""How far a member of an ensemble drifts from the same run trained alone on a device.

On the CPU a member equals its solo run bitwise (the trainers' tests). On CUDA the member ≡
solo test (tests/engine/train/test_device_equivalence.py) failed on study S at rtol 1e-6 on the
first H200 run (2026-11-30): cuBLAS and the reduction kernels may sum in another order when the
member axis is 3 long instead of 1. This script measures the size of that drift, per
parameter, after 1 and after 30 epochs, with and without torch's deterministic algorithms, so
the tolerance a device test asserts rests on a measurement:

  max |Δw| / max |w| per parameter tensor (the member vs its solo run), and the largest
  difference in any metric row (accuracies are counts over the split; a flipped example is
  1 / n_split).

``b_K`` gets a zero gradient in exact arithmetic (softmax is invariant to a key bias), so
Adam turns its rounding noise into ±lr steps: it is listed, but apart.

  DEVICE=cuda python bench/gpu_member_drift.py
"""

from __future__ import annotations

import os

import torch

from rulelab.engine.runner import trainer_class
from rulelab.settings import Settings
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

DEVICE = os.environ.get("DEVICE", "cuda")
S_TINY = dict(seq_len=5, vocab=12, n_train=256, n_eval=64, d_model=16, d_mlp=32, heads=2,
              layers=2, eval_every=10, lr=3e-3)
M_TINY = dict(p=11, width=16, eval_every=10, log_eval_steps=5, lr=3e-3)


def weight_drift(model_a, e: int, model_b, f: int) -> tuple[float, float]:
    """Largest max |Δw| / max |w| over parameter tensors (b_K apart) of member e vs member f."""
    worst, bk = 0.0, 0.0
    for (name, p), (_, q) in zip(model_a.named_parameters(), model_b.named_parameters(),
                                 strict=True):
        a, b = p[e].detach().double(), q[f].detach().double()
        rel = ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()
        if name.endswith("b_K"):
            bk = max(bk, rel)
        else:
            worst = max(worst, rel)
    return worst, bk


def drift(members, micro_batch: int) -> list[tuple[str, float, float, float, float]]:
    """Per member: (label, weight drift excl. b_K, b_K drift, worst metric-row difference,
    weight drift between two solo runs of the same config: same config + seed → same run?)."""
    opts = Settings(device=DEVICE, micro_batch=micro_batch)
    cls = trainer_class(members[0].task)
    ens = cls(members, opts)
    ens.fit()
    out = []
    for e, cfg in enumerate(members):
        alone, again = cls([cfg], opts), cls([cfg], opts)
        alone.fit()
        again.fit()
        worst, bk = weight_drift(ens.model, e, alone.model, 0)
        rerun = max(weight_drift(again.model, 0, alone.model, 0))
        rows = max((abs(x[3] - y[3]) for x, y in zip(ens.rows[e], alone.rows[0], strict=True)
                    if x[3] == x[3] and y[3] == y[3]), default=0.0)
        out.append((f"#{e} seed {cfg.seed}", worst, bk, rows, rerun))
    return out


def main() -> None:
    print(f"device {DEVICE}, torch {torch.__version__}")
    print(f"{'study':<6} {'epochs':>6} {'determ.':>8} {'member':<26} {'max rel Δw':>11} "
          f"{'b_K rel Δ':>10} {'max Δ metric':>13} {'solo rerun Δw':>14}")
    for deterministic in (False, True):
        torch.use_deterministic_algorithms(deterministic, warn_only=True)
        for epochs in (1, 30):
            cases = {
                "S": ([MPSPRunConfig(**{**S_TINY, "epochs": epochs, "ratio": r,
                                         "weight_decay": w, "seed": s})
                       for r, w, s in [(0.5, 0.1, 0), (0.9, 0.3, 1), (1.0, 0.0, 2)]], 96),
                "M": ([ModularRunConfig(**{**M_TINY, "epochs": epochs, "noise": a,
                                            "weight_decay": w, "seed": s})
                       for a, w, s in [(0.0, 0.1, 0), (0.5, 0.3, 1), (0.8, 0.0, 2)]], 24),
            }
            for study, (members, mb) in cases.items():
                for label, w, bk, rows, rerun in drift(members, mb):
                    print(f"{study:<6} {epochs:>6} {str(deterministic):>8} {label:<26} "
                          f"{w:11.2e} {bk:10.2e} {rows:13.2e} {rerun:14.2e}", flush=True)


if __name__ == "__main__":
    main()
