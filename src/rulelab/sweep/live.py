"""Live progress of running chunks, read by the driver (for Ray workers) and by ``rulelab status``.

An in-process chunk reports every evaluation to the sweep's progress through its epoch
callbacks (:class:`rulelab.engine.runner.EpochProgress`). A chunk on a Ray worker cannot call
back into the driver, so without this a Ray sweep's progress stood still until a chunk ended —
an hour, for a medium chunk. Here the worker's callbacks go to a small JSON file in the lab,
``progress/chunk-<index>.json`` (replaced atomically, at most every ``every`` seconds, and at
each start and finish), and the driver polls the files of its running chunks while it waits
and replays them into the same callbacks an in-process chunk would call. The lab's folder is
already shared by the driver and its workers (they write checkpoints and metrics there).

The file holds the arguments of the last ``start`` and ``update`` calls, so replaying it is
exact whatever the polling rate. The driver removes a chunk's file when it starts it (a stale
file of an earlier sweep must not count) and when it ends. A local chunk writes the same file
beside its in-process callbacks (:class:`Both`), so ``rulelab status`` in another terminal
shows the epoch of every running chunk, whichever the executor (:func:`running_chunks`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rulelab.store.atomic import atomic_write
from rulelab.store.lab_dir import LabDir

if TYPE_CHECKING:  # the runner imports torch; `rulelab status` reads these files without it
    from rulelab.engine.runner import EpochProgress

PROGRESS_DIR = "progress"
WRITE_SECONDS = 5.0  # a worker rewrites its chunk's file at most this often


def progress_path(lab: LabDir, index: int) -> Path:
    return lab.root / PROGRESS_DIR / f"chunk-{index}.json"


def remove_progress(lab: LabDir, index: int) -> None:
    """Remove a chunk's file, and the folder once no chunk has one."""
    path = progress_path(lab, index)
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
        path.parent.rmdir()  # fails while another chunk's file is there: kept


class ProgressFile:
    """A chunk's epoch callbacks (those of :class:`~rulelab.engine.runner.EpochProgress`),
    written to ``path`` for the driver and ``rulelab status`` to read."""

    def __init__(self, path: Path, *, every: float = WRITE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path, self.every, self.clock = path, every, clock
        self.state: dict = {}
        self.last = float("-inf")

    def start(self, label: str, total_epochs: int, done_epochs: int, n_members: int) -> None:
        self.state = {"start": [label, total_epochs, done_epochs, n_members]}
        self._write()
        self.last = float("-inf")  # the first evaluation's counts go out at once too

    def update(self, epoch: int, n_generalized: int, n_failed: int) -> None:
        self.state["update"] = [epoch, n_generalized, n_failed]
        if self.clock() - self.last >= self.every:
            self._write()

    def finish(self) -> None:
        self._write()

    def _write(self) -> None:
        self.last = self.clock()
        text = json.dumps(self.state).encode()
        with contextlib.suppress(OSError):  # progress is best effort: never fail a chunk
            atomic_write(self.path, lambda f: f.write(text))


def read_progress(path: Path) -> dict | None:
    """The state a :class:`ProgressFile` wrote, or None (none yet, or unreadable)."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and "start" in state else None


class Both:
    """Two sets of epoch callbacks, called in turn (a local chunk: the sweep's and its file)."""

    def __init__(self, first: EpochProgress, second: EpochProgress | ProgressFile) -> None:
        self.pair = (first, second)

    def start(self, *args) -> None:
        for p in self.pair:
            p.start(*args)

    def update(self, *args) -> None:
        for p in self.pair:
            p.update(*args)

    def beat(self) -> None:
        for p in self.pair:
            if hasattr(p, "beat"):
                p.beat()

    def finish(self) -> None:
        for p in self.pair:
            p.finish()


def running_chunks(lab: LabDir) -> list[dict]:
    """What each running chunk's file says: ``{chunk, label, epoch, epochs, generalized,
    failed}``, by chunk index (meaningful while a sweep holds the lab's lock)."""
    out = []
    for path in sorted((lab.root / PROGRESS_DIR).glob("chunk-*.json")):
        state = read_progress(path)
        index = path.stem.removeprefix("chunk-")
        if state is None or not index.isdigit():
            continue
        label, epochs, done, _ = state["start"]
        epoch, generalized, failed = state.get("update") or (done, 0, 0)
        out.append({"chunk": int(index), "label": label, "epoch": epoch, "epochs": epochs,
                    "generalized": generalized, "failed": failed})
    return sorted(out, key=lambda c: c["chunk"])


class RemoteProgress:
    """The driver's side: replays each running chunk's file into its epoch callbacks."""

    def __init__(self, lab: LabDir, callbacks: Callable[[object], EpochProgress]):
        self.lab, self.callbacks = lab, callbacks
        self.running: dict[int, tuple[EpochProgress, list]] = {}  # index → (callbacks, seen)

    def started(self, spec) -> None:
        remove_progress(self.lab, spec.index)  # an earlier sweep's chunk of this index
        self.running[spec.index] = (self.callbacks(spec), [None, None])

    def ended(self, spec) -> None:
        self.running.pop(spec.index, None)
        remove_progress(self.lab, spec.index)

    def poll(self) -> None:
        """Replay what changed in the running chunks' files since the last poll."""
        for index, (callbacks, seen) in self.running.items():
            state = read_progress(progress_path(self.lab, index))
            if state is None:
                continue
            start, update = state.get("start"), state.get("update")
            if start != seen[0]:
                callbacks.start(*start)
                seen[:] = [start, None]
            if update is not None and update != seen[1]:
                callbacks.update(*update)
                seen[1] = update
