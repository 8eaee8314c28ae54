"""Moved to :mod:`rulelab.studies.shortcut_saturation.task` (issue 22: study S's MPSP task
lives in its study's folder); this name re-exports it for code that imported it here."""

from rulelab.studies.shortcut_saturation.task import *  # noqa: F403
