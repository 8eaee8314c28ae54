"""How runs are executed — one settings object for every command (issue 9), never what they
compute: a run's numbers depend on its config alone (DESIGN §1, §3).

The same :class:`Settings` is a recipe's ``execution:`` block (validated with ``file:line``
errors), what ``rulelab train`` / ``reproduce`` / ``sweep`` flags override, what the driver
plans with, what a chunk carries to a worker and what the trainer reads (``device``,
``micro_batch``, ``eval_chunk``, ``precision``). The flags are generated from the fields named
in :attr:`Settings.FLAGS` (:mod:`rulelab.cli.settings_flags`, issue 22): a field's description
is its flag's help and its bounds are the flag's, so an execution flag is added in one place,
here, for all three commands. Epochs are passes over the training set (full
batch: one step each), so ``checkpoint_every`` and ``snapshots`` count the same unit in every
study.
"""

from __future__ import annotations

import os
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field

from rulelab.config.base import StrictTypes

ENGINE_HELP = "resume checkpoints another engine version wrote (recorded on the run)"
QUIET_HELP = ("no progress output (a bar on a terminal; else a line every "
              "$RULELAB_PROGRESS_SECONDS, default 30 s)")


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


DEFAULT_MICRO_BATCH = 512  # examples per member per pass where the engine sizes none


class Settings(StrictTypes):
    """Execution settings (frozen; the flag names are the field names with dashes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # The fields `train`, `sweep` and `reproduce` take as flags, in their help's order (the
    # others are set in a recipe's execution block or by Python: eval_chunk, checkpoint_seconds,
    # and threads, which `sweep --cpus-per-chunk` sets on Ray).
    FLAGS: ClassVar[tuple[str, ...]] = (
        "device", "precision", "max_members", "checkpoint_every", "micro_batch", "memory_gib",
        "track", "track_every", "snapshots", "quiet", "engine", "allow_engine_change", "workers")

    device: str = Field("cpu", description="cpu, cuda, cuda:N or mps: one torch can use on "
                        "this machine")
    # "fp32"; "bf16": each micro-batch's forward (and so its backward) runs under bf16
    # autocast — matmuls in bf16, the per-member loss returned in fp32 — while the master
    # weights, gradients, optimizer and evaluation stay fp32; pays off only where bf16 matmuls
    # are native (rulelab.hardware.native_bf16); "tf32": the training step's fp32 matmuls on
    # a CUDA GPU's TF32 tensor cores (10-bit mantissas in, fp32 sums), all else as fp32.
    # Both change the numbers (rounding); a run records its precision (store.version).
    precision: Literal["fp32", "bf16", "tf32"] = Field(
        "fp32", description="fp32; bf16 autocast where this device multiplies in bf16 "
                            "natively; tf32 matmuls on a CUDA GPU that has them")
    # Examples per member per forward chunk. Fixed per member (not per ensemble) so a member
    # sums its gradient in the same order whatever ensemble it sits in: bitwise equivalence.
    # None: the pass the run's engine version cuts its model's steps into (engine 10, the
    # transformer's on the CPU: sized to the model, Task.pass_examples), else
    # DEFAULT_MICRO_BATCH (rulelab.engine.compiled.micro_batch_for).
    micro_batch: int | None = Field(None, ge=1, le=1_000_000,
                                    description="examples per member per pass",
                                    json_schema_extra={"unset": "the engine's pass for the "
                                                       "model's size, else 512"})
    eval_chunk: int = Field(2048, ge=1, le=1_000_000,
                            description="examples per member per evaluation pass")
    max_members: int = Field(64, ge=1, le=1_000_000, description="most runs per ensemble")
    checkpoint_every: int = Field(500, ge=1, le=10_000_000, description="epochs")
    checkpoint_seconds: float = Field(300.0, gt=0.0, description="also checkpoint this often")
    snapshots: int = Field(0, ge=0, le=10_000,
                           description="keep weights at ~N log-spaced epochs")
    # On the command line a comma list (`--track gradients,fingerprints`).
    track: tuple[str, ...] = Field((), description="analyses during training")
    track_every: str = Field("log", description="log or an epoch interval")
    memory_gib: float | None = Field(None, gt=0.0, description="memory budget per ensemble",
                                     json_schema_extra={"unset": "from free RAM / GPU memory"})
    threads: int | None = Field(None, ge=1, le=4096, description="torch threads per chunk")
    # Chunks trained side by side by the local executor (issue 25). A CPU training step runs on
    # one thread (rulelab.engine.threads: its numbers do not depend on the core count), so the
    # cores train separate chunks; the planner balances them (sweep.planner.BALANCE). Never
    # changes a number: a member equals the same run trained alone.
    workers: int | None = Field(None, ge=1, le=1024, description="chunks trained side by side",
                                json_schema_extra={"unset": "the usable CPU cores on the CPU, "
                                                   "1 on a GPU"})
    quiet: bool = Field(False, description=QUIET_HELP)
    # "eager" (the eager engine version of the run's model: 4, or the one its task declares,
    # Task.eager_engine — the transformer's is 9 on the CPU), "compiled" (engine 5, opt-in,
    # issue 25: each micro-batch's forward and backward compiled whole by torch.compile,
    # rulelab.engine.compiled), or an engine version by number that the model still computes
    # ("8", "7", "4": the transformer's numbers before engines 9, 8 and 7). Engines differ in
    # rounding, so the version is recorded on the run; compiled falls back to eager, with a
    # one-line notice, where no compiler is found.
    engine: str = Field(
        "eager", pattern=r"^(eager|compiled|[0-9]+)$",
        description="eager, compiled (the step fused by torch.compile), or an engine version "
                    "number the model still computes (e.g. 4)")
    # Resume a run whose checkpoint another engine version wrote (store.version); recorded.
    allow_engine_change: bool = Field(False, description=ENGINE_HELP)

    def merged(self, **overrides) -> Settings:
        """These settings with every override that is not None (flags left unset keep the
        recipe's value)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return type(self)(**{**self.model_dump(), **given}) if given else self

    @property
    def largest_pass(self) -> int:
        """The most examples per member a pass can hold under these settings, for memory
        estimates made before any engine is chosen: ``micro_batch``, else the default (an
        engine's own pass is never larger: ``rulelab.models.passes.PASS_MAX``)."""
        return self.micro_batch or DEFAULT_MICRO_BATCH

    @property
    def parallel_chunks(self) -> int:
        """How many chunks the local executor trains at once: ``workers``, or by default the
        usable cores on the CPU and 1 on an accelerator (its numbers stay the same either way)."""
        if self.workers:
            return self.workers
        return usable_cores() if self.device == "cpu" else 1

    @property
    def device_label(self) -> str:
        return self.device if self.precision == "fp32" else f"{self.device} ({self.precision})"
