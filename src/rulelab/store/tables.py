"""Analysis results as Parquet tables: ``analyses/<name>/<key>.parquet`` (DESIGN §3).

Each analysis writes tidy frames (one row per member × component × checkpoint …) keyed by the
ensemble or run it covers; re-running an analysis replaces its file atomically. Reading a
name concatenates every key.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rulelab.store.atomic import atomic_write
from rulelab.store.errors import StoreError, first_line, write_errors

_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _check(part: str, what: str) -> str:
    if not _NAME.fullmatch(part):
        raise ValueError(f"{what} {part!r} must match {_NAME.pattern}")
    return part


def table_path(directory: Path, name: str, key: str) -> Path:
    return directory / _check(name, "analysis name") / f"{_check(key, 'key')}.parquet"


def write_table(directory: Path, name: str, key: str, frame: pd.DataFrame) -> Path:
    path = table_path(directory, name, key)
    table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
    with write_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: pq.write_table(table, f))
    return path


def read_key(directory: Path, name: str, key: str) -> pd.DataFrame | None:
    """The rows stored for one ``key``; None when there are none."""
    path = table_path(directory, name, key)
    if not path.is_file():
        return None
    try:
        return pq.read_table(path).to_pandas()
    except Exception as err:  # pyarrow raises several types for damaged files
        raise StoreError(f"corrupt analysis table {path}: {first_line(err)}") from None


def read_table(directory: Path, name: str) -> pd.DataFrame:
    """All keys of analysis ``name`` concatenated; an empty frame when there are none."""
    folder = directory / _check(name, "analysis name")
    frames = []
    for path in sorted(folder.glob("*.parquet")) if folder.is_dir() else []:
        try:
            frames.append(pq.read_table(path).to_pandas())
        except Exception as err:  # pyarrow raises several types for damaged files
            raise StoreError(f"corrupt analysis table {path}: {first_line(err)}") from None
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
