"""Metric time series as Parquet, one file per run: ``metrics/<run_id>.parquet`` (DESIGN §3).

Long format with a fixed schema: ``run_id`` (str), ``epoch`` (int64), ``split`` (str), ``metric``
(str), ``value`` (float64). The trainer passes all rows so far at every flush; each write
atomically replaces the run's file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rulelab.store.atomic import atomic_write
from rulelab.store.errors import StoreError, first_line, write_errors

SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("epoch", pa.int64()),
        ("split", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
    ]
)
COLUMNS = tuple(SCHEMA.names)


def metrics_path(directory: Path, run_id: str) -> Path:
    return directory / f"{run_id}.parquet"


def write_metrics(directory: Path, run_id: str, frame: pd.DataFrame) -> None:
    """Replace ``<directory>/<run_id>.parquet`` with ``frame`` (``run_id`` column optional)."""
    frame = frame.copy()
    if "run_id" not in frame.columns:
        frame["run_id"] = run_id
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"metrics frame lacks column(s) {missing}; expected {list(COLUMNS)}")
    others = set(frame["run_id"].astype(str)) - {run_id}
    if others:
        raise ValueError(f"metrics frame for run {run_id} has rows of run(s) {sorted(others)}")
    table = pa.Table.from_pandas(frame[list(COLUMNS)], schema=SCHEMA, preserve_index=False)
    path = metrics_path(directory, run_id)
    with write_errors(path):
        atomic_write(path, lambda f: pq.write_table(table, f))


def read_metrics(directory: Path, run_ids: list[str] | None = None,
                 on_bad: Callable[[Path, str], None] | None = None) -> pd.DataFrame:
    """Rows of the given runs (all runs when None); runs without a file are skipped.

    A file that does not read raises :class:`StoreError`, or, given ``on_bad``, is skipped
    and reported as ``on_bad(path, why)`` (a report still shows the other runs)."""
    if run_ids is None:
        paths = sorted(directory.glob("*.parquet")) if directory.is_dir() else []
    else:
        paths = [metrics_path(directory, r) for r in dict.fromkeys(run_ids)]
        paths = [p for p in paths if p.is_file()]
    tables = [SCHEMA.empty_table()]
    for path in paths:
        try:
            tables.append(pq.read_table(path, schema=SCHEMA))
        except (OSError, pa.ArrowException, ValueError) as err:
            if on_bad is None:
                raise StoreError(f"corrupt metrics file {path}: {first_line(err)}") from None
            on_bad(path, first_line(err))
    return pa.concat_tables(tables).to_pandas()
