"""The lab directory and its facade, :class:`Lab` (DESIGN §3).

Layout::

    <lab>/registry.sqlite          runs: config, status, summary, code version, device;
                                   run_files: hashes of each finished run's files and summary
    <lab>/metrics/<run_id>.parquet metric time series (long format)
    <lab>/checkpoints/<run_id>.pt  resumable training state
    <lab>/analyses/<name>/<key>.parquet  analysis results (tidy tables)
    <lab>/snapshots/<run_id>/<epoch>.pt  weights at chosen epochs (opt-in)
    <lab>/sweep.lock               held by the command writing runs (train, sweep)
    <lab>/damaged/…                files moved aside by a restart or `verify --repair`

The lab is found by :meth:`LabDir.at <rulelab.store.lab_dir.LabDir.at>` (explicit path, else
``$RULELAB_HOME``, else ``./rulelab-runs``); a :class:`Lab` is that :class:`LabDir` with its
registry opened. Nothing is created on disk until ``Lab(..., create=True)``, and nothing
written by a lab opened without it: reading a lab leaves its files as they were, and a
read-only lab (a read-only mount, read-only files) can be read (:attr:`Lab.read_only`).

Damaged contents do not stop reading: a registry row that cannot be trusted, or a metrics
file that does not read (where the caller allows it), is left out and described in
:attr:`Lab.warnings`, one line each, for the command to print. Listing runs first checks each
finished run's summary and files against their recorded hashes (:mod:`.integrity`, issue 24):
what is damaged is named in one line pointing to ``rulelab verify`` and left out.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rulelab.store import checkpoints, digests, integrity, metrics, tables
from rulelab.store.errors import StoreError, read_only, write_errors
from rulelab.store.lab_dir import REGISTRY_FILE, LabDir, resolve_lab
from rulelab.store.lock import creation_lock
from rulelab.store.paths import folder_problem, writable
from rulelab.store.registry import Registry, to_json
from rulelab.store.version import ENGINE_VERSION, code_version

__all__ = ["Lab", "LabDir", "labs_hint", "labs_inside", "resolve_lab"]
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


def labs_inside(folder: Path) -> list[Path]:
    """The labs one level below ``folder`` (sub-folders with a registry), sorted; none where
    ``folder`` is missing, a file or unreadable."""
    try:
        return sorted(p for p in folder.iterdir() if (p / REGISTRY_FILE).is_file())
    except OSError:
        return []


def labs_hint(folder: Path, most: int = 6) -> str:
    """What to do where ``folder`` is no lab: name the labs one level below it (a folder of
    labs, like ./rulelab-runs after `rulelab reproduce`), else how to make one."""
    labs = [p.name for p in labs_inside(folder)]
    if not labs:
        return ": run `rulelab train …` first or pass --lab"
    more = f" and {len(labs) - most} more" if len(labs) > most else ""
    return (f", but it holds {len(labs)}: {', '.join(labs[:most])}{more}; open one of them "
            f"(--lab {folder / labs[0]})")


class Lab(LabDir):
    """One lab directory with its run registry open: a :class:`LabDir` (its files) plus the
    registry, which only the driver writes. ``root``: a :class:`LabDir`, or what
    :meth:`LabDir.at` takes (the Python API's ``str``, ``Path`` or None)."""

    def __init__(self, root: LabDir | str | Path | None = None, *, create: bool = False) -> None:
        super().__init__(LabDir.at(root).root)
        self._registry = Registry(self.registry_path)
        self.warnings: list[str] = []  # damaged contents met while reading, one line each
        self._damage: list[integrity.Damage] | None = None  # found by the first listing
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"lab path {self.root} exists and is not a directory")
        if not self.root.exists():
            if not create:
                raise StoreError(f"no lab at {self.root}: run `rulelab train …` first or pass "
                                 "--lab")
            why = folder_problem(self.root)
            if why:
                raise StoreError(f"cannot create lab {self.root}: {why}")
        if create:
            with write_errors(self.root):
                self.root.mkdir(parents=True, exist_ok=True)
        # Another process may be creating the registry right now: wait for it to finish
        # before judging the file (a half-made registry is not a corrupt one).
        with creation_lock(self.root, shared=not create):
            initialized = self._registry.check() if self.registry_path.exists() else None
            if initialized is None and not create:
                raise StoreError(f"no lab at {self.root}{labs_hint(self.root)}")
            if initialized is False and not create:
                raise StoreError(f"lab registry {self.registry_path} is empty: run `rulelab "
                                 "train …` to initialize it or pass --lab")
            if not create:
                return
            if self.read_only:
                raise read_only(self.root)
            if not initialized:
                self._registry.create()
        with write_errors(self.root):
            self.metrics_dir.mkdir(exist_ok=True)
            self.checkpoints_dir.mkdir(exist_ok=True)

    @property
    def registry(self) -> Registry:
        """The registry itself, for ``rulelab verify`` (commands use the methods below)."""
        return self._registry

    @property
    def read_only(self) -> bool:
        """Whether this process cannot write the lab (a read-only mount or read-only files)."""
        return self.root.exists() and not (writable(self.root) and self._registry.writable)

    def warn(self, message: str) -> None:
        """Record one warning line (each distinct message once)."""
        if message not in self.warnings:
            self.warnings.append(message)

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

    def mark_running(self, run_ids: list[str], device: str,
                     engine_version: int = ENGINE_VERSION) -> None:
        """Set status ``running`` and record ``device``, :func:`code_version` and the engine
        version that trains them; the runs' file hashes are forgotten until they finish
        again."""
        self._registry.forget_stamps(run_ids)
        self._registry.update(
            run_ids, status="running", device=device, code_version=code_version(), error=None,
            engine_version=engine_version)

    def mark_pending(self, run_ids: list[str]) -> None:
        """Set status ``pending`` (runs a killed sweep left ``running``); the error is kept."""
        self._registry.update(run_ids, status="pending")

    def mark_done(self, run_id: str, summary: dict) -> None:
        text = to_json(summary)
        self._registry.update([run_id], stamps=self.file_stamps(run_id, text), status="done",
                              summary_json=text, error=None)

    def mark_failed(self, run_id: str, reason: str, summary: dict | None = None) -> None:
        """Set status ``failed`` with ``reason``; the stored summary is kept unless given."""
        fields: dict[str, object] = {"status": "failed", "error": reason}
        text = None if summary is None else to_json(summary)
        if text is not None:
            fields["summary_json"] = text
        self._registry.update([run_id], stamps=self.file_stamps(run_id, text), **fields)

    def file_stamps(self, run_id: str, summary_text: str | None) -> dict:
        """The hashes of a run's files as its worker left them, and of its summary text."""
        out = {"metrics": digests.file_stamp(metrics.metrics_path(self.metrics_dir, run_id)),
               "checkpoint": digests.file_stamp(checkpoints.checkpoint_path(
                   self.checkpoints_dir, run_id))}
        if summary_text is not None:
            out["summary"] = digests.text_stamp(summary_text)
        return out

    def stamps(self) -> dict[tuple[str, str], digests.Stamp]:
        """Every recorded hash, ``{(run_id, kind): Stamp}``."""
        return self._registry.stamps()

    def _rows(self) -> list[dict]:
        """The registry rows that can be trusted; the others become warnings. The first call
        checks each run's summary and files against their hashes (:mod:`.integrity`): one
        warning line names what is damaged, and runs with a damaged summary are left out."""
        rows = self._registry.rows(
            on_bad=lambda run_id, why: self.warn(f"run {run_id} is unreadable and left out: "
                                                 f"{why}; see `rulelab verify`"))
        if self._damage is None:
            stamps = self._registry.stamps()
            self._damage = [d for r in rows for d in integrity.row_damage(
                r, stamps, metrics.metrics_path(self.metrics_dir, r["run_id"]),
                checkpoints.checkpoint_path(self.checkpoints_dir, r["run_id"]))]
            if self._damage:
                self.warn(integrity.warning_line(self._damage, self.root))
        hidden = self._damaged("summary")
        return [r for r in rows if r["run_id"] not in hidden]

    def _damaged(self, kind: str) -> set[str]:
        """Ids of the runs whose ``kind`` the reading check found damaged (and named)."""
        return {d.run_id for d in self._damage or () if d.kind == kind}

    def runs(self) -> pd.DataFrame:
        """One row per run: the registry columns, then each config key, then each summary key
        (a summary key that clashes with an earlier column is named ``summary_<key>``)."""
        rows = self._rows()
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
        """``[{run_id, status, experiment, config, summary, error, code_version,
        engine_version, engine_switch}]``."""
        keys = ("run_id", "status", "experiment", "config", "summary", "error", "code_version",
                "engine_version", "engine_switch")
        return [{k: r[k] for k in keys} for r in self._rows()]

    # --- metrics -----------------------------------------------------------------------------
    def read_metrics(self, run_ids: list[str] | None = None, *,
                     skip_damaged: bool = False) -> pd.DataFrame:
        """Metric rows of ``run_ids`` (all when None). A file that does not read raises
        :class:`StoreError`, or with ``skip_damaged`` is left out with a warning; one the
        reading check named (its hash differs) is left out."""
        on_bad = (lambda path, why: self.warn(f"metrics file {path} is damaged and left out "
                                              f"({why}); see `rulelab verify`")
                  ) if skip_damaged else None
        if damaged := self._damaged("metrics"):  # named already: their curves are left out
            if run_ids is None:
                run_ids = sorted(p.stem for p in self.metrics_dir.glob("*.parquet"))
            run_ids = [r for r in run_ids if r not in damaged]
        return metrics.read_metrics(self.metrics_dir, run_ids, on_bad=on_bad)

    def check_metrics_files(self, runs: pd.DataFrame) -> list[str]:
        """Ids of the ``done`` runs in ``runs`` without a metrics file; warns when any."""
        done = runs.loc[runs["status"] == "done", "run_id"] if len(runs) else []
        named = self._damaged("metrics")  # in the reading check's line already
        missing = [r for r in done if r not in named
                   and not metrics.metrics_path(self.metrics_dir, r).is_file()]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more"
                                              if len(missing) > 5 else "")
            self.warn(f"{len(missing)} finished run(s) have no metrics file in "
                      f"{self.metrics_dir} (their curves are missing): {shown}; see `rulelab "
                      "verify`")
        return missing

    # --- checkpoints -------------------------------------------------------------------------
    def load_checkpoint(self, run_id: str) -> dict | None:
        """The run's checkpoint; one the reading check named damaged is refused (an analysis
        of wrong weights would look like a finding)."""
        if run_id in self._damaged("checkpoint"):
            path = checkpoints.checkpoint_path(self.checkpoints_dir, run_id)
            raise StoreError(f"checkpoint {path} is damaged (its hash differs from the one "
                             f"recorded); `rulelab verify --repair --lab {self.root}` retrains "
                             "that run")
        return super().load_checkpoint(run_id)

    def delete_checkpoint(self, run_id: str) -> None:
        checkpoints.delete_checkpoint(self.checkpoints_dir, run_id)

    # --- analysis tables ---------------------------------------------------------------------
    def write_table(self, name: str, key: str, frame: pd.DataFrame) -> Path:
        """Store analysis ``name``'s rows for ``key`` (an ensemble or run id), replacing them.
        On a read-only lab nothing is stored and a warning says so (the analysis still runs)."""
        if self.read_only:
            self.warn(f"lab {self.root} is read-only: the {name} table was not stored")
            return tables.table_path(self.analyses_dir, name, key)
        return super().write_table(name, key, frame)


def _union_keys(dicts) -> list[str]:
    """Keys of all dicts in first-seen order."""
    seen: dict[str, None] = {}
    for d in dicts:
        seen.update(dict.fromkeys(d))
    return list(seen)
