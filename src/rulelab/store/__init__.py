"""The embedded store: a lab directory with a SQLite run registry, Parquet metrics and
checkpoints (DESIGN §3)."""

from rulelab.store.errors import StoreError
from rulelab.store.lab import Lab, resolve_lab
from rulelab.store.lab_dir import LabDir
from rulelab.store.load import LabFrames, load
from rulelab.store.version import code_version

__all__ = ["Lab", "LabDir", "LabFrames", "StoreError", "code_version", "load", "resolve_lab"]
