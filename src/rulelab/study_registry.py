"""The one registry of studies (issue 9): each study is a package listed here, one line each.

A study package defines ``STUDY`` (:class:`rulelab.study.Study`). Packages are named by
string and imported on first look-up, so this module imports no study: the engine, the
command line and the report may look tasks and studies up here without importing what
they serve (the layer contract in ``tests/test_layers.py``). To add a study, add its
package below.
"""

from __future__ import annotations

import functools
import importlib

from rulelab.errors import UserError

STUDIES = (
    "rulelab.studies.shortcut_saturation",  # study S: shortcut saturation (SPEC S)
    "rulelab.studies.coexistence",  # study M: memorization–generalization coexistence (SPEC M)
    "rulelab.studies.sparse_parity",  # sparse parity: hidden progress (Barak et al. 2022)
)


@functools.cache
def studies() -> tuple:
    """Every registered :class:`~rulelab.study.Study`, in registry order."""
    return tuple(importlib.import_module(name).STUDY for name in STUDIES)


def study(name: str):
    """The study called ``name`` (e.g. ``shortcut-saturation``)."""
    for s in studies():
        if s.name == name:
            return s
    raise UserError(f"no study {name!r}; use one of {', '.join(s.name for s in studies())}")


@functools.cache
def tasks() -> dict:
    """``{task name: Task}`` over every study."""
    out = {}
    for s in studies():
        for t in s.tasks:
            if t.name in out:
                raise RuntimeError(f"task {t.name!r} is declared by two studies")
            out[t.name] = t
    return out


def task(name: str):
    """The :class:`~rulelab.study.Task` whose configs carry ``task = name``."""
    found = tasks().get(name)
    if found is None:
        raise UserError(f"no task {name!r}; use one of {', '.join(sorted(tasks()))}")
    return found


def study_of(task_name: str):
    """The study that declares task ``task_name``."""
    for s in studies():
        if any(t.name == task_name for t in s.tasks):
            return s
    raise UserError(f"no task {task_name!r}; use one of {', '.join(sorted(tasks()))}")


def config_from_flat(flat: dict):
    """Rebuild a config object from its stored flat dict (its ``task`` key picks the class)."""
    return task(flat["task"]).config(**flat)
