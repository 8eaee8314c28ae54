"""``rulelab train TASK`` and ``rulelab data TASK``, one per task of every registered study.

``train`` takes a flag per config field (every value flag takes one or more values: lists
expand to a grid × ``--seeds``, :mod:`rulelab.grid`) and the execution flags shared with
``sweep`` and ``reproduce``, generated from :class:`rulelab.settings.Settings`
(:mod:`rulelab.cli.settings_flags`: ``--device``, ``--precision``, ``--max-members``,
``--checkpoint-every`` in epochs, ``--micro-batch``, ``--snapshots``, ``--track``, …). The flags
become a recipe (:func:`rulelab.sweep.recipe.recipe_from_flags`) that trains through the planner
and the one driver, like ``reproduce`` and ``sweep``. Everything is validated (every run built)
before the lab is opened. ``rulelab.train(task, **config)`` builds its recipe here too
(:func:`defaults`, :func:`train_recipe`), so Python and the command line train the same runs.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import typer

from rulelab.cli import options
from rulelab.cli.commands import base_type, command, field_option, is_bool, list_flags
from rulelab.cli.settings_flags import settings_from_flags, settings_options
from rulelab.errors import UserError
from rulelab.grid import check_size, seed_range_problem
from rulelab.settings import Settings

KW = inspect.Parameter.KEYWORD_ONLY


def _opt(name: str, annotation, default, *decls: str, help: str = "") -> inspect.Parameter:
    return inspect.Parameter(name, KW, annotation=annotation,
                             default=typer.Option(default, *decls, help=help))


def execution_options(task) -> list[inspect.Parameter]:
    """The options every `train` shares: seeds, experiment, the execution settings (generated
    from :class:`Settings`, the task's own checkpoint interval as default) and the lab."""
    tracked = ",".join(sorted(task.trackers)) or "none for this task"
    return [
        _opt("seeds", int, 1, "--seeds", help="number of model seeds"),
        _opt("seed_start", int, 0, "--seed-start", help="first model seed (seeds run from here)"),
        _opt("experiment", str, task.name, "--experiment",
             help="name the runs are filed under in the lab (rulelab status)"),
        *settings_options(from_recipe=False,
                          defaults={"checkpoint_every": task.checkpoint_every},
                          notes={"track": f": {tracked}"}),
        inspect.Parameter("lab", KW, annotation=Path | None, default=options.LabOpt),
    ]


EXECUTION = ("seeds", "seed_start", "experiment", *Settings.FLAGS, "lab")


def config_options(task) -> list[inspect.Parameter]:
    cls = task.config
    out = []
    for name, field in cls.model_fields.items():
        if name in ("task", "seed") or name in task.hidden:
            continue
        default = task.defaults.get(name, field.default)
        out.append(field_option(cls, name, field, default, many=not is_bool(field)))
    return out


def train_command(task):
    """The ``rulelab train TASK`` command of ``task``."""
    params = config_options(task) + execution_options(task)

    def run(**values) -> None:
        train(task, {k: values.pop(k) for k in EXECUTION}, values)

    return command(run, params, task.help), list_flags(params)


def defaults(task) -> tuple[dict, dict]:
    """``rulelab train TASK``'s defaults, as its command would receive them: the execution
    values and the config values (lists for list flags) — what :func:`rulelab.train` starts
    from, so Python and the command line build the same runs."""
    ex, values = {}, {}
    for p in config_options(task) + execution_options(task):
        (ex if p.name in EXECUTION else values)[p.name] = p.default.default
    return ex, values


def train(task, ex: dict, values: dict) -> None:
    from rulelab.cli.execute import execute, print_results

    recipe, settings = train_recipe(task, ex, values)
    the_lab, result = execute(recipe, settings, options.lab_dir(ex["lab"]), command="train")
    print_results(the_lab, recipe, result)


def train_recipe(task, ex: dict, values: dict):
    """The checked recipe and settings of a ``train`` command line (``ex``: the execution
    values, ``values``: the config values); one :class:`UserError` line naming the flag for
    any bad value, before anything is written."""
    from rulelab.cli.execute import check_recipe
    from rulelab.sweep.recipe import recipe_from_flags

    options.positive("--seeds", ex["seeds"])
    options.positive("--seed-start", ex["seed_start"], 0)
    settings = settings_from_flags(Settings(), {k: ex[k] for k in Settings.FLAGS},
                                   trackers=task.trackers, task=task.name)
    if task.prepare:
        values = task.prepare(values)
    lists = {k: v for k, v in values.items() if isinstance(v, list)}
    check_size({task.config.flag(k): len(v) for k, v in lists.items()}, ex["seeds"])
    order = [*task.axes, *(k for k in values if k not in task.axes)]
    grid = {k: lists[k] for k in order if k in lists and len(lists[k]) > 1}
    base = {k: (v[0] if isinstance(v, list) else v) for k, v in values.items() if k not in grid}
    base = {k: v for k, v in base.items() if v is not None or k in task.defaults}
    seeds = range(ex["seed_start"], ex["seed_start"] + ex["seeds"])
    if why := seed_range_problem(task.config, ex["seed_start"], ex["seeds"]):
        alone = why.startswith(f"{ex['seed_start']} ")  # the first seed is out of range
        raise UserError(f"{'--seed-start' if alone else '--seed-start/--seeds'}: {why}")
    options.check_experiment(ex["experiment"])
    # every run is built here, once, and validated (one line naming the flag) before any write
    recipe = recipe_from_flags(task.name, ex["experiment"], base, grid, seeds, settings)
    check_recipe(recipe, settings)
    return recipe, settings


def data_command(task):
    """The ``rulelab data TASK`` command: one data set of the task as Parquet."""
    from rulelab.study import resolve

    cls, fields = task.config, task.data.fields
    params = [field_option(cls, f, cls.model_fields[f], cls.model_fields[f].default,
                           many=not is_bool(cls.model_fields[f])) for f in fields]
    for p in params:  # one value each (several are refused by name below): help says so
        if not is_bool(cls.model_fields[p.name]):
            p.default.metavar = f"<{base_type(cls.model_fields[p.name].annotation).__name__}>"
    params.append(_opt("out", Path, ..., "--out", help="Parquet file to write"))

    def run(out: Path, **values) -> None:
        from rulelab.config import make_config
        from rulelab.report.terminal import console

        for name, value in values.items():
            if isinstance(value, list) and len(value) != 1:
                raise UserError(f"{cls.flag(name)}: {len(value)} values given; data {task.name} "
                                "writes one data set, give one value")
        single = {k: v[0] if isinstance(v, list) else v for k, v in values.items()}
        cfg = make_config(cls, **single)
        options.check_out("--out", out, ".parquet")
        data = resolve(task.data.make)(cfg)  # bad input raises before anything is written
        line = options.write_out(out, lambda path: resolve(task.data.write)(data, path))
        console.print(line, markup=False, highlight=False)

    doc = f"Write one data set of task {task.name} (its train / eval splits), one row each."
    return command(run, params, doc), list_flags(params)
