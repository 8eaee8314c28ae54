"""The run registry: ``registry.sqlite`` in the lab directory (DESIGN §3).

Stdlib sqlite3 in WAL mode, one table ``runs`` and a schema version in ``PRAGMA user_version``.
One writer (the driver process); readers may run concurrently.

- Reads go through :meth:`Registry.reading`: a ``query_only`` connection in a writable lab
  (its last close removes the ``-wal``/``-shm`` files it needed, so reading leaves the lab as it
  was), ``mode=ro`` on read-only files or a full disk, and ``immutable=1`` where WAL could not
  create its ``-shm`` file there (a read-only directory, no space left).
- An existing file is checked (SQLite header, ``PRAGMA integrity_check``, schema) before
  anything writes to it; a file that fails the check is reported as a :class:`StoreError` and
  left byte-for-byte untouched. A read-only lab or a full disk is reported as what it is.
- Stored rows are not trusted blindly: a row whose JSON does not decode, or whose config does
  not hash to its run id (:func:`rulelab.config.stable_hash`, how run ids are made), is left
  out of :meth:`Registry.rows` and reported through ``on_bad``.
- ``engine_version`` is the engine version that last trained a run
  (:mod:`rulelab.store.version`) and ``engine_switch`` says where a run
  resumed under another one (``--allow-engine-change``, issue 25). A registry written before
  these columns existed is read as it is (a trained run without a version reads as 1) and
  gains them at its next write.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from rulelab.config.base import stable_hash
from rulelab.store import digests
from rulelab.store.errors import StoreError, first_line, low_on_space, no_space, read_only
from rulelab.store.paths import writable
from rulelab.store.version import LEGACY_ENGINE

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
    "engine_version",
    "engine_switch",
)
ENGINE_COLUMNS = {"engine_version": "INTEGER", "engine_switch": "TEXT"}  # added by issue 25
LEGACY_COLUMNS = COLUMNS[: -len(ENGINE_COLUMNS)]
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
    updated_at TEXT,
    engine_version INTEGER,
    engine_switch TEXT
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

    @property
    def writable(self) -> bool:
        """Whether the registry and its folder (WAL's ``-wal``/``-shm`` files) can be written."""
        return writable(self.path.parent) and (not self.path.exists() or writable(self.path))

    # --- opening -----------------------------------------------------------------------------
    def check(self) -> bool:
        """Validate an existing file without writing to it. True if it holds the current
        schema, False if it is an empty database (a creation that stopped before the schema
        was written)."""
        try:
            with self._reader() as conn:
                result = [row[0] for row in conn.execute("PRAGMA integrity_check")]
                user_version = conn.execute("PRAGMA user_version").fetchone()[0]
                objects = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                columns = tuple(row[1] for row in conn.execute("PRAGMA table_info(runs)"))
        except sqlite3.Error as err:
            raise self._explain(err, corrupt_otherwise=True) from None
        if result != ["ok"]:
            raise self._corrupt(f"integrity_check failed: {'; '.join(map(str, result[:3]))}")
        if user_version == 0 and objects == 0:
            return False
        if user_version != SCHEMA_VERSION or columns not in (COLUMNS, LEGACY_COLUMNS):
            raise self._corrupt(
                f"unexpected schema (user_version {user_version}, expected {SCHEMA_VERSION})"
            )
        return True

    def create(self, attempts: int = 50) -> None:
        """Create the schema (WAL mode, user_version) in a new or empty database file.

        The caller holds the lab's creation lock (:class:`rulelab.store.Lab`), so only readers
        can compete; switching to WAL may still meet their lock, which SQLite reports at once
        rather than waiting: retried for a few seconds."""
        for attempt in range(attempts):
            try:
                conn = sqlite3.connect(self.path, timeout=_TIMEOUT_S, isolation_level=None)
                with contextlib.closing(conn):
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute(_SCHEMA)
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                    conn.execute("COMMIT")
                return
            except sqlite3.OperationalError as err:
                if "locked" in str(err) and attempt + 1 < attempts:
                    time.sleep(0.1)
                    continue
                raise self._explain(err, prefix="cannot create lab registry") from None
            except sqlite3.Error as err:
                raise self._explain(err, prefix="cannot create lab registry") from None

    def _corrupt(self, why: str) -> StoreError:
        return StoreError(
            f"corrupt lab registry {self.path}: {why}; the file was left untouched "
            "(move it away or pass another --lab)"
        )

    def _explain(self, err: sqlite3.Error, *, corrupt_otherwise: bool = False,
                 prefix: str = "lab registry") -> StoreError:
        """What a failed SQLite call means for the user: no space, read-only, busy, corrupt."""
        text = str(err).lower()
        if "disk is full" in text or ("disk i/o" in text and low_on_space(self.path)):
            return no_space(self.path)
        if "readonly" in text or "read-only" in text or (
                "unable to open" in text and not self.writable):
            return read_only(self.path.parent)
        if "locked" in text or "busy" in text:
            return StoreError(f"{prefix} {self.path} is busy (another process holds it: "
                              f"{first_line(err)}); try again")
        if corrupt_otherwise or not isinstance(err, sqlite3.OperationalError):
            return self._corrupt(first_line(err))
        return StoreError(f"{prefix} {self.path}: {first_line(err)}")

    @contextlib.contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A connection that never writes to the database (see the module docstring)."""
        conn = self._open_reader()
        conn.row_factory = sqlite3.Row
        try:
            yield conn
        finally:
            conn.close()

    def _open_reader(self) -> sqlite3.Connection:
        if self.writable:
            conn = sqlite3.connect(self.path, timeout=_TIMEOUT_S)
            try:
                conn.execute("PRAGMA query_only=1")
                conn.execute("PRAGMA user_version").fetchone()
                return conn
            except sqlite3.OperationalError:
                conn.close()
                if not low_on_space(self.path):  # a full disk cannot hold WAL's -shm: read as
                    raise  # on a read-only lab below; anything else is reported as it is
        uri = self.path.absolute().as_uri()
        conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=_TIMEOUT_S)
        try:
            conn.execute("PRAGMA user_version").fetchone()
            return conn
        except sqlite3.OperationalError:  # WAL without a -shm it may create: read the file as is
            conn.close()
        return sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, timeout=_TIMEOUT_S)

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection whose errors are reported as :class:`StoreError`."""
        try:
            with self._reader() as conn:
                yield conn
        except sqlite3.Error as err:
            raise self._explain(err) from None

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection whose ``with conn:`` blocks are transactions; closed on exit."""
        try:
            conn = sqlite3.connect(self.path, timeout=_TIMEOUT_S)
        except sqlite3.Error as err:
            raise self._explain(err, prefix="cannot open lab registry") from None
        conn.row_factory = sqlite3.Row
        try:
            yield conn
        except sqlite3.IntegrityError:
            raise  # a bug in the caller (e.g. an invalid status), not a lab problem
        except sqlite3.Error as err:  # locked, disk full, read-only, I/O error, corrupt, ...
            raise self._explain(err) from None
        finally:
            conn.close()

    # --- writes ------------------------------------------------------------------------------
    def insert_pending(self, runs: list[tuple[str, dict]], experiment: str) -> None:
        """A pending row for each new run, with a copy of its config text (issue 24); an
        existing row whose stored config was damaged gets it back, and is trained again when
        its summary does not read either (what the caller names is the truth: it hashes to the
        run id)."""
        stamp = now_utc()
        rows = [
            (run_id, experiment, config.get("task"), "pending", to_json(config), stamp, stamp)
            for run_id, config in runs
        ]
        with self.connect() as conn, conn:
            digests.ensure_table(conn)
            _ensure_engine_columns(conn)
            conn.executemany(
                "INSERT OR IGNORE INTO runs (run_id, experiment, task, status, config_json, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            for run_id, _, _, _, text, _, _ in rows:  # the caller's text hashes to the run id
                digests.put(conn, run_id, "config", digests.text_stamp(text, keep=True))
                self._restore_config(conn, run_id, text, stamp)

    @staticmethod
    def _restore_config(conn: sqlite3.Connection, run_id: str, text: str, stamp: str) -> None:
        row = conn.execute("SELECT config_json, summary_json FROM runs WHERE run_id = ?",
                           (run_id,)).fetchone()
        record = {"run_id": run_id, "config_json": row[0], "summary_json": row[1]}
        if _decode(record) is None:
            return
        conn.execute("UPDATE runs SET config_json = ?, updated_at = ? WHERE run_id = ?",
                     (text, stamp, run_id))
        record = {"run_id": run_id, "config_json": text, "summary_json": row[1]}
        if _decode(record) is not None:  # its summary is lost too: train it again
            conn.execute("UPDATE runs SET status = 'pending', summary_json = NULL WHERE "
                         "run_id = ?", (run_id,))
            conn.execute("DELETE FROM run_files WHERE run_id = ? AND kind != 'config'",
                         (run_id,))

    def update(self, run_ids: list[str], stamps: dict[str, digests.Stamp | None] | None = None,
               **fields: object) -> None:
        """Set ``fields`` (and ``updated_at``) on every listed run; all ids must exist. With
        ``stamps`` (one run), record those hashes in the same transaction (None forgets one)."""
        fields["updated_at"] = now_utc()
        assignments = ", ".join(f"{name} = ?" for name in fields)
        values = list(fields.values())
        with self.connect() as conn, conn:
            _ensure_engine_columns(conn)
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
            if stamps:
                digests.ensure_table(conn)
                for run_id in run_ids:
                    for kind, stamp in stamps.items():
                        digests.put(conn, run_id, kind, stamp)

    def forget_stamps(self, run_ids: list[str]) -> None:
        """Drop the file hashes of runs about to be trained again (their config copy stays)."""
        with self.connect() as conn, conn:
            if digests.has_table(conn):
                conn.executemany("DELETE FROM run_files WHERE run_id = ? AND kind != 'config'",
                                 [(r,) for r in run_ids])

    # --- reads -------------------------------------------------------------------------------
    def statuses(self, run_ids: list[str] | None = None) -> dict[str, str]:
        with self.reading() as conn:
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

    def stamps(self) -> dict[tuple[str, str], digests.Stamp]:
        """Every recorded hash, ``{(run_id, kind): Stamp}`` (:mod:`rulelab.store.digests`)."""
        with self.reading() as conn:
            return digests.read_all(conn)

    def rows(self, on_bad: Callable[[str, str], None] | None = None) -> list[dict]:
        """All readable rows as dicts, oldest first, with ``config``/``summary`` decoded from
        JSON. A row that cannot be trusted is left out and ``on_bad(run_id, why)`` called."""
        with self.reading() as conn:
            rows = conn.execute("SELECT * FROM runs ORDER BY created_at, run_id").fetchall()
        out = []
        for row in rows:
            record = dict(row)
            record["summary_text"] = record["summary_json"]  # as stored: for its hash
            record["engine_version"] = engine_read(record)
            record.setdefault("engine_switch", None)
            why = _decode(record)
            if why is None:
                out.append(record)
            elif on_bad is not None:
                on_bad(str(record["run_id"]), why)
        return out


def engine_read(record: dict) -> int | None:
    """A row's engine version: as recorded; :data:`LEGACY_ENGINE` for a run trained before
    versions were recorded; None for a run never started."""
    version = record.get("engine_version")
    if version is not None:
        return int(version)
    return None if record.get("status") == "pending" else LEGACY_ENGINE


def _ensure_engine_columns(conn: sqlite3.Connection) -> None:
    """Add the engine columns to a registry written before they existed (in the caller's
    transaction)."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    for name, kind in ENGINE_COLUMNS.items():
        if name not in have:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")


def _decode(record: dict) -> str | None:
    """Decode ``config_json``/``summary_json`` in place; the reason when the row is damaged."""
    for column, key in (("config_json", "config"), ("summary_json", "summary")):
        try:
            value = json.loads(record.pop(column) or "{}")
        except ValueError as err:
            return f"its stored {key} is not valid JSON ({first_line(err)})"
        if not isinstance(value, dict):
            return f"its stored {key} is not a JSON object"
        record[key] = value
    if stable_hash(record["config"]) != record["run_id"]:
        return "its stored config does not hash to its run id (changed after it was written)"
    return None
