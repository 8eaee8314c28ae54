"""The study packages, one folder each. The registry that lists them is
:mod:`rulelab.study_registry` (beside :mod:`rulelab.study`, so the engine looks studies up
without importing up into this folder); this name re-exports it for code that imported it here."""

from rulelab.study_registry import *  # noqa: F403
from rulelab.study_registry import STUDIES, config_from_flat, studies, study, study_of, task, tasks  # noqa: F401
