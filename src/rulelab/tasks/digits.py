"""Moved to :mod:`rulelab.studies.coexistence.digits_task` (issue 22: study M's digits / MNIST task
lives in its study's folder); this name re-exports it for code that imported it here."""

from rulelab.studies.coexistence.digits_task import *  # noqa: F403
