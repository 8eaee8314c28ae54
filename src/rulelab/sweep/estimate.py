"""Estimates of a run's memory and compute, from its shapes alone (no tensors are built).

Each task declares its cost model (``Task.cost``, in its study's package); they share these
terms and :class:`RunCost`.

Memory per member (bytes) = parameters, gradients and Adam state (4 × params × 4 B)
  + the larger of the training working set (activations of one micro-batch kept for backward)
    and the evaluation working set (one evaluation chunk, no graph)
  + the member's data (stacked tensors and the cached numpy copy)
  + the metric rows the trainer keeps in memory until the end (≈ 100 B a row).
The activation terms are counted per token and fitted on this machine's CPU to within ~15%
(measured peak RSS of a 1L·1H and a 2L·2H ensemble; ``ACTIVATION_SLACK`` covers the rest).

Compute = 3 × forward matmul FLOPs (2 per multiply-add; gathers, LayerNorm, elementwise ops
not counted) per training example, + forward FLOPs of every evaluation.
Time = FLOPs over an *assumed* sustained throughput + passes × a fixed cost per pass (Python
and kernel launches, which dominate small models: narrow MLPs, tiny test configs).
All of these are estimates and are printed so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# Assumed sustained throughputs (FLOP/s). CPU: measured ~60 GFLOP/s for the 2L d=64 ensemble on
# this 2-core machine (bench/train_throughput.py). GPU: a task's own measured rates where its
# study declares them (``Task.gpu_flops``, ``Task.gpu_pass_s``; bench/gpu_check.sh), else the
# slowest of the declared ones (:func:`speed`).
CPU_FLOPS = 60e9
# Fixed cost of one forward(+backward) pass of an ensemble, whatever its size: ~3 ms on this CPU
# (tiny models in the test suite).
CPU_PASS_S = 3e-3
ACTIVATION_SLACK = 1.15
ROW_BYTES = 100
GiB = 2**30


@dataclass(frozen=True)
class RunCost:
    """Shape-derived costs of one run (one ensemble member)."""

    member_bytes: int  # peak working set of one member inside an ensemble
    flops_per_epoch: float  # training, all steps of one epoch
    flops_per_eval: float  # one evaluation of every split
    passes_per_epoch: int  # forward/backward passes an ensemble makes per epoch (micro-batches)
    passes_per_eval: int  # forward passes of one evaluation (evaluation chunks)
    eval_epochs: tuple[int, ...] | None = None  # explicit schedule (study M); None: every k
    step_examples: int = 0  # examples per member in one optimizer step (0: not stated)

    def n_evals(self, cfg, from_epoch: int = 0) -> int:
        if self.eval_epochs is not None:
            return sum(1 for e in self.eval_epochs if e > from_epoch)
        epochs = max(cfg.epochs - from_epoch, 0)
        return epochs // cfg.eval_every + (from_epoch == 0)

    def flops(self, cfg, from_epoch: int = 0) -> float:
        """FLOPs left for ``cfg`` when resuming at ``from_epoch``."""
        epochs = max(cfg.epochs - from_epoch, 0)
        return epochs * self.flops_per_epoch + self.n_evals(cfg, from_epoch) * self.flops_per_eval

    def passes(self, cfg, from_epoch: int = 0) -> int:
        """Passes left for the ensemble ``cfg`` sits in, whatever its size: small models are
        bound by the fixed cost of a pass (Python, kernel launches), not by FLOPs."""
        epochs = max(cfg.epochs - from_epoch, 0)
        return epochs * self.passes_per_epoch + self.n_evals(cfg, from_epoch) * \
            self.passes_per_eval


def run_cost(cfg, micro_batch: int = 512, eval_chunk: int = 2048) -> RunCost:
    """The cost of one run, by its task's cost model (declared by its study: ``Task.cost``)."""
    from rulelab.study_registry import task

    return task(cfg.task).cost(cfg, micro_batch, eval_chunk)


