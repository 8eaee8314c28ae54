"""Moved to :mod:`rulelab.studies.coexistence.modular_task` (issue 22: study M's
modular-arithmetic task lives in its study's folder); this name re-exports it for code that
imported it here."""

from rulelab.studies.coexistence.modular_task import *  # noqa: F403
