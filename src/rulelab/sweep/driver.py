"""The driver: recipe → registry → plan → executor → registry (DESIGN §3–4) — the one run
path of ``rulelab train`` (a recipe made from its flags), ``reproduce`` (a study's recipe) and
``sweep`` (any recipe).

The driver is the registry's one writer: it registers every run of the recipe, plans the runs
not yet finished, hands chunk specs to an executor and records what comes back (``running``
when a chunk starts, then ``done`` or ``failed`` with its reason; a chunk lost with its worker
goes back to ``pending``). A lock file (``<lab>/sweep.lock``, released by the OS if the driver
dies; ``rulelab train`` takes it too) keeps two writers off one lab and tells ``rulelab status``
whether a sweep is active. Before it takes the lock it reads every unfinished run's checkpoint;
a damaged one is moved aside into ``<lab>/damaged/`` and its run restarts (and says so).

Re-running a sweep continues it: finished runs are skipped, the others resume from their last
per-run checkpoint, regrouped by epoch. A run's numbers do not depend on its chunk, so a sweep
killed at any point and re-run ends with the metrics of an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from rulelab.settings import Settings
from rulelab.store import Lab, LabDir, StoreError
from rulelab.store.atomic import remove_stale_temp_files
from rulelab.store.errors import first_line
from rulelab.store.lock import lab_lock, lock_holder
from rulelab.store.paths import move_aside
from rulelab.store.registry import Registry
from rulelab.sweep.chunk import ChunkSpec, RunOutcome, checkpoint_epoch
from rulelab.sweep.estimate import memory_budget
from rulelab.sweep.planner import Plan, cell_key, plan_chunks
from rulelab.sweep.recipe import Recipe

FINISHED = ("done", "failed")


@dataclass
class SweepResult:
    plan: Plan
    done: int = 0
    failed: int = 0
    lost: list[str] = field(default_factory=list)  # reasons, one per lost chunk


def make_plan(recipe: Recipe, lab: Lab | None, settings: Settings, *,
              interleave_seeds: bool = True, workers: int = 1) -> Plan:
    """The plan for the runs of ``recipe`` not finished in ``lab`` (None: a new lab), for
    ``workers`` chunks trained side by side: each gets a share of the memory budget, and
    ensembles are cut so there are at least ``workers`` chunks where there are enough runs."""
    configs = recipe.configs()
    statuses = lab.statuses([c.run_id for c in configs]) if lab else {}
    todo = [c for c in configs if statuses.get(c.run_id) not in FINISHED]
    start = {c.run_id: _resume_epoch(lab, c.run_id) for c in todo} if lab else {}
    budget, note = memory_budget(settings.device, settings.memory_gib)
    if workers > 1:
        budget, note = budget // workers, f"{note}, shared by {workers} chunks at once"
    chunks, caps = plan_chunks(todo, start, max_members=settings.max_members,
                               budget_bytes=budget, micro_batch=settings.largest_pass,
                               eval_chunk=settings.eval_chunk, interleave_seeds=interleave_seeds,
                               min_chunks=workers)
    counts = list(statuses.values())
    return Plan(recipe.experiment, recipe.task, len(configs), len({cell_key(c) for c in configs}),
                counts.count("done"), counts.count("failed"), chunks, budget, note,
                settings.max_members, caps)


def _resume_epoch(files: LabDir, run_id: str) -> int:
    """:func:`checkpoint_epoch`, with a checkpoint that loads but is not a state of ours (no
    integer epoch) reported as one line naming the file."""
    try:
        return checkpoint_epoch(files, run_id)
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise StoreError(f"checkpoint {files.checkpoints_dir / (run_id + '.pt')} is not a "
                         f"rulelab state ({first_line(err)}); move it away to train that run "
                         "from the start") from None


def unusable_checkpoints(lab: Lab, configs) -> dict[str, str]:
    """The unfinished runs of ``configs`` whose checkpoint does not load as a rulelab state
    (damaged, truncated, foreign): ``{run_id: why}``. Read before anything is written."""
    statuses = lab.statuses([c.run_id for c in configs])
    out = {}
    for c in configs:
        if statuses.get(c.run_id) not in FINISHED:
            try:
                lab.load_checkpoint(c.run_id)
            except StoreError as err:
                out[c.run_id] = str(err).split("; move it away")[0]
    return out


def restart(lab: Lab, unusable: dict[str, str]) -> list[str]:
    """Move the unusable checkpoints aside (``<lab>/damaged/``) so their runs train from the
    start: deterministic, they end as an uninterrupted run would (issue 24); one line each."""
    lines = []
    for run_id, why in unusable.items():
        path = lab.checkpoints_dir / f"{run_id}.pt"
        if path.exists():
            aside = move_aside(lab.root, path)
            lines.append(f"run {run_id} restarts from the start: {why} (moved to {aside})")
    return lines


def chunk_specs(plan: Plan, lab: Lab, settings: Settings) -> list[ChunkSpec]:
    files = LabDir(lab.root)  # the lab's files without its registry: what a worker may touch
    return [ChunkSpec(index=c.index, configs=tuple(c.configs), lab=files, settings=settings,
                      label=f"{c.label} × {len(c.configs)}") for c in plan.chunks]


def run_sweep(recipe: Recipe, lab: Lab, settings: Settings, executor=None, progress=None, *,
        command: str = "sweep", interleave_seeds: bool = True,
        on_start: Callable[[Plan], None] | None = None,
        on_restart: Callable[[str], None] | None = None) -> SweepResult:
    """Train every unfinished run of ``recipe`` into ``lab`` with ``executor`` (default:
    in this process). ``command`` names the lock's holder (``train``, ``reproduce``,
    ``sweep``); ``interleave_seeds`` is the planner's packing order
    (:func:`rulelab.sweep.planner.plan_chunks`); ``on_start(plan)`` is called once the lab's
    lock is held and the runs are registered (a refused command prints nothing else);
    ``on_restart(line)`` (default: a Python warning) hears of each unfinished run whose
    checkpoint was unusable and that therefore trains from the start."""
    from rulelab.sweep.executors import LocalExecutor
    from rulelab.sweep.progress import SweepProgress

    executor = executor or LocalExecutor(settings.parallel_chunks)
    progress = progress or SweepProgress()
    configs = recipe.configs()
    unusable = unusable_checkpoints(lab, configs)
    switches = _engine_switches(lab, configs, unusable, settings)
    with sweep_lock(lab, recipe.experiment, command):
        for line in restart(lab, unusable):
            (on_restart or _warn)(line)
        lab.register([(c.run_id, c.flat()) for c in configs], recipe.experiment)
        for run_id, history in switches.items():  # resumed under another engine (issue 25)
            Registry(lab.registry_path).update([run_id], engine_switch=history)
        # Runs a killed sweep left 'running': under the lock nothing runs them, so they are
        # pending until their chunk starts (`rulelab status` counts what really runs).
        statuses = lab.statuses([c.run_id for c in configs])
        if stale := [rid for rid, s in statuses.items() if s == "running"]:
            lab.mark_pending(stale)
        plan = make_plan(recipe, lab, settings, interleave_seeds=interleave_seeds,
                         workers=getattr(executor, "workers", 1))
        if on_start:
            on_start(plan)
        if hasattr(executor, "prepare"):
            executor.prepare(plan, settings)  # the local executor: threads or processes
        result = SweepResult(plan)
        events = _Events(lab, settings, progress, result)
        progress.begin(plan)
        try:
            executor.run(chunk_specs(plan, lab, settings), events)
        finally:
            progress.end()
    return result


def _engine_switches(lab: Lab, configs, unusable: dict, settings: Settings) -> dict[str, str]:
    """:func:`rulelab.engine.runner.engine_switches` of the unfinished runs, each under the
    engine ``settings`` train its config with (a model may have its own eager engine version;
    a refusal raises before anything is written)."""
    from rulelab.engine.compiled import (  # torch
        eager_engine,
        engine_in_use,
        engines_for,
        micro_batch_for,
    )
    from rulelab.engine.runner import engine_switches

    statuses = lab.statuses([c.run_id for c in configs])
    groups: dict[int, list] = {}  # eager engine version → its unfinished configs
    for c in configs:
        if c.run_id not in unusable and statuses.get(c.run_id) not in FINISHED:
            groups.setdefault(eager_engine(c), []).append(c)
    switches = {}
    for group in groups.values():
        switches.update(engine_switches(lab, [c.run_id for c in group],
                                        settings.allow_engine_change,
                                        engine_in_use(settings, group[0]),
                                        engines_for(group[0]),
                                        {c.run_id: micro_batch_for(settings, c) for c in group},
                                        settings.precision))
    return switches


def _warn(line: str) -> None:
    warnings.warn(line, stacklevel=3)


@dataclass(frozen=True)
class RunList:
    """Runs of one task given as a list (a notebook's, a benchmark's): what the driver needs
    of a recipe."""

    runs: tuple
    experiment: str

    @property
    def task(self) -> str:
        return self.runs[0].task

    def configs(self) -> list:
        return list({c.run_id: c for c in self.runs}.values())


def run_configs(configs, lab: Lab, *, experiment: str, settings: Settings | None = None,
                **kwargs) -> SweepResult:
    """:func:`run` for a list of configs, packed in the order given (as ``rulelab train``)."""
    kwargs.setdefault("command", "train")
    kwargs.setdefault("interleave_seeds", False)
    return run_sweep(RunList(tuple(configs), experiment), lab, settings or Settings(), **kwargs)


class _Events:
    """The driver's side of the executor interface: every registry write happens here."""

    def __init__(self, lab: Lab, settings: Settings, progress, result: SweepResult) -> None:
        self.lab, self.settings, self.progress, self.result = lab, settings, progress, result

    def started(self, spec: ChunkSpec) -> None:
        from rulelab.engine.compiled import engine_in_use  # torch: only where runs train

        self.lab.mark_running(spec.run_ids, self.settings.device_label,
                              engine_in_use(self.settings, spec.configs[0]))
        self.progress.chunk_started(spec)

    def chunk_progress(self, spec: ChunkSpec):
        return self.progress.epoch_callbacks(spec)

    def finished(self, spec: ChunkSpec, outcomes: list[RunOutcome]) -> None:
        for o in outcomes:
            if o.status == "done":
                self.lab.mark_done(o.run_id, o.summary)
                self.result.done += 1
            else:
                self.lab.mark_failed(o.run_id, o.error or "failed", o.summary or None)
                self.result.failed += 1
        self.progress.chunk_finished(spec, outcomes)

    def lost(self, spec: ChunkSpec, reason: str) -> None:
        """The chunk's process died more often than retried: back to pending, say why."""
        Registry(self.lab.registry_path).update(spec.run_ids, status="pending",
                                                error=f"chunk lost: {reason}")
        self.result.lost.append(reason)
        self.progress.chunk_finished(spec, [])


# --- the lab lock ---------------------------------------------------------------------------
@contextlib.contextmanager
def sweep_lock(lab: Lab, experiment: str, command: str = "sweep"):
    """Hold the lab's writer lock (:func:`rulelab.store.lock.lab_lock`) for ``command``; the
    OS drops it if we die."""
    with lab_lock(lab.root, command=command, experiment=experiment):
        remove_stale_temp_files(lab.root)  # left by killed writers; live writers' are kept
        yield


def active_sweep(lab: LabDir, *, _probe: bool = True) -> dict | None:
    """``{pid, experiment, command}`` of the sweep or train holding the lab's lock, or None."""
    return lock_holder(lab.root, probe=_probe)
