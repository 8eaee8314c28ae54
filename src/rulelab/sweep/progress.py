"""Sweep progress: one rich bar over the whole sweep (issue: "runs done, members generalized,
and an ETA").

The unit is the member-epoch (one run trained one epoch), so the bar and its ETA advance
evenly across chunks of any size. In-process chunks (local executor) report every evaluation;
remote chunks (Ray) report when they finish.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from rulelab.train.runner import EpochProgress as EpochCallbacks


class SweepProgress:
    """Silent base: the driver's progress callbacks (``--quiet``)."""

    def begin(self, plan) -> None: ...
    def chunk_started(self, spec) -> None: ...
    def chunk_finished(self, spec, outcomes) -> None: ...
    def end(self) -> None: ...

    def epoch_callbacks(self, spec) -> EpochCallbacks:
        return EpochCallbacks()


class RichSweepProgress(SweepProgress):
    """``paper ━━━━ 12% runs 240/2400 gen 31 failed 0 · chunk 5/40 2L·2H × 60 0:41:10 < 5:02:00``"""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.bar: Progress | None = None
        self.task = None
        self.done = self.generalized = self.failed = self.finished_chunks = 0
        self.base = 0  # member-epochs of finished chunks
        self.n_runs = self.n_chunks = 0
        self.chunk_work: dict[int, int] = {}

    def begin(self, plan) -> None:
        self.n_runs, self.n_chunks = plan.n_todo, len(plan.chunks)
        self.chunk_work = {c.index: (c.configs[0].epochs - c.start_epoch) * len(c.configs)
                           for c in plan.chunks}
        self.bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
            TextColumn("runs {task.fields[runs]} [green]gen {task.fields[gen]}[/] "
                       "[red]{task.fields[fail]}[/]· {task.fields[chunk]}"),
            TimeElapsedColumn(), TextColumn("<"), TimeRemainingColumn(),
            console=self.console, transient=False,
        )
        self.bar.start()
        self.task = self.bar.add_task(plan.experiment, total=max(plan.seed_epochs(), 1),
                                      completed=0, **self._fields(""))

    def _fields(self, chunk: str, live_gen: int = 0, live_fail: int = 0) -> dict:
        fail = self.failed + live_fail
        return dict(runs=f"{self.done + self.failed}/{self.n_runs}",
                    gen=str(self.generalized + live_gen),
                    fail=f"failed {fail} " if fail else "", chunk=chunk)

    def _chunk_text(self, spec) -> str:
        return f"chunk {self.finished_chunks + 1}/{self.n_chunks} {spec.label}"

    def chunk_started(self, spec) -> None:
        if self.bar is not None:
            self.bar.update(self.task, **self._fields(self._chunk_text(spec)))

    def epoch_callbacks(self, spec) -> EpochCallbacks:
        return _ChunkEpochs(self, spec)

    def chunk_finished(self, spec, outcomes) -> None:
        for o in outcomes:
            if o.status == "done":
                self.done += 1
                self.generalized += bool(o.summary.get("generalized"))
            else:
                self.failed += 1
        self.finished_chunks += 1
        self.base += self.chunk_work.get(spec.index, 0)
        if self.bar is not None:
            self.bar.update(self.task, completed=self.base, **self._fields(""))

    def end(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


class _ChunkEpochs(EpochCallbacks):
    """Per-epoch callbacks of one in-process chunk, folded into the sweep bar."""

    def __init__(self, sweep: RichSweepProgress, spec) -> None:
        self.sweep, self.spec = sweep, spec
        self.start_epoch, self.members = 0, 0

    def start(self, label: str, total_epochs: int, done_epochs: int, n_members: int) -> None:
        self.start_epoch, self.members = done_epochs, n_members

    def update(self, epoch: int, n_generalized: int, n_failed: int) -> None:
        s = self.sweep
        if s.bar is None:
            return
        done = (epoch - self.start_epoch) * self.members
        limit = s.chunk_work.get(self.spec.index, 0)
        s.bar.update(s.task, completed=s.base + min(done, limit),
                     **s._fields(s._chunk_text(self.spec), n_generalized, n_failed))
