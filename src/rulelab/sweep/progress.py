"""Sweep progress: runs done, members generalized, failed, and an ETA (issue 10: "progress
anywhere").

The counted unit is the member-epoch (one run trained one epoch). The share done and the ETA
weigh each chunk's member-epochs by the cost model's estimate of that chunk's time
(:mod:`rulelab.sweep.estimate`): a 2-layer member-epoch costs about three 1-layer ones, and a
width-1025 one sixty width-17 ones, so an ETA in plain member-epochs read off a cheap first
chunk would promise a fraction of the real time. In-process chunks (local executor) report
every evaluation; remote chunks (Ray) through their progress files, which the driver polls
(:mod:`rulelab.sweep.live`), several at once. :class:`SweepCounts` keeps the
counts; two displays draw them: a rich bar on a terminal (:class:`RichSweepProgress`) and,
where output goes to a file (nohup, a scheduler, CI), one plain line every ``every`` seconds
(:class:`LineSweepProgress`), since a bar that only draws on a terminal leaves such a log
silent for hours.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import NamedTuple, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from rulelab.engine.runner import EpochProgress as EpochCallbacks
from rulelab.sweep.estimate import speed

CPU = speed("cpu")  # weights chunks against each other: relative times are what matter
LINE_SECONDS = 30.0  # a plain progress line this often, when output is not a terminal


class SweepProgress:
    """Silent base: the driver's progress callbacks (``--quiet``)."""

    def begin(self, plan) -> None: ...
    def chunk_started(self, spec) -> None: ...
    def chunk_finished(self, spec, outcomes) -> None: ...
    def end(self) -> None: ...

    def epoch_callbacks(self, spec) -> EpochCallbacks:
        return EpochCallbacks()


class _Live(NamedTuple):
    """A running chunk's last evaluation."""

    member_epochs: int
    cost: float  # the estimated seconds of those member-epochs
    generalized: int
    failed: int
    at_epoch: str  # "epoch 120/15000"


class SweepCounts(SweepProgress):
    """What the driver reported so far; :meth:`show` draws it (subclasses). The totals are
    the finished chunks' plus the last report of each running chunk (several run at once on
    Ray)."""

    def __init__(self) -> None:
        self.experiment = ""
        self.done = self.generalized = self.failed = 0
        self.base = 0  # member-epochs of finished chunks
        self.total = 0
        self.started_chunks = 0
        self.running_chunks: dict[int, str] = {}  # index → "5/40 2L·2H × 60", in start order
        self.live: dict[int, _Live] = {}  # index → its last report, for those that reported
        self.n_runs = self.n_chunks = 0
        self.chunk_work: dict[int, int] = {}
        self.chunk_cost: dict[int, float] = {}  # estimated seconds of each chunk (relative)
        self.cost_base = 0.0  # of finished chunks
        self.cost_total = 1.0

    def begin(self, plan) -> None:
        self.experiment = plan.experiment
        self.n_runs, self.n_chunks = plan.n_todo, len(plan.chunks)
        self.total = max(plan.seed_epochs(), 1)
        self.chunk_work = {c.index: (c.configs[0].epochs - c.start_epoch) * len(c.configs)
                           for c in plan.chunks}
        self.chunk_cost = {c.index: chunk_seconds(c, self.chunk_work[c.index])
                           for c in plan.chunks}
        self.cost_total = sum(self.chunk_cost.values()) or 1.0

    def _reported(self, field: str) -> float:
        """One field of the running chunks' last reports, summed."""
        return sum(getattr(v, field) for v in self.live.values())

    @property
    def completed(self) -> int:
        """Member-epochs of finished chunks and running ones."""
        return self.base + self._reported("member_epochs")

    @property
    def cost_done(self) -> float:
        return self.cost_base + self._reported("cost")

    @property
    def chunk(self) -> str:
        """``chunk 5/40 2L·2H × 60 epoch 120/15000`` while one runs (``chunks …, …`` for
        several), else empty."""
        parts = [f"{name} {self.live[i].at_epoch if i in self.live else ''}".strip()
                 for i, name in self.running_chunks.items()]
        return (f"chunk {parts[0]}" if len(parts) == 1
                else f"chunks {', '.join(parts)}" if parts else "")

    @property
    def share(self) -> float:
        """The estimated share of the sweep's time done (0–1)."""
        return min(self.cost_done / self.cost_total, 1.0)

    def chunk_started(self, spec) -> None:
        self.started_chunks += 1
        self.running_chunks[spec.index] = f"{self.started_chunks}/{self.n_chunks} {spec.label}"
        self.show()

    def epoch_callbacks(self, spec) -> EpochCallbacks:
        return _ChunkEpochs(self, spec)

    def epoch(self, spec, member_epochs: int, n_generalized: int, n_failed: int,
              at_epoch: str = "") -> None:
        """A running chunk's evaluation: ``member_epochs`` of it done so far."""
        work = self.chunk_work.get(spec.index, 0)
        done = min(member_epochs, work)
        cost = self.chunk_cost.get(spec.index, 0.0) * done / max(work, 1)
        self.live[spec.index] = _Live(done, cost, n_generalized, n_failed, at_epoch)
        self.show()

    def chunk_finished(self, spec, outcomes) -> None:
        for o in outcomes:
            if o.status == "done":
                self.done += 1
                self.generalized += bool(o.summary.get("generalized"))
            else:
                self.failed += 1
        self.base += self.chunk_work.get(spec.index, 0)
        self.cost_base += self.chunk_cost.get(spec.index, 0.0)
        self.running_chunks.pop(spec.index, None)
        self.live.pop(spec.index, None)
        self.show()

    def show(self) -> None: ...

    @property
    def runs_text(self) -> str:
        return f"{self.done + self.failed}/{self.n_runs}"

    @property
    def n_generalized(self) -> int:
        """Finished runs that generalized (issue 23: counting a running chunk's members that
        had generalized so far gave "generalized 36" beside "runs 32/48")."""
        return self.generalized

    @property
    def n_failed(self) -> int:
        return self.failed + self._reported("failed")


