"""The unit of work every executor runs: one chunk (DESIGN §4, "the same chunk spec runs
unchanged on both executors").

A :class:`ChunkSpec` is plain data (the runs' config objects, the lab's
:class:`~rulelab.store.LabDir`, the execution
:class:`~rulelab.settings.Settings`), so it pickles to a Ray worker as easily as it runs
in-process. The configs are the ones the recipe built (frozen pydantic models: pickling is their
one serialized form on the way to a worker), never rebuilt from a flat dict (issue 22).
:func:`run_chunk` loads each run's checkpoint from the lab's files, trains, writes checkpoints
and metrics through the ``LabDir``, and returns one :class:`RunOutcome` per run. It never
touches the registry (a ``LabDir`` cannot reach it): the driver does.

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

from rulelab.settings import Settings
from rulelab.store import StoreError, checkpoints
from rulelab.store.lab_dir import LabDir


@dataclass(frozen=True)
class ChunkSpec:
    """Everything a worker needs to train one chunk (picklable, no open handles)."""

    index: int
    configs: tuple  # the runs' config objects, as the recipe built them
    lab: LabDir  # the lab's files (a folder shared by the driver and its workers)
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


def checkpoint_epoch(files: LabDir, run_id: str) -> int:
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
    return _train(list(spec.configs), spec.lab, spec, progress)


def run_chunk_plain(spec: ChunkSpec) -> list[dict]:
    """:func:`run_chunk` with plain-dict results (what a Ray task returns to the driver); its
    progress goes to a file in the lab that the driver reads (:mod:`rulelab.sweep.live`)."""
    from rulelab.sweep.live import ProgressFile, progress_path

    progress = ProgressFile(progress_path(spec.lab, spec.index))
    return [o.__dict__ for o in run_chunk(spec, progress)]


def _train(configs: list, files: LabDir, spec: ChunkSpec, progress) -> list[RunOutcome]:
    from rulelab.engine.groups import group_runs
    from rulelab.engine.runner import train_chunk  # torch: only where chunks train

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


def _isolate(group: list, reason: str, files: LabDir, spec: ChunkSpec,
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
