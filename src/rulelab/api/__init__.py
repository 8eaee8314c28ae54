"""The Python API (issue 10): ``rulelab.load(path)`` → :class:`LoadedLab`, and
``rulelab.train(…)``, which trains a lab and returns it loaded (issue 23). The top layer
beside the command line: it may use the studies, the analyses and the engine; nothing below
imports it."""

from rulelab.api.loaded_lab import LoadedLab, load
from rulelab.api.stored_tables import UnknownAnalysis
from rulelab.api.train import train

__all__ = ["LoadedLab", "UnknownAnalysis", "load", "train"]
