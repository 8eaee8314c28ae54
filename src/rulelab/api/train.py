"""``rulelab.train(…)``: train a lab from Python and get it back loaded (issue 23).

::

    lab = rulelab.train("mpsp", layers=[1, 2], ratio=[0.5, 0.9], epochs=200, seeds=4,
                        lab="runs/mine")                       # as `rulelab train mpsp …`
    lab = rulelab.train(recipe="shortcut-saturation/quick",    # a study's recipe, or a path,
                        overrides={"base.epochs": 50, "seeds.count": 2})  # as `rulelab sweep`

Thin on purpose: the keywords become the values the command line's flags give
(:func:`rulelab.cli.train.defaults`), checked and built into a recipe by the same code
(:func:`rulelab.cli.train.train_recipe`), and trained by the one run path
(:func:`rulelab.cli.execute.execute`: planner, driver, registry). So the runs, their ids and
their numbers are those of the same command line, and re-running resumes. Bad input raises
:class:`~rulelab.errors.UserError` before anything is written, worded for Python: ``epochs: 0
is not allowed; …``, not ``--epochs``.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from pathlib import Path

from rulelab.errors import UserError

LIST_LIKE = (list, tuple)
KIND_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "True or False",
              type(None): "None"}


def train(task: str | None = None, recipe: str | Path | None = None, *,
          lab: str | Path | None = None,
          overrides: Mapping[str, object] | Sequence[str] | None = None, **config):
    """Train ``task`` with ``config`` (config keys and ``rulelab train``'s execution keywords:
    ``seeds``, ``device``, ``snapshots``, ``quiet``, …; a list expands to a grid), or
    ``recipe`` (a YAML path or ``STUDY/SCALE``) with ``overrides`` (``{"base.epochs": 50}`` or
    ``["base.epochs=50"]``; a config keyword is a bare-key override), into ``lab``; returns
    the lab loaded (:func:`rulelab.load`)."""
    from rulelab.api.loaded_lab import load
    from rulelab.cli.execute import as_keys, execute
    from rulelab.store import LabDir

    try:
        if recipe is None:
            if overrides:
                raise UserError("overrides: only with a recipe; give config keys as keywords "
                                "(epochs=50)")
            the_recipe, settings = _from_config(task, lab, config)
        else:
            the_recipe, settings = _from_recipe(task, recipe, overrides, config)
        the_lab, _ = execute(the_recipe, settings, LabDir.at(lab), command="train",
                             interleave_seeds=recipe is not None)
    except UserError as e:
        raise UserError(as_keys(str(e))) from None
    return load(the_lab)


def _from_config(task, lab, config: dict):
    """The recipe of ``rulelab train TASK`` with these keywords as its flags."""
    from rulelab.cli.train import defaults, execution_options, train_recipe
    from rulelab.study_registry import tasks

    spec = tasks().get(task) if isinstance(task, str) else None
    if spec is None:
        raise UserError(f"task: {task!r} is not allowed; use one of {', '.join(sorted(tasks()))}"
                        " (or recipe=…)")
    ex, values = defaults(spec)
    kinds = {p.name: p.annotation for p in execution_options(spec)}
    for name, value in config.items():
        if name in ex and name != "lab":
            ex[name] = _execution_value(name, value, kinds[name])
        elif name in values:
            values[name] = _config_value(name, value, values[name])
        else:
            raise UserError(f"{name}: not a keyword of train({task!r}); use config keys "
                            f"({', '.join(values)}) or execution keys "
                            f"({', '.join(k for k in ex if k != 'lab')})")
    ex["lab"] = None if lab is None else Path(lab)
    return train_recipe(spec, ex, values)


def _execution_value(name: str, value, annotation):
    """A keyword of ``rulelab train``'s execution options, of its flag's type."""
    if name == "track" and isinstance(value, LIST_LIKE):
        value = ",".join(map(str, value))
    if name == "track_every" and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    kinds = typing.get_args(annotation) or (annotation,)
    if value is None and type(None) in kinds:
        return value
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    for kind in kinds:
        if kind is not type(None) and isinstance(value, kind) and not (
                kind is int and isinstance(value, bool)):
            return value
    names = " or ".join(KIND_NAMES.get(k, getattr(k, "__name__", str(k))) for k in kinds)
    raise UserError(f"{name}: {value!r} is not allowed; give {names}")


def _config_value(name: str, value, default):
    """A config keyword as its flag gives it: a list for a list flag (a scalar → one value)."""
    if isinstance(default, list) or (default is None and isinstance(value, LIST_LIKE)):
        values = list(value) if isinstance(value, LIST_LIKE) else [value]
        if not values:
            raise UserError(f"{name}: [] is not allowed; give a value or a non-empty list")
        return values
    if isinstance(value, LIST_LIKE):
        raise UserError(f"{name}: {value!r} is not allowed; give one value (True or False)")
    return value


def _from_recipe(task, recipe, overrides, config: dict):
    """The recipe at ``recipe`` with ``overrides``, and its execution settings with the
    execution keywords of ``config`` (the others are bare-key overrides)."""
    from rulelab.cli.execute import check_recipe
    from rulelab.cli.settings_flags import settings_from_flags
    from rulelab.cli.sweep import recipe_path
    from rulelab.settings import Settings
    from rulelab.study_registry import task as task_of
    from rulelab.sweep.overrides import make_override, parse_override
    from rulelab.sweep.recipe import RecipeError, load_recipe

    if isinstance(overrides, Mapping):
        given = [make_override(k, v) for k, v in overrides.items()]
    elif isinstance(overrides, str):
        raise UserError(f"overrides: {overrides!r} is not allowed; give a dict "
                        "({'base.epochs': 50}) or a list of 'key=value' strings")
    else:
        given = [parse_override(str(o)) for o in overrides or ()]
    execution = {k: config.pop(k) for k in list(config) if k in Settings.model_fields}
    given += [make_override(k, v) for k, v in config.items()]
    try:
        the_recipe = load_recipe(recipe_path(Path(recipe)), given)
    except RecipeError as e:
        raise UserError(str(e)) from None
    if task is not None and task != the_recipe.task:
        raise UserError(f"task: {task!r} is not allowed with recipe {str(recipe)!r}, whose "
                        f"task is {the_recipe.task!r}; leave task out")
    # as `rulelab sweep`'s flags, but an explicit False is given (a keyword, not a switch)
    settings = settings_from_flags(the_recipe.execution, execution, off_is_unset=False,
                                   trackers=task_of(the_recipe.task).trackers,
                                   task=the_recipe.task)
    check_recipe(the_recipe, settings)
    return the_recipe, settings
