"""Atomic file replacement for metrics, checkpoints and tables, and the cleanup of what a killed
writer leaves behind (DESIGN §3: "written atomically (temp file + rename)").

The content is written to a temporary file ``.<name>.<random>.tmp`` in the target's directory,
flushed and fsynced, then moved over the target with ``os.replace``: readers see the old file
or the new one, never a partial one. A writer killed mid-write leaves its temp file behind;
:func:`remove_stale_temp_files` removes those.

Telling a dead writer's temp file from a live one's: the writer holds an exclusive ``flock``
on its temp file from creation to rename (the OS drops it when the writer dies, however it
dies), and the cleanup removes only temp files whose lock it can take. So a cleanup is safe
while other processes write into the same lab (a sweep's workers, an ``analyze`` storing its
tables); the writers that call it also hold the lab lock (:mod:`rulelab.sweep.driver`), and
reading commands never call it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

# tempfile.mkstemp(prefix=".<name>.", suffix=".tmp"): 8 random characters from [a-z0-9_]
TEMP_NAME = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(fileobj)`` on a temp file next to ``path`` and atomically rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _locked_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            # mkstemp makes 0600 files; give the mode the registry got from the umask, so whoever
            # may read the lab may read its data (issue 24)
            with contextlib.suppress(OSError):
                os.fchmod(f.fileno(), new_file_mode())
            write(f)
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, path)  # still locked: a cleanup cannot remove it before this
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def new_file_mode() -> int:
    """The mode ``open()`` gives a new file under the current umask (0666 & ~umask)."""
    with contextlib.suppress(OSError, ValueError):  # Linux: read it without changing it
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere reading it means setting it: set straight back
    os.umask(mask)
    return 0o666 & ~mask


def _locked_temp(path: Path) -> tuple[int, Path]:
    """A new temp file next to ``path``, opened and exclusively flocked by this process."""
    while True:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits while a cleanup holds it to remove it
        except OSError:  # no flock on this filesystem: no cleanup can take it either
            return fd, Path(name)
        try:
            if os.path.samestat(os.fstat(fd), os.stat(name)):
                return fd, Path(name)
        except FileNotFoundError:
            pass
        os.close(fd)  # a cleanup removed it between mkstemp and flock: take another name


def remove_stale_temp_files(root: str | Path) -> list[Path]:
    """Remove the temp files under ``root`` that no live writer holds (left by killed writers);
    returns the removed paths. Call it only while holding the lab lock (DESIGN §3)."""
    removed = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if TEMP_NAME.fullmatch(name) and _remove_if_unheld(path):
                removed.append(path)
    return removed


def _remove_if_unheld(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # gone meanwhile (renamed by its writer), a link, unreadable: leave it
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a live writer holds it (or no flock here: cannot tell, keep it)
            return False
        try:  # still the file we locked (not renamed away after we opened it)?
            if not os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False)):
                return False
            path.unlink()
        except OSError:  # gone meanwhile, or not ours to remove
            return False
        return True
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself (POSIX); a no-op where directories cannot be opened."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
