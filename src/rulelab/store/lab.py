"""The lab directory and its facade, :class:`Lab` (DESIGN §3).

Layout::

    <lab>/registry.sqlite          runs: config, status, summary, code version, device
    <lab>/metrics/<run_id>.parquet metric time series (long format)
    <lab>/checkpoints/<run_id>.pt  resumable training state
    <lab>/analyses/<name>/<key>.parquet  analysis results (tidy tables)
    <lab>/snapshots/<run_id>/<epoch>.pt  weights at chosen epochs (opt-in)

The lab is found by :func:`resolve_lab` (explicit path, else ``$RULELAB_HOME``, else
``./rulelab-runs``). Nothing is created on disk until ``Lab(..., create=True)``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from rulelab.store import checkpoints, metrics, tables
from rulelab.store.errors import StoreError
from rulelab.store.registry import Registry, to_json
from rulelab.store.version import code_version

ENV_VAR = "RULELAB_HOME"
DEFAULT_LAB = "rulelab-runs"
REGISTRY_FILE = "registry.sqlite"
RUN_COLUMNS = (
    "run_id",
    "experiment",
    "task",
    "status",
    "error",
    "code_version",
    "device",
    "created_at",
    "updated_at",
)


def resolve_lab(path: str | Path | None = None) -> Path:
    """Explicit ``path``, else ``$RULELAB_HOME``, else ``./rulelab-runs`` (made absolute)."""
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR) or DEFAULT_LAB
    return Path(path).expanduser().absolute()


class Lab:
    """One lab directory: run registry, metrics and checkpoints."""

    def __init__(self, root: str | Path | None = None, *, create: bool = False) -> None:
        self.root = resolve_lab(root)
        self.registry_path = self.root / REGISTRY_FILE
        self.metrics_dir = self.root / "metrics"
        self.checkpoints_dir = self.root / "checkpoints"
        self.analyses_dir = self.root / "analyses"
        self._registry = Registry(self.registry_path)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"lab path {self.root} exists and is not a directory")
        if self.registry_path.exists():
            initialized = self._registry.check()
        elif create:
            initialized = False
        else:
            raise StoreError(f"no lab at {self.root}: run `rulelab train …` first or pass --lab")
        if not initialized:
            if not create:
                raise StoreError(
                    f"lab registry {self.registry_path} is empty: run `rulelab train …` "
                    "to initialize it or pass --lab"
                )
            self.root.mkdir(parents=True, exist_ok=True)
            self._registry.create()
        if create:
            self.metrics_dir.mkdir(exist_ok=True)
            self.checkpoints_dir.mkdir(exist_ok=True)

    def __repr__(self) -> str:
        return f"Lab({str(self.root)!r})"

    # --- registry ----------------------------------------------------------------------------
    def register(self, runs: list[tuple[str, dict]], experiment: str) -> list[str]:
        """Insert a pending row for each new ``(run_id, flat_config)``; existing rows are left
        untouched. Returns the ids in the given order."""
        self._registry.insert_pending(runs, experiment)
        return [run_id for run_id, _ in runs]

    def status(self, run_id: str) -> str | None:
        return self._registry.statuses([run_id]).get(run_id)

    def statuses(self, run_ids: list[str]) -> dict[str, str]:
        """Status of each known id; unknown ids are absent from the result."""
        return self._registry.statuses(run_ids)

    def mark_running(self, run_ids: list[str], device: str) -> None:
        """Set status ``running`` and record ``device`` and :func:`code_version`."""
        self._registry.update(
            run_ids, status="running", device=device, code_version=code_version(), error=None
        )

    def mark_done(self, run_id: str, summary: dict) -> None:
        self._registry.update([run_id], status="done", summary_json=to_json(summary), error=None)

    def mark_failed(self, run_id: str, reason: str, summary: dict | None = None) -> None:
        """Set status ``failed`` with ``reason``; the stored summary is kept unless given."""
        fields: dict[str, object] = {"status": "failed", "error": reason}
        if summary is not None:
            fields["summary_json"] = to_json(summary)
        self._registry.update([run_id], **fields)

    def runs(self) -> pd.DataFrame:
        """One row per run: the registry columns, then each config key, then each summary key
        (a summary key that clashes with an earlier column is named ``summary_<key>``)."""
        rows = self._registry.rows()
        config_keys = _union_keys(r["config"] for r in rows)
        config_keys = [k for k in config_keys if k not in RUN_COLUMNS]
        taken = set(RUN_COLUMNS) | set(config_keys)
        summary_keys = _union_keys(r["summary"] for r in rows)
        summary_names = {k: f"summary_{k}" if k in taken else k for k in summary_keys}
        records = []
        for r in rows:
            record = {c: r[c] for c in RUN_COLUMNS}
            record.update({k: r["config"].get(k) for k in config_keys})
            record.update({summary_names[k]: r["summary"].get(k) for k in summary_keys})
            records.append(record)
        columns = [*RUN_COLUMNS, *config_keys, *summary_names.values()]
        return pd.DataFrame.from_records(records, columns=columns)

    def runs_json(self) -> list[dict]:
        """``[{run_id, status, experiment, config, summary, error, code_version}]``."""
        keys = ("run_id", "status", "experiment", "config", "summary", "error", "code_version")
        return [{k: r[k] for k in keys} for r in self._registry.rows()]

    # --- metrics -----------------------------------------------------------------------------
    def write_metrics(self, run_id: str, frame: pd.DataFrame) -> None:
        metrics.write_metrics(self.metrics_dir, run_id, frame)

    def read_metrics(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return metrics.read_metrics(self.metrics_dir, run_ids)

    # --- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, run_id: str, state: dict) -> None:
        checkpoints.save_checkpoint(self.checkpoints_dir, run_id, state)

    def load_checkpoint(self, run_id: str) -> dict | None:
        return checkpoints.load_checkpoint(self.checkpoints_dir, run_id)

    def delete_checkpoint(self, run_id: str) -> None:
        checkpoints.delete_checkpoint(self.checkpoints_dir, run_id)

    # --- weight snapshots over training (for analyses over checkpoints) ------------------------
    def save_snapshot(self, run_id: str, epoch: int, params: dict) -> None:
        """Weights of ``run_id`` at ``epoch``: ``snapshots/<run_id>/<epoch>.pt``."""
        folder = self.root / "snapshots" / run_id
        folder.mkdir(parents=True, exist_ok=True)
        checkpoints.save_checkpoint(folder, f"{int(epoch):09d}", {"epoch": epoch, "params": params})

    def snapshot_epochs(self, run_id: str) -> list[int]:
        folder = self.root / "snapshots" / run_id
        return sorted(int(p.stem) for p in folder.glob("*.pt")) if folder.is_dir() else []

    def load_snapshot(self, run_id: str, epoch: int) -> dict | None:
        return checkpoints.load_checkpoint(self.root / "snapshots" / run_id, f"{int(epoch):09d}")

    # --- analysis tables ---------------------------------------------------------------------
    def write_table(self, name: str, key: str, frame: pd.DataFrame) -> Path:
        """Store analysis ``name``'s rows for ``key`` (an ensemble or run id), replacing them."""
        return tables.write_table(self.analyses_dir, name, key, frame)

    def read_table(self, name: str) -> pd.DataFrame:
        return tables.read_table(self.analyses_dir, name)

    def read_run_table(self, name: str, key: str) -> pd.DataFrame | None:
        return tables.read_key(self.analyses_dir, name, key)


def _union_keys(dicts) -> list[str]:
    """Keys of all dicts in first-seen order."""
    seen: dict[str, None] = {}
    for d in dicts:
        seen.update(dict.fromkeys(d))
    return list(seen)