class RichSweepProgress(SweepCounts):
    """``paper ━━━━ 12% runs 240/2400 gen 31 failed 0 · chunk 5/40 2L·2H × 60 0:41:10 < 5:02:00``"""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console(stderr=True)
        self.bar: Progress | None = None
        self.task = None

    def begin(self, plan) -> None:
        super().begin(plan)
        self.bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
            TextColumn("runs {task.fields[runs]} [green]gen {task.fields[gen]}[/] "
                       "[red]{task.fields[fail]}[/]· {task.fields[chunk]}"),
            TimeElapsedColumn(), TextColumn("<"), TimeRemainingColumn(),
            console=self.console, transient=False,
        )
        self.bar.start()
        # the bar counts estimated seconds of work, so its time-remaining column is weighed
        self.task = self.bar.add_task(plan.experiment, total=self.cost_total, completed=0,
                                      **self._fields())

    def _fields(self) -> dict:
        return dict(runs=self.runs_text, gen=str(self.n_generalized), chunk=self.chunk,
                    fail=f"failed {self.n_failed} " if self.n_failed else "")

    def show(self) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=self.cost_done, **self._fields())

    def end(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


class LineSweepProgress(SweepCounts):
    """One plain line every ``every`` seconds, and one at the end, for a log file::

        progress paper: 12.0% of the estimated time (288000/2400000 member-epochs)
        · runs 240/2400 · generalized 31 · failed 0 · chunk 5/40 2L·2H × 60 epoch 1200/15000
        · 0:41:10 elapsed · ETA 5:02:00

    (on one line). Events (an evaluation, a finished chunk) print when the interval has
    passed; a ``heartbeat`` thread prints when no event comes for that long (a big data set
    being built, a Ray chunk that reports only when it ends), so the log never goes quiet for
    longer. ``clock`` is injectable, and the heartbeat can be turned off, so a test can drive
    time.
    """

    def __init__(self, out: TextIO | None = None, *, every: float = LINE_SECONDS,
                 clock: Callable[[], float] = time.monotonic, heartbeat: bool = True) -> None:
        super().__init__()
        self.out, self.every, self.clock, self.heartbeat = out, every, clock, heartbeat
        self.started = self.last = 0.0
        self.running = False
        self.lock = threading.Lock()  # the heartbeat and the driver's events both print
        self.stopped = threading.Event()
        self.beat: threading.Thread | None = None

    def begin(self, plan) -> None:
        super().begin(plan)
        self.started = self.last = self.clock()
        self.running = True
        if self.heartbeat:
            self.stopped.clear()
            self.beat = threading.Thread(target=self._beat, name="rulelab-progress",
                                         daemon=True)
            self.beat.start()

    def _beat(self) -> None:
        while not self.stopped.wait(min(self.every, 1.0)):
            self.show()

    def show(self) -> None:
        with self.lock:
            now = self.clock()
            if self.running and now - self.last >= self.every:
                self.last = now
                self.write(self.line(now))

    def end(self) -> None:
        self.stopped.set()
        if self.beat is not None:
            self.beat.join()
            self.beat = None
        with self.lock:
            if self.running:
                self.running = False
                self.write(self.line(self.clock(), final=True))

    def line(self, now: float, *, final: bool = False) -> str:
        elapsed = now - self.started
        share = self.share
        if final:
            eta = "finished"
        elif self.cost_done > 0 and elapsed > 0:
            left = self.cost_total - self.cost_done
            eta = f"ETA {clock_text(left * elapsed / self.cost_done)}"
        else:
            eta = "ETA unknown"
        parts = [f"progress {self.experiment}: {100 * share:.1f}% of the estimated time "
                 f"({self.completed}/{self.total} member-epochs)", f"runs {self.runs_text}",
                 f"generalized {self.n_generalized}", f"failed {self.n_failed}",
                 *([self.chunk] if self.chunk and not final else []),
                 f"{clock_text(elapsed)} elapsed", eta]
        return " · ".join(parts)

    def write(self, line: str) -> None:
        out = self.out or sys.stderr  # looked up late: tests swap sys.stderr
        print(line, file=out, flush=True)


def chunk_seconds(chunk, member_epochs: int) -> float:
    """The cost model's time of ``chunk`` on this CPU (only ratios between chunks matter);
    plain member-epochs where the plan carries no estimate."""
    flops = getattr(chunk, "flops", None)
    if not flops:
        return float(member_epochs)
    return CPU.seconds(flops, getattr(chunk, "passes", 0))


def clock_text(seconds: float) -> str:
    """``3725.2`` → ``1:02:05``."""
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class _ChunkEpochs(EpochCallbacks):
    """Per-epoch callbacks of one in-process chunk, folded into the sweep's counts."""

    def __init__(self, sweep: SweepCounts, spec) -> None:
        self.sweep, self.spec = sweep, spec
        self.start_epoch, self.members, self.total_epochs = 0, 0, 0

    def start(self, label: str, total_epochs: int, done_epochs: int, n_members: int) -> None:
        self.start_epoch, self.members = done_epochs, n_members
        self.total_epochs = total_epochs

    def update(self, epoch: int, n_generalized: int, n_failed: int) -> None:
        self.sweep.epoch(self.spec, (epoch - self.start_epoch) * self.members, n_generalized,
                         n_failed, f"epoch {epoch}/{self.total_epochs}")
