"""A lab directory, :class:`LabDir`: the one type a lab takes from the command line to the store
(issue 22; before, it was a ``Path | None``, a ``Path``, a ``Lab``, a ``str`` and a
``LabFiles`` that copied ``Lab``'s methods one by one).

The user's ``--lab`` (or ``rulelab.load(path)``, ``rulelab.train(lab=…)``: a ``str``, a
``Path`` or None) becomes a ``LabDir`` once, where it enters, by :meth:`LabDir.at`; below that
every function takes a ``LabDir``. Why this type rather than a path, a string or the
registry's :class:`~rulelab.store.Lab`: it is the one that can go everywhere. It is resolved
(``None`` or a relative path would mean another folder in another working directory or
environment), it is plain data that pickles to a Ray worker (no open registry), and a worker
can write its runs' files through it (checkpoints, metrics, snapshots, tracked tables) but
cannot reach the registry, which only the driver writes (DESIGN §3). :class:`~rulelab.store.Lab`
is a ``LabDir`` that has also opened the registry, so what needs only the files takes either.

Layout (:mod:`rulelab.store.lab` describes every file)::

    <lab>/registry.sqlite   <lab>/metrics/   <lab>/checkpoints/   <lab>/analyses/
    <lab>/snapshots/<run_id>/<epoch>.pt
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from rulelab.store import checkpoints, metrics, tables

ENV_VAR = "RULELAB_HOME"
DEFAULT_LAB = "rulelab-runs"
REGISTRY_FILE = "registry.sqlite"


def resolve_lab(path: str | Path | None = None) -> Path:
    """Explicit ``path``, else ``$RULELAB_HOME``, else ``./rulelab-runs`` (made absolute)."""
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR) or DEFAULT_LAB
    return Path(path).expanduser().absolute()


class LabDir:
    """A lab's resolved directory and its run files, without the registry (see the module
    docstring). Constructing one touches nothing on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root  # absolute: make one from user input with LabDir.at

    @classmethod
    def at(cls, path: str | Path | LabDir | None = None) -> LabDir:
        """The lab at ``path`` (a ``LabDir`` or ``Lab`` as it is), else ``$RULELAB_HOME``,
        else ``./rulelab-runs``."""
        return path if isinstance(path, LabDir) else LabDir(resolve_lab(path))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    @property
    def registry_path(self) -> Path:
        return self.root / REGISTRY_FILE

    @property
    def metrics_dir(self) -> Path:
        return self.root / "metrics"

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def analyses_dir(self) -> Path:
        return self.root / "analyses"

    def snapshots_dir(self, run_id: str) -> Path:
        return self.root / "snapshots" / run_id

    # --- run files: what a worker writes -------------------------------------------------
    def save_checkpoint(self, run_id: str, state: dict) -> None:
        checkpoints.save_checkpoint(self.checkpoints_dir, run_id, state)

    def load_checkpoint(self, run_id: str) -> dict | None:
        return checkpoints.load_checkpoint(self.checkpoints_dir, run_id)

    def write_metrics(self, run_id: str, frame: pd.DataFrame) -> None:
        metrics.write_metrics(self.metrics_dir, run_id, frame)

    def save_snapshot(self, run_id: str, epoch: int, params: dict) -> None:
        """Weights of ``run_id`` at ``epoch``: ``snapshots/<run_id>/<epoch>.pt``."""
        checkpoints.save_checkpoint(self.snapshots_dir(run_id), f"{int(epoch):09d}",
                                    {"epoch": epoch, "params": params})

    def snapshot_epochs(self, run_id: str) -> list[int]:
        folder = self.snapshots_dir(run_id)
        if not folder.is_dir():
            return []
        return sorted(int(p.stem) for p in folder.glob("*.pt") if p.stem.isdigit())

    def load_snapshot(self, run_id: str, epoch: int) -> dict | None:
        return checkpoints.load_checkpoint(self.snapshots_dir(run_id), f"{int(epoch):09d}",
                                           required=checkpoints.SNAPSHOT_KEYS)

    # --- analysis tables ---------------------------------------------------------------------
    def write_table(self, name: str, key: str, frame: pd.DataFrame) -> Path:
        """Store analysis ``name``'s rows for ``key`` (an ensemble or run id), replacing them."""
        return tables.write_table(self.analyses_dir, name, key, frame)

    def read_table(self, name: str) -> pd.DataFrame:
        return tables.read_table(self.analyses_dir, name)

    def read_run_table(self, name: str, key: str) -> pd.DataFrame | None:
        return tables.read_key(self.analyses_dir, name, key)
