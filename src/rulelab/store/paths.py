"""Where a command may write, checked before any work starts (SPEC "Cross-cutting": bad input
gets one clear line before any work starts; DESIGN §3).

A file target must not be a directory or a special file, and the nearest existing folder on
its way must be a folder in which a file can really be created: that is probed by creating and
removing an empty hidden file, because permission bits do not tell (root passes every
``os.access`` check, yet cannot create files in ``/proc`` or on a read-only mount).
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

DAMAGED_DIR = "damaged"  # where unusable lab files are moved (issue 24): never deleted


def nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def folder_problem(folder: str | Path) -> str | None:
    """Why files cannot be created in ``folder`` (made with its parents where missing), or
    None when they can."""
    base = nearest_existing(Path(folder))
    if not base.is_dir():
        return f"{base} is a file, not a folder"
    try:
        fd, probe = tempfile.mkstemp(dir=base, prefix=".rulelab-probe-", suffix=".probe")
    except OSError as err:
        return f"cannot create files in {base} ({err.strerror or err})"
    os.close(fd)
    os.unlink(probe)
    return None


def file_problem(path: str | Path) -> str | None:
    """Why a file cannot be written at ``path`` (None when it can)."""
    path = Path(path)
    if path.is_dir():
        return "it is a directory; give a file name"
    if path.exists() and not path.is_file():
        return "it is not a regular file"
    return folder_problem(path.parent)


def writable(path: str | Path) -> bool:
    """Whether the process may write ``path`` (False on a read-only mount, even for root)."""
    return os.access(path, os.W_OK)


def move_aside(root: Path, path: Path) -> Path:
    """Move ``path`` (inside lab ``root``) into ``<root>/damaged/`` under its relative folder,
    stamped with the time and never over another file; returns where it went."""
    rel = path.relative_to(root)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    target = root / DAMAGED_DIR / rel.parent / f"{rel.name}.{stamp}"
    n = 0
    while target.exists():
        n += 1
        target = target.with_name(f"{rel.name}.{stamp}.{n}")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    return target
