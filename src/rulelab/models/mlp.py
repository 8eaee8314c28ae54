"""Moved to :mod:`rulelab.studies.coexistence.mlp` (issue 22: study M's two-layer MLP
lives in its study's folder); this name re-exports it for code that imported it here."""

from rulelab.studies.coexistence.mlp import *  # noqa: F403
