"""Moved to :mod:`rulelab.studies.coexistence.feedforward` (issue 22: study M's digits network
lives in its study's folder); this name re-exports it for code that imported it here."""

from rulelab.studies.coexistence.feedforward import *  # noqa: F403
