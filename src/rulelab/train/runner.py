"""Run a list of configs against a lab: register, skip finished, resume, train, store.

Re-running the same list is safe (DESIGN §3): finished runs are skipped, unfinished runs
resume from their last checkpoint. Checkpoints are per run (a member's slice of the ensemble),
so resumed runs regroup freely: runs resuming from the same epoch with the same shapes are
packed into one ensemble again. Because a member's numbers do not depend on the ensemble it
sits in, a killed-and-resumed run ends with exactly the metrics of an uninterrupted one.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rulelab.store import Lab, StoreError
from rulelab.store.atomic import remove_stale_temp_files
from rulelab.store.lock import lab_lock
from rulelab.train.base import EnsembleTrainerBase, TrainOptions
from rulelab.train.tracking import Tracker, track_epochs

FINISHED = ("done", "failed")


def trainer_class(task: str) -> type[EnsembleTrainerBase]:
    """The ensemble trainer for a task name (imported lazily: tasks pull in their models)."""
    if task == "mpsp":
        from rulelab.train.ensemble import EnsembleTrainer

        return EnsembleTrainer
    if task == "modular":
        from rulelab.train.modular import ModularTrainer

        return ModularTrainer
    if task == "digits":
        from rulelab.train.digits import DigitsTrainer

        return DigitsTrainer
    raise ValueError(f"no trainer for task {task!r}")


@dataclass
class RunOptions:
    """How to execute: device, packing, checkpoint cadence."""

    train: TrainOptions
    max_members: int = 64
    checkpoint_every: int = 500  # epochs
    checkpoint_seconds: float = 300.0  # also checkpoint when this much wall time has passed
    snapshots: int = 0  # keep weights at about this many log-spaced epochs (0 = none)
    track: tuple[str, ...] = ()  # analyses run during training (rulelab.train.tracking)
    track_every: str = "log"  # "log" or an epoch interval


def log_spaced_epochs(total: int, n: int) -> set[int]:
    """About ``n`` epochs spaced geometrically from 1 to ``total``, plus 0 and ``total``."""
    if n <= 0:
        return set()
    points = np.unique(np.round(np.geomspace(1, max(total, 1), num=n)).astype(int))
    return {0, total, *points.tolist()}


def plan_ensembles(configs: Sequence, start_epochs: dict[str, int], max_members: int) -> list[list]:
    """Group runs by (shapes, resume epoch) and cut each group into ≤ ``max_members`` chunks."""
    groups: dict[tuple[str, int], list] = defaultdict(list)
    for c in configs:
        groups[c.shape_key(), start_epochs.get(c.run_id, 0)].append(c)
    return [g[i : i + max_members] for g in groups.values() for i in range(0, len(g), max_members)]


def metrics_frame(run_id: str, rows) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["epoch", "split", "metric", "value"])
    frame.insert(0, "run_id", run_id)
    return frame.astype({"epoch": "int64", "value": "float64"})


class Progress:
    """Callbacks a runner reports to (the CLI draws a rich progress bar from these)."""

    def start(self, label: str, total_epochs: int, done_epochs: int, n_members: int) -> None: ...
    def update(self, epoch: int, n_generalized: int, n_failed: int) -> None: ...
    def finish(self) -> None: ...


def memory_cap(configs: Sequence, device: str, micro_batch: int = 512,
               eval_chunk: int = 2048) -> int:
    """Most members an ensemble of ``configs`` may hold within the device's memory budget
    (the sweep planner's estimate, :mod:`rulelab.sweep.estimate`); at least 1."""
    from rulelab.sweep.estimate import memory_budget, run_cost

    budget, _ = memory_budget(device)
    shapes = {c.shape_key(): c for c in configs}
    need = max((run_cost(c, micro_batch, eval_chunk).member_bytes for c in shapes.values()),
               default=1)
    return max(1, budget // max(need, 1))


def run_configs(
    configs: Sequence,
    lab: Lab,
    *,
    experiment: str,
    options: RunOptions,
    progress: Progress | None = None,
    on_ensemble: Callable[[list], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> list[str]:
    """Train every config not yet finished in ``lab``; returns all run ids in order.

    Holds the lab's writer lock (``sweep.lock``, as ``rulelab sweep`` does) from registering
    to the last ensemble: a second ``train`` or a sweep on the same lab is refused at once
    (:class:`StoreError` naming the lock) instead of training the same runs twice.
    ``on_start`` is called once everything is checked, the lock taken and the runs registered.
    """
    unique = list({c.run_id: c for c in configs}.values())
    statuses = lab.statuses([c.run_id for c in unique])
    for c in unique:  # a damaged checkpoint fails here, before anything is written
        if statuses.get(c.run_id) not in FINISHED:
            lab.load_checkpoint(c.run_id)
    with lab_lock(lab.root, command="train", experiment=experiment):
        remove_stale_temp_files(lab.root)  # left by killed writers; live writers' are kept
        lab.register([(c.run_id, c.flat()) for c in unique], experiment)
        if on_start:
            on_start()
        statuses = lab.statuses([c.run_id for c in unique])
        todo = [c for c in unique if statuses.get(c.run_id) not in FINISHED]
        states = {c.run_id: lab.load_checkpoint(c.run_id) for c in todo}
        start = {rid: s["epoch"] for rid, s in states.items() if s is not None}
        progress = progress or Progress()
        for chunk in plan_ensembles(todo, start, options.max_members):
            _train_chunk(chunk, states, lab, options, progress)
            if on_ensemble:
                on_ensemble(chunk)
    return [c.run_id for c in unique]


def _train_chunk(chunk, states, lab: Lab, options: RunOptions, progress: Progress) -> None:
    ids = [c.run_id for c in chunk]
    summaries = train_chunk(chunk, states, lab, options, progress,
                            on_start=lambda: lab.mark_running(ids, options.train.device))
    for c, summary in zip(chunk, summaries, strict=True):
        if summary["failed_reason"]:
            lab.mark_failed(c.run_id, summary["failed_reason"], summary)
        else:
            lab.mark_done(c.run_id, summary)


def train_chunk(chunk, states, files, options: RunOptions, progress: Progress | None = None, *,
                on_start: Callable[[], None] | None = None,
                trainer_cls: type[EnsembleTrainerBase] | None = None) -> list[dict]:
    """Train one ensemble of shape-compatible runs to its last epoch; returns each member's
    summary (``failed_reason`` set for a member that failed).

    Writes only run files through ``files`` (checkpoints, metrics, snapshots, tracked tables:
    a :class:`Lab` or any object with its file methods), never the registry, so it can run in
    a worker process (:mod:`rulelab.sweep`). ``states`` holds each run's checkpoint (or None);
    ``on_start`` runs once the trainer is built, before the first epoch.
    """
    progress = progress or Progress()
    trainer = (trainer_cls or trainer_class(chunk[0].task))(chunk, options.train)
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
    snapshot_at = log_spaced_epochs(trainer.total_epochs, options.snapshots)
    tracker = Tracker(options.track, track_epochs(trainer.total_epochs, options.track_every))
    if any(states.get(c.run_id) is not None for c in chunk):
        tracker.resume(files, ids, trainer.epoch)

    def snapshot() -> None:
        for e, c in enumerate(chunk):
            if trainer.summaries[e].failed_reason is None:
                params = {n: p[e].detach().cpu().clone()
                          for n, p in trainer.model.named_parameters()}
                files.save_snapshot(c.run_id, trainer.epoch, params)

    def checkpoint() -> None:
        for e, c in enumerate(chunk):
            files.save_checkpoint(c.run_id, trainer.member_state(e))
            files.write_metrics(c.run_id, metrics_frame(c.run_id, trainer.rows[e]))
        tracker.flush(files, ids)

    def on_epoch(tr: EnsembleTrainerBase, evaluated: bool) -> None:
        nonlocal last_save
        if tr.epoch in snapshot_at:
            snapshot()
        tracker.maybe_run(tr)
        if evaluated:
            n_gen = sum(bool(s.generalized) for s in tr.summaries)  # S.3: val and adv 100%
            n_fail = sum(s.failed_reason is not None for s in tr.summaries)
            progress.update(tr.epoch, n_gen, n_fail)
        due = tr.epoch > 0 and tr.epoch % options.checkpoint_every == 0
        if due or time.monotonic() - last_save > options.checkpoint_seconds:
            checkpoint()
            last_save = time.monotonic()

    trainer.fit(on_epoch=on_epoch)
    checkpoint()  # the final state: analyses load final weights from here
    progress.finish()
    return [s.as_dict() for s in trainer.summaries]