# --- budgets ----------------------------------------------------------------------------------
def memory_budget(device: str, gib: float | None = None) -> tuple[int, str]:
    """Bytes one chunk may use on ``device``, and how that was decided (for the plan)."""
    if gib is not None:
        return int(gib * GiB), f"{gib:g} GiB (--memory-gib)"
    if device.startswith("cuda"):
        try:
            import torch

            free, total = torch.cuda.mem_get_info(torch.device(device))
            return int(0.8 * free), f"80% of free GPU memory ({free / GiB:.1f} of " \
                                    f"{total / GiB:.1f} GiB)"
        except Exception:  # no GPU here (e.g. planning a GPU sweep on a laptop)
            return 80 * GiB, "80 GiB (assumed GPU; none visible here)"
    avail = _mem_available()
    return int(0.5 * avail), f"50% of available RAM ({avail / GiB:.1f} GiB)"


def available_memory(device: str) -> tuple[int | None, str]:
    """Bytes free on ``device`` now (None when unknown: planning for a GPU not visible here),
    and what that figure is."""
    if device.startswith("cuda"):
        try:
            import torch

            free, _ = torch.cuda.mem_get_info(torch.device(device))
            return int(free), f"free memory of {device}"
        except Exception:
            return None, "unknown GPU memory"
    return _mem_available(), "available RAM"


def oversized(configs, device: str, micro_batch: int = 512, eval_chunk: int = 2048
              ) -> str | None:
    """Why a single run of ``configs`` cannot fit ``device``'s memory (one line naming the
    shape flags), or None. Checked before anything is registered or allocated: an ensemble of
    one member is the least a run needs, and the estimate errs on the generous side."""
    available, note = available_memory(device)
    if available is None:
        return None
    seen: set[str] = set()
    for c in configs:
        key = c.shape_key()
        if key in seen:
            continue
        seen.add(key)
        need = run_cost(c, micro_batch, eval_chunk).member_bytes
        if need > available:
            from rulelab.study_registry import task

            flags = task(c.task).shape_flags
            return (f"{flags}: one run of {c.label()} needs about {human_bytes(need)} "
                    f"(estimate), more than the {human_bytes(available)} of {note}; "
                    f"use a smaller {flags.split('/')[0]}")
    return None


def _mem_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 8 * GiB


@dataclass(frozen=True)
class Speed:
    """An assumed device speed: sustained FLOP/s plus a fixed cost per pass."""

    flops: float
    pass_s: float
    note: str

    def seconds(self, flops: float, passes: int) -> float:
        return flops / self.flops + passes * self.pass_s


def speed(device: str, precision: str = "fp32", task: str | None = None) -> Speed:
    """The planner's speed on ``device`` in ``precision``; on a GPU, ``task``'s measured rates
    where its study declares them (:class:`rulelab.study.Task`), else the defaults above."""
    if device.startswith("cuda"):
        from rulelab.study_registry import tasks

        measured = [t for t in tasks().values() if precision in t.gpu_flops]
        spec = next((t for t in measured if t.name == task), None)
        if spec is not None:
            flops, pass_s = spec.gpu_flops[precision], spec.gpu_pass_s
            where = f"task {task}'s, measured on {spec.gpu_measured}"
        else:  # the slowest measured: a task with none of its own is not promised more
            flops = min(t.gpu_flops[precision] for t in measured)
            pass_s = max(t.gpu_pass_s for t in measured)
            where = "the default: the slowest task measured"
        return Speed(flops, pass_s, f"GPU at {flops / 1e12:.1f} TFLOP/s {precision} + "
                     f"{pass_s * 1e3:g} ms a pass ({where})")
    return Speed(CPU_FLOPS, CPU_PASS_S, f"this CPU at {CPU_FLOPS / 1e9:.0f} GFLOP/s + "
                 f"{CPU_PASS_S * 1e3:g} ms a pass")


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def human_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    if s < 730 * 86400:
        return f"{s / 86400:.0f} days"
    return f"{s / 86400 / 365:.1f} years"
