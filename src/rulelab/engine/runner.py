"""Train one ensemble of runs against a lab's files: resume, checkpoint, snapshot, track.

:func:`train_chunk` is what every executor runs for one chunk (:mod:`rulelab.sweep.chunk`):
it loads each run's checkpoint, trains to the last epoch, and writes checkpoints, metrics,
weight snapshots and tracked analyses through ``files`` — never the registry, which only the
driver writes (:mod:`rulelab.sweep.driver`). Checkpoints are per run (a member's slice of the
ensemble), so resumed runs regroup freely (:mod:`rulelab.engine.groups`): runs resuming from
the same epoch with the same shapes form one ensemble again. Because a member's numbers do not
depend on the ensemble it sits in, a killed-and-resumed run ends with exactly the metrics of an
uninterrupted one (DESIGN §1, §3) — within one engine version: a checkpoint another engine
version wrote is refused (one line naming both) unless ``allow_engine_change``, which records
the switch (:func:`engine_switches`, issue 25). The engine is the one the settings train the
chunk's configs with (:func:`rulelab.engine.compiled.engine_in_use`: ``Settings.engine``, and
the eager engine version the task declares for them).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from rulelab.engine.base import EnsembleTrainerBase
from rulelab.engine.compiled import engine_in_use, engines_for, micro_batch_for
from rulelab.engine.groups import group_runs, plan_ensembles
from rulelab.engine.live_metrics import MetricFlush
from rulelab.engine.tracking import Tracker, track_epochs
from rulelab.settings import Settings
from rulelab.store import LabDir, StoreError, checkpoints
from rulelab.store.version import (
    ENGINE_VERSION,
    ENGINES,
    engine_of,
    engine_refusal,
    micro_batch_refusal,
    precision_refusal,
)
from rulelab.study_registry import task


def log_spaced_epochs(total: int, n: int) -> set[int]:
    """About ``n`` epochs spaced geometrically from 1 to ``total``, plus 0 and ``total``."""
    if n <= 0:
        return set()
    points = np.unique(np.round(np.geomspace(1, max(total, 1), num=n)).astype(int))
    return {0, total, *points.tolist()}


def metrics_frame(run_id: str, rows) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["epoch", "split", "metric", "value"])
    frame.insert(0, "run_id", run_id)
    return frame.astype({"epoch": "int64", "value": "float64"})


class EpochProgress:
    """Callbacks one ensemble reports to (a progress bar draws from these)."""

    def start(self, label: str, total_epochs: int, done_epochs: int, n_members: int) -> None: ...
    def update(self, epoch: int, n_generalized: int, n_failed: int) -> None: ...  # evaluated
    def beat(self) -> None: ...  # every epoch: where a chunk side by side hears it must stop
    def finish(self) -> None: ...


def engine_history(state: dict, current: int = ENGINE_VERSION) -> str:
    """``"1 from epoch 0, 3 from epoch 300"``: the engines a run resumed now under engine
    version ``current`` has trained under."""
    engines = [tuple(p) for p in state.get("engines", [(0, engine_of(state))])]
    if engines[-1][1] != current:
        engines.append((int(state["epoch"]), current))
    return ", ".join(f"{v} from epoch {ep}" for ep, v in engines)


def engine_switches(files: LabDir, run_ids, allow: bool, current: int = ENGINE_VERSION,
                    engines: dict[str, int] = ENGINES,
                    micro_batch: dict[str, int] | None = None,
                    precision: str | None = None) -> dict[str, str]:
    """``{run_id: engine history}`` for the runs whose checkpoint (past epoch 0) an engine
    version other than ``current`` wrote. Without ``allow`` the first one is refused:
    :class:`StoreError`, one line naming both versions, before anything is trained
    (``engines``: the versions ``Settings.engine`` trains these runs with,
    :func:`~rulelab.engine.compiled.engines_for`). A checkpoint trained in other micro-batches
    than ``micro_batch[run_id]`` (:func:`~rulelab.engine.compiled.micro_batch_for`), or in
    another ``precision``, is refused whatever ``allow`` says
    (:mod:`rulelab.store.version`: ``micro_batch_refusal``, ``precision_refusal``; passing the
    recorded value gives its numbers back). Unreadable checkpoints are skipped (the driver
    restarts those runs)."""
    out = {}
    for run_id in run_ids:
        path = checkpoints.checkpoint_path(files.checkpoints_dir, run_id)
        if not path.is_file():
            continue
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            epoch, recorded = int(state["epoch"]), engine_of(state)
        except Exception:  # noqa: BLE001 — damaged: judged by the driver's own check
            continue
        if micro_batch is not None and (why := micro_batch_refusal(run_id, state,
                                                                   micro_batch[run_id])):
            raise StoreError(why)
        if precision is not None and (why := precision_refusal(run_id, state, precision)):
            raise StoreError(why)
        if recorded == current or epoch == 0:
            continue
        if not allow:
            raise StoreError(engine_refusal(run_id, recorded, epoch, current, engines))
        out[run_id] = engine_history(state, current)
    return out


def trainer_class(task_name: str) -> type[EnsembleTrainerBase]:
    """The ensemble trainer of a task (declared by its study: ``Task.trainer``)."""
    return task(task_name).trainer_class()


def train_chunk(chunk, states, files: LabDir, settings: Settings,
                progress: EpochProgress | None = None, *,
                on_start: Callable[[], None] | None = None) -> list[dict]:
    """Train one ensemble of shape-compatible runs to its last epoch; returns each member's
    summary (``failed_reason`` set for a member that failed).

    Writes only run files through ``files`` (checkpoints, metrics, snapshots, tracked tables:
    a :class:`~rulelab.store.LabDir`, or a :class:`~rulelab.store.Lab`, which is one), so it
    can run in a worker process. ``states`` holds each run's checkpoint (or None);
    ``on_start`` runs once the trainer is built, before the first epoch.
    """
    progress = progress or EpochProgress()
    current = engine_in_use(settings, chunk[0])  # one shape: one engine for every member
    for c in chunk:  # before any work: a state of another engine only where allowed
        state = states.get(c.run_id)
        if state is not None and state["epoch"] > 0 and engine_of(state) != current \
                and not settings.allow_engine_change:
            raise StoreError(engine_refusal(c.run_id, engine_of(state), int(state["epoch"]),
                                            current, engines_for(c)))
        if state is not None and (why := micro_batch_refusal(c.run_id, state,
                                                             micro_batch_for(settings, c))
                                  or precision_refusal(c.run_id, state, settings.precision)):
            raise StoreError(why)
    trainer = trainer_class(chunk[0].task)(chunk, settings)
    for e, c in enumerate(chunk):
        if states.get(c.run_id) is not None:
            try:
                trainer.load_member_state(e, states[c.run_id])
            except (KeyError, RuntimeError, TypeError) as err:  # a state of another shape
                raise StoreError(f"checkpoint of run {c.run_id} does not fit its config "
                                 f"({type(err).__name__}: {err}); move "
                                 f"checkpoints/{c.run_id}.pt away to train it from the "
                                 "start") from None
    ids = [c.run_id for c in chunk]
    if on_start:
        on_start()
    progress.start(f"{chunk[0].label()} × {len(chunk)}", trainer.total_epochs, trainer.epoch,
                   len(chunk))
    last_save = time.monotonic()
    snapshot_at = log_spaced_epochs(trainer.total_epochs, settings.snapshots)
    spec = task(chunk[0].task)
    tracker = Tracker({n: spec.tracker(n) for n in settings.track},
                      track_epochs(trainer.total_epochs, settings.track_every))
    if any(states.get(c.run_id) is not None for c in chunk):
        tracker.resume(files, ids, trainer.epoch)

    def snapshot() -> None:
        for e, c in enumerate(chunk):
            if trainer.summaries[e].failed_reason is None:
                params = {n: p[e].detach().cpu().clone()
                          for n, p in trainer.model.named_parameters()}
                files.save_snapshot(c.run_id, trainer.epoch, params)

    def checkpoint() -> None:
        # The checkpoints are the commit point, so they are written last: a kill before them
        # resumes from the previous ones and recomputes what was written since; written first,
        # a kill between them and the tracked tables lost the points tracked in between.
        for e, c in enumerate(chunk):
            files.write_metrics(c.run_id, metrics_frame(c.run_id, trainer.rows[e]))
        tracker.flush(files, ids)
        for e, c in enumerate(chunk):
            files.save_checkpoint(c.run_id, trainer.member_state(e))
        flush.written()

    flush = MetricFlush()  # metrics between checkpoints too: readable while training
    beat = getattr(progress, "beat", None) or (lambda: None)  # callbacks without one: none

    def write_metrics() -> None:
        for e, c in enumerate(chunk):
            files.write_metrics(c.run_id, metrics_frame(c.run_id, trainer.rows[e]))

    def on_epoch(tr: EnsembleTrainerBase, evaluated: bool) -> None:
        nonlocal last_save
        if tr.epoch in snapshot_at:
            snapshot()
        tracker.maybe_run(tr)
        beat()
        if evaluated:
            flush.maybe(write_metrics)
            n_gen = sum(bool(s.generalized) for s in tr.summaries)
            n_fail = sum(s.failed_reason is not None for s in tr.summaries)
            progress.update(tr.epoch, n_gen, n_fail)
        due = tr.epoch > 0 and tr.epoch % settings.checkpoint_every == 0
        if due or time.monotonic() - last_save > settings.checkpoint_seconds:
            checkpoint()
            last_save = time.monotonic()

    trainer.fit(on_epoch=on_epoch)
    checkpoint()  # the final state: analyses load final weights from here
    progress.finish()
    return [s.as_dict() for s in trainer.summaries]


__all__ = ["EpochProgress", "engine_switches", "group_runs", "log_spaced_epochs",
           "metrics_frame", "plan_ensembles", "train_chunk", "trainer_class"]
