"""Content hashes of what a finished run stored (issue 24): its metrics file, its final
checkpoint and its summary, recorded in the registry so damage is found, not read.

They live in a table of their own, ``run_files (run_id, kind, sha256, size, mtime_ns, copy)``,
next to ``runs``: a lab made before it has no such table (its runs read as "no hash recorded",
information, not damage) and older code reading a newer lab sees the ``runs`` table it expects.
The driver records a run's hashes in the transaction that marks it ``done`` or ``failed``, just
after the worker's atomic renames of those files; ``register`` keeps a ``copy`` of each run's
config text (kind ``config``), so a config edited in place is restored from it (its run id
tells which of the two is right).

Checking is cheap for reading commands (:func:`file_problem` with ``full=False``): a size
that differs is damage at once; a file up to :data:`FULL_HASH_BYTES` is hashed (bit rot keeps
the size and the mtime); a larger one is hashed only when its mtime moved. ``rulelab verify``
hashes everything.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path

KINDS = ("metrics", "checkpoint", "summary", "config")
FULL_HASH_BYTES = 8 << 20  # reading commands hash files up to this size every time
_TABLE = """
CREATE TABLE IF NOT EXISTS run_files (
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER,
    copy TEXT,
    PRIMARY KEY (run_id, kind)
)
"""


@dataclass(frozen=True)
class Stamp:
    """What was stored: the SHA-256 of the content, its size in bytes and (files) its mtime."""

    sha256: str
    size: int
    mtime_ns: int | None = None
    copy: str | None = None  # the text itself, kept for configs


def text_stamp(text: str, *, keep: bool = False) -> Stamp:
    data = text.encode()
    return Stamp(hashlib.sha256(data).hexdigest(), len(data), None, text if keep else None)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def file_stamp(path: Path) -> Stamp | None:
    """The stamp of ``path`` as it is now; None when there is no such file."""
    try:
        st = path.stat()
        return Stamp(file_sha256(path), st.st_size, st.st_mtime_ns)
    except FileNotFoundError:
        return None


def file_problem(path: Path, recorded: Stamp, *, full: bool = True) -> str | None:
    """Why ``path`` is not the file ``recorded`` describes (None when it is). ``full=False``:
    the cheap check of reading commands (see the module docstring)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return "missing"
    except OSError as err:
        return f"unreadable ({err.strerror or err})"
    if st.st_size != recorded.size:
        return f"{st.st_size} bytes, {recorded.size} were written"
    if not full and st.st_size > FULL_HASH_BYTES and st.st_mtime_ns == recorded.mtime_ns:
        return None
    try:
        sha = file_sha256(path)
    except OSError as err:
        return f"unreadable ({err.strerror or err})"
    return None if sha == recorded.sha256 else "content differs from its recorded hash"


# --- the table ------------------------------------------------------------------------------
def ensure_table(conn: sqlite3.Connection) -> None:
    conn.execute(_TABLE)


def has_table(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                        "'run_files'").fetchone() is not None


def put(conn: sqlite3.Connection, run_id: str, kind: str, stamp: Stamp | None) -> None:
    """Record (or, with None, forget) the stamp of ``run_id``'s ``kind``; inside the caller's
    transaction."""
    if stamp is None:
        conn.execute("DELETE FROM run_files WHERE run_id = ? AND kind = ?", (run_id, kind))
        return
    conn.execute("INSERT OR REPLACE INTO run_files VALUES (?, ?, ?, ?, ?, ?)",
                 (run_id, kind, stamp.sha256, stamp.size, stamp.mtime_ns, stamp.copy))


def read_all(conn: sqlite3.Connection) -> dict[tuple[str, str], Stamp]:
    """``{(run_id, kind): Stamp}``; empty for a lab made before hashes were recorded."""
    if not has_table(conn):
        return {}
    rows = conn.execute("SELECT run_id, kind, sha256, size, mtime_ns, copy FROM run_files")
    return {(r[0], r[1]): Stamp(r[2], r[3], r[4], r[5]) for r in rows}

