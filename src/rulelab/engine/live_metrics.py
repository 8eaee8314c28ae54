"""Metrics of a running chunk, readable while it trains (issue 23 item 4; DESIGN §3).

A run's metrics file, ``metrics/<run_id>.parquet`` (:mod:`rulelab.store.metrics`), was written
only at checkpoints — every ``checkpoint_every`` epochs or ``checkpoint_seconds`` (500 epochs
or 5 min by default) — and at the chunk's end, so ``rulelab.load`` saw nothing of a short
chunk until it ended. :class:`MetricFlush` also rewrites each member's file after an
evaluation, with every row so far, at most every :data:`FLUSH_SECONDS` and never for more than
``1 / BUDGET`` of the chunk's time: the interval grows to ``BUDGET`` × the last flush's
duration. Each file costs two fsyncs: on the development machine (2 cores, one busy) one
flush of 8 members' files took ~1 s, so there it ran every ~50 s; a fast disk: every 5 s.

Nothing else changes: the rows are the trainer's own (no number is computed here); each write
is the atomic replacement a checkpoint does (readers see the old file or the new one); the
file's hash is recorded only when the run finishes, from the chunk's final write. A flushed
file may run ahead of the run's checkpoint: a killed run's metrics reach its last flush; when
it resumes, its rows come back from the checkpoint and its next write replaces the file with
the same rows (training is deterministic), so the final file is the uninterrupted one's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

FLUSH_SECONDS = 5.0  # at most this often (as a chunk's progress file, rulelab.sweep.live)
BUDGET = 50.0  # … and at least this many times the last flush's duration apart (≤ 2%)


class MetricFlush:
    """When to write the metrics of a running chunk between its checkpoints."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        # the first flush waits FLUSH_SECONDS too: a chunk shorter than that (most test and
        # tiny runs) is read whole at its end and pays no fsyncs on the way
        self.last = clock()
        self.cost = 0.0  # seconds the last flush took

    def due(self) -> bool:
        return self.clock() - self.last >= max(FLUSH_SECONDS, BUDGET * self.cost)

    def maybe(self, write: Callable[[], None]) -> bool:
        """Call ``write`` (write every member's rows so far) when due; whether it did."""
        if not self.due():
            return False
        start = self.clock()
        write()
        self.last = self.clock()
        self.cost = self.last - start
        return True

    def written(self) -> None:
        """The metrics were just written by a checkpoint: the next flush counts from now."""
        self.last = self.clock()
