"""The run registry: ``registry.sqlite`` in the lab directory (DESIGN §3).

Stdlib sqlite3 in WAL mode, one table ``runs`` and a schema version in ``PRAGMA user_version``.
One writer (the driver process); readers may run concurrently. An existing file is checked
read-only (SQLite header, ``PRAGMA integrity_check``, schema) before anything writes to it, and a
file that fails the check is reported as a :class:`StoreError` and left byte-for-byte untouched.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from rulelab.store.errors import StoreError, first_line

SCHEMA_VERSION = 1
STATUSES = ("pending", "running", "done", "failed")
COLUMNS = (
    "run_id",
    "experiment",
    "task",
    "status",
    "config_json",
    "summary_json",
    "error",
    "code_version",
    "device",
    "created_at",
    "updated_at",
)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    experiment TEXT,
    task TEXT,
    status TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    config_json TEXT,
    summary_json TEXT,
    error TEXT,
    code_version TEXT,
    device TEXT,
    created_at TEXT,
    updated_at TEXT
)
"""
_TIMEOUT_S = 30.0


def now_utc() -> str:
    """ISO-8601 UTC timestamp, e.g. ``2025-01-31T12:00:00.123456+00:00``."""
    return datetime.now(UTC).isoformat()


def to_json(obj: object) -> str:
    """JSON text; numpy / torch scalars and arrays are converted via ``.item()``/``.tolist()``."""
    return json.dumps(obj, default=_jsonable)  # key order kept: flat() order reads well


def _jsonable(obj: object) -> object:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


class Registry:
    """Thin wrapper over ``registry.sqlite``; each operation opens its own connection."""

    def __init__(self, path: Path) -> None:
        self.path = path

    # --- opening -----------------------------------------------------------------------------
    def check(self) -> bool:
        """Validate an existing file read-only. True if it holds the current schema, False if
        it is an empty database (a creation that stopped before the schema was written)."""
        uri = self.path.absolute().as_uri() + "?mode=ro"
        try:
            with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=_TIMEOUT_S)) as conn:
                result = [row[0] for row in conn.execute("PRAGMA integrity_check")]
                user_version = conn.execute("PRAGMA user_version").fetchone()[0]
                objects = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                columns = tuple(row[1] for row in conn.execute("PRAGMA table_info(runs)"))
        except sqlite3.Error as err:
            raise self._corrupt(first_line(err)) from None
        if result != ["ok"]:
            raise self._corrupt(f"integrity_check failed: {'; '.join(map(str, result[:3]))}")
        if user_version == 0 and objects == 0:
            return False
        if user_version != SCHEMA_VERSION or columns != COLUMNS:
            raise self._corrupt(
                f"unexpected schema (user_version {user_version}, expected {SCHEMA_VERSION})"
            )
        return True

    def create(self) -> None:
        """Create the schema (WAL mode, user_version) in a new or empty database file."""
        try:
            conn = sqlite3.connect(self.path, timeout=_TIMEOUT_S, isolation_level=None)
            with contextlib.closing(conn):
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(_SCHEMA)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                conn.execute("COMMIT")
        except sqlite3.Error as err:
            raise StoreError(f"cannot create lab registry {self.path}: {first_line(err)}") from None

    def _corrupt(self, why: str) -> StoreError:
        return StoreError(
            f"corrupt lab registry {self.path}: {why}; the file was left untouched "
            "(move it away or pass another --lab)"
        )

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection whose ``with conn:`` blocks are transactions; closed on exit."""
        try:
            conn = sqlite3.connect(self.path, timeout=_TIMEOUT_S)
        except sqlite3.Error as err:
            raise StoreError(f"cannot open lab registry {self.path}: {first_line(err)}") from None
        conn.row_factory = sqlite3.Row
        try:
            yield conn
        except sqlite3.IntegrityError:
            raise  # a bug in the caller (e.g. an invalid status), not a lab problem
        except sqlite3.OperationalError as err:  # locked, disk full, I/O error, ...
            raise StoreError(f"lab registry {self.path}: {first_line(err)}") from None
        except sqlite3.DatabaseError as err:  # SQLITE_CORRUPT / SQLITE_NOTADB
            raise self._corrupt(first_line(err)) from None
        finally:
            conn.close()

    # --- writes ------------------------------------------------------------------------------
    def insert_pending(self, runs: list[tuple[str, dict]], experiment: str) -> None:
        stamp = now_utc()
        rows = [
            (run_id, experiment, config.get("task"), "pending", to_json(config), stamp, stamp)
            for run_id, config in runs
        ]
        with self.connect() as conn, conn:
            conn.executemany(
                "INSERT OR IGNORE INTO runs (run_id, experiment, task, status, config_json, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def update(self, run_ids: list[str], **fields: object) -> None:
        """Set ``fields`` (and ``updated_at``) on every listed run; all ids must exist."""
        fields["updated_at"] = now_utc()
        assignments = ", ".join(f"{name} = ?" for name in fields)
        values = list(fields.values())
        with self.connect() as conn, conn:
            missing = [
                run_id
                for run_id in run_ids
                if conn.execute(
                    f"UPDATE runs SET {assignments} WHERE run_id = ?", [*values, run_id]
                ).rowcount
                == 0
            ]
            if missing:
                raise StoreError(f"unknown run id(s) in {self.path}: {', '.join(missing[:5])}")

    # --- reads -------------------------------------------------------------------------------
    def statuses(self, run_ids: list[str] | None = None) -> dict[str, str]:
        with self.connect() as conn:
            if run_ids is None:
                rows = conn.execute("SELECT run_id, status FROM runs").fetchall()
            else:
                rows = []
                ids = list(dict.fromkeys(run_ids))
                for start in range(0, len(ids), 500):  # stay below SQLite's variable limit
                    chunk = ids[start : start + 500]
                    marks = ", ".join("?" * len(chunk))
                    rows += conn.execute(
                        f"SELECT run_id, status FROM runs WHERE run_id IN ({marks})", chunk
                    ).fetchall()
        return {row["run_id"]: row["status"] for row in rows}

    def rows(self) -> list[dict]:
        """All rows as dicts, oldest first, with ``config``/``summary`` decoded from JSON."""
        with self.connect() as conn:
            rows = conn.execute("SELECT * FROM runs ORDER BY created_at, run_id").fetchall()
        out = []
        for row in rows:
            record = dict(row)
            record["config"] = json.loads(record.pop("config_json") or "{}")
            record["summary"] = json.loads(record.pop("summary_json") or "{}")
            out.append(record)
        return out
