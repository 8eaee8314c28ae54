"""Lab locks (DESIGN §3, "one writer: the driver process").

- The writer lock, ``<lab>/sweep.lock``: held with an exclusive ``flock`` by ``rulelab sweep``
  and ``rulelab train`` for as long as they register and train runs, so two commands never
  train the same runs twice. A second writer is refused at once with one line naming the
  holder and the lock file (it is not queued: a queued command would silently wait for hours
  behind a sweep). The OS drops the lock when its process dies, however it dies. The file
  holds ``{pid, experiment, command}`` for the refusal and for ``rulelab status``.
- The creation lock: an exclusive ``flock`` on the lab directory itself while a registry is
  checked and, if new, created, so two processes opening a new lab at once do not both create
  the schema; readers take it shared while they check the registry, so they never judge a
  half-made one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from rulelab.store.errors import StoreError, explain_write_error, first_line

LOCK_FILE = "sweep.lock"


@contextlib.contextmanager
def lab_lock(root: str | Path, *, command: str, experiment: str) -> Iterator[None]:
    """Hold the writer lock of lab ``root`` for ``command`` (``train`` or ``sweep``)."""
    path = Path(root) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise (explain_write_error(err, path)
               or StoreError(f"cannot open the lab lock {path}: {first_line(err)}")) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_holder(root, probe=False) or {}
            raise StoreError(
                f"lab {root} is busy: rulelab {holder.get('command', 'sweep')} (pid "
                f"{holder.get('pid', '?')}, experiment {holder.get('experiment', '?')}) holds "
                f"its lock {path}; wait for it to finish or pass another --lab") from None
        os.ftruncate(fd, 0)
        info = {"pid": os.getpid(), "experiment": experiment, "command": command}
        os.write(fd, json.dumps(info).encode())
        yield
    finally:
        os.close(fd)  # closing releases the lock


def lock_holder(root: str | Path, *, probe: bool = True) -> dict | None:
    """``{pid, experiment, command}`` of the command holding the writer lock, or None if no
    command does (``probe=False``: the file's content, without testing the lock)."""
    path = Path(root) / LOCK_FILE
    if not path.is_file():
        return None
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict):
        info = {}
    if not probe:
        return info
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return info or {"pid": "?", "experiment": "?"}
    finally:
        os.close(fd)
    return None


@contextlib.contextmanager
def creation_lock(root: Path, *, shared: bool = False) -> Iterator[None]:
    """``flock`` on the (existing) lab directory ``root``: exclusive while a registry is
    checked and made, shared while a reader checks it (a lock on a directory writes nothing,
    so read-only labs can take it too)."""
    try:
        fd = os.open(root, os.O_RDONLY)
    except OSError:  # a folder we may not open: nothing to coordinate with, go on unlocked
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
