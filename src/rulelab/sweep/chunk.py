"""The unit of work every executor runs: one chunk (DESIGN §4, "the same chunk spec runs
unchanged on both executors").

A :class:`ChunkSpec` is plain data (the runs' config objects, the lab path, the execution
:class:`~rulelab.settings.Settings`), so it pickles to a Ray worker as easily as it runs
in-process. The configs are the ones the recipe built (frozen pydantic models: pickling is their
one serialized form on the way to a worker), never rebuilt from a flat dict (issue 22).
:func:`run_chunk` loads each run's checkpoint from the lab's files, trains, writes checkpoints
and metrics through :class:`LabFiles`, and returns one :class:`RunOutcome` per run. It never
touches the registry: the driver does.

Faults:
- a member whose loss goes non-finite is frozen and failed by the trainer, its chunk goes on;
- an exception while training a chunk (bad data for one member, out of memory, …) splits the
  chunk in halves, each retried from its members' last checkpoints; a single run that still
  raises is failed with the exception as its reason. Members train as they would alone, so
  the others end with their uninterrupted numbers. Lab I/O errors stop the sweep instead;
- a killed chunk process leaves per-run checkpoints: a retry (Ray) or a re-run resumes them,
  regrouped by epoch if a kill landed between two members' checkpoint writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rulelab.settings import Settings
from rulelab.store import StoreError, checkpoints, metrics, tables
from rulelab.store.lab import Lab


@dataclass(frozen=True)
class ChunkSpec:
    """Everything a worker needs to train one chunk (picklable, no open handles)."""

    index: int
    configs: tuple  # the runs' config objects, as the recipe built them
    lab: str  # lab directory (shared by driver and workers)
    settings: Settings = Settings()
    label: str = ""

    @property
    def run_ids(self) -> list[str]:
        return [c.run_id for c in self.configs]


@dataclass
class RunOutcome:
    """How one run of a chunk ended: ``done`` or ``failed`` (with a reason)."""

    run_id: str
    status: str
    summary: dict = field(default_factory=dict)
    error: str | None = None


class LabFiles:
    """The run files of a lab (checkpoints, metrics, snapshots, analysis tables), without the
    registry: what a worker may write. Same methods as :class:`rulelab.store.Lab`."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.metrics_dir = self.root / "metrics"
        self.checkpoints_dir = self.root / "checkpoints"
        self.analyses_dir = self.root / "analyses"

    def save_checkpoint(self, run_id: str, state: dict) -> None:
        checkpoints.save_checkpoint(self.checkpoints_dir, run_id, state)

    def load_checkpoint(self, run_id: str) -> dict | None:
        return checkpoints.load_checkpoint(self.checkpoints_dir, run_id)

    def write_metrics(self, run_id, frame) -> None:
        metrics.write_metrics(self.metrics_dir, run_id, frame)

    save_snapshot = Lab.save_snapshot
    write_table = Lab.write_table
    read_run_table = Lab.read_run_table

    def read_table(self, name: str):
        return tables.read_table(self.analyses_dir, name)


def checkpoint_epoch(files: LabFiles, run_id: str) -> int:
    """The epoch a run would resume from (0 without a checkpoint); memory-mapped, cheap."""
    import torch

    path = checkpoints.checkpoint_path(files.checkpoints_dir, run_id)
    if not path.is_file():
        return 0
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:
        raise StoreError(f"corrupt checkpoint {path}: {type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''}") from None
    return int(state["epoch"])


def run_chunk(spec: ChunkSpec, progress=None) -> list[RunOutcome]:
    """Train ``spec`` to its last epoch (resuming each run from its checkpoint)."""
    import torch

    if spec.settings.threads:
        torch.set_num_threads(spec.settings.threads)
    return _train(list(spec.configs), LabFiles(spec.lab), spec, progress)


def run_chunk_plain(spec: ChunkSpec) -> list[dict]:
    """:func:`run_chunk` with plain-dict results (what a Ray task returns to the driver); its
    progress goes to a file in the lab that the driver reads (:mod:`rulelab.sweep.live`)."""
    from rulelab.sweep.live import ProgressFile, progress_path

    progress = ProgressFile(progress_path(spec.lab, spec.index))
    return [o.__dict__ for o in run_chunk(spec, progress)]


def _train(configs: list, files: LabFiles, spec: ChunkSpec, progress) -> list[RunOutcome]:
    from rulelab.train.groups import group_runs
    from rulelab.train.runner import train_chunk  # torch: only where chunks train

    states = {c.run_id: files.load_checkpoint(c.run_id) for c in configs}
    start = {rid: s["epoch"] for rid, s in states.items() if s is not None}
    outcomes: list[RunOutcome] = []
    for group in group_runs(configs, start).values():
        reason = None
        try:
            summaries = train_chunk(group, states, files, spec.settings, progress)
        except (StoreError, OSError):
            raise  # the lab itself is in trouble: stop the sweep with a clear error
        except Exception as err:  # a member's data, memory, …: isolate it by halving
            reason = _reason(err)
        if reason is not None:  # outside the except block: the failed trainer is freed
            outcomes += _isolate(group, reason, files, spec, progress)
            continue
        for c, summary in zip(group, summaries, strict=True):
            reason = summary.get("failed_reason")
            outcomes.append(RunOutcome(c.run_id, "failed" if reason else "done", summary,
                                       reason))
    return outcomes


def _reason(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _isolate(group: list, reason: str, files: LabFiles, spec: ChunkSpec,
             progress) -> list[RunOutcome]:
    """Retry the halves of a chunk that raised, from their members' last checkpoints."""
    if progress is not None:
        progress.finish()
    if spec.settings.device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()  # e.g. after out-of-memory: halves may fit
    if len(group) == 1:
        return [RunOutcome(group[0].run_id, "failed", {}, reason)]
    half = len(group) // 2
    return (_train(group[:half], files, spec, progress)
            + _train(group[half:], files, spec, progress))
