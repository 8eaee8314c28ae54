"""``rulelab sweep RECIPE`` (a YAML file, or ``STUDY/SCALE`` for a study's own recipe):
every run trained once, packed into ensembles, locally or on Ray; re-run to resume
(DESIGN §3–4). Everything is validated (the recipe, every run, the flags, the executor) before
the lab is opened for writing; ``--dry-run`` writes nothing at all. ``KEY=VALUE`` arguments
override the recipe (:mod:`rulelab.sweep.overrides`: ``base.epochs=50 seeds.count=2``)."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import typer

from rulelab.cli import options
from rulelab.cli.commands import command
from rulelab.cli.options import LabOpt
from rulelab.cli.settings_flags import check_bounds, settings_from_flags, settings_options
from rulelab.errors import UserError


def recipe_path(recipe: Path) -> Path:
    """``recipe`` itself, or a registered study's recipe named ``STUDY/SCALE``."""
    if recipe.exists() or len(recipe.parts) != 2 or recipe.suffix:
        return recipe
    from rulelab.study_registry import studies

    for s in studies():
        if s.name == recipe.parts[0] and recipe.parts[1] in s.scales():
            return s.recipe_path(recipe.parts[1])
    return recipe


KW = inspect.Parameter.KEYWORD_ONLY


def _param(name: str, annotation, default) -> inspect.Parameter:
    return inspect.Parameter(name, KW, annotation=annotation, default=default)


PARAMS = [
    _param("recipe", Path, typer.Argument(..., help="YAML recipe, or STUDY/SCALE (e.g. "
                                          "shortcut-saturation/paper)")),
    _param("overrides", list[str] | None, typer.Argument(
        None, metavar="KEY=VALUE", help="overrides of the recipe, checked as its YAML is: "
        "base.epochs=50 seeds.count=2 grid.ratio=[0.5,0.9] (a bare config key: base or grid)")),
    _param("lab", Path | None, LabOpt),
    _param("dry_run", bool, typer.Option(False, "--dry-run", help="print the plan; write nothing")),
    _param("executor", str, typer.Option("local", "--executor", help="local or ray")),
    _param("address", str | None, typer.Option(None, "--address", help="Ray cluster (auto, "
                                               "ray://…); default: start a local Ray runtime")),
    _param("cpus_per_chunk", int, typer.Option(1, "--cpus-per-chunk", help="Ray: CPUs (and "
                                               "torch threads) per chunk")),
    _param("gpus_per_chunk", float | None, typer.Option(
        None, "--gpus-per-chunk", help="Ray: GPUs per chunk (default 1 on cuda)")),
    *settings_options(from_recipe=True),  # --device, --max-members, …: rulelab.settings
]


def sweep(recipe: Path, overrides: list[str] | None, lab: Path | None, dry_run: bool,
          executor: str, address: str | None, cpus_per_chunk: int, gpus_per_chunk: float | None,
          **flags) -> None:
    """``rulelab sweep``: every value checked (flags, recipe, executor) before the lab is
    opened."""
    from rulelab.cli.execute import check_recipe, execute, plural, print_results
    from rulelab.report.terminal import console, err_console
    from rulelab.sweep import load_recipe, make_plan
    from rulelab.sweep.estimate import speed
    from rulelab.sweep.planner import describe_plan
    from rulelab.sweep.recipe import RecipeError

    if executor not in ("local", "ray"):
        raise UserError(f"--executor: {executor!r} is not allowed; use local or ray")
    check_bounds(flags)
    options.positive("--cpus-per-chunk", cpus_per_chunk)
    if gpus_per_chunk is not None and gpus_per_chunk < 0:
        raise UserError(f"--gpus-per-chunk: {gpus_per_chunk} is not allowed; it must be ≥ 0")
    if address is not None and executor != "ray":
        raise UserError("--address: only with --executor ray")
    try:
        the_recipe = load_recipe(recipe_path(recipe), parse_overrides(overrides))
    except RecipeError as e:
        raise UserError(str(e)) from None
    device = flags["device"] or the_recipe.execution.device
    # planning a GPU sweep needs no GPU here; on Ray the GPUs are the workers'
    here = not (dry_run or (executor == "ray" and device.startswith("cuda")))
    settings = settings_from_flags(the_recipe.execution, flags, trackers=_trackers(the_recipe),
                                   task=the_recipe.task, here=here)
    settings = settings.merged(threads=cpus_per_chunk if executor == "ray" else None)
    check_recipe(the_recipe, settings)
    if dry_run:
        _dry_run(the_recipe, recipe, settings, lab, console, describe_plan, make_plan, speed)
        return
    runner = _executor(executor, address, device, cpus_per_chunk, gpus_per_chunk)
    lab = options.lab_dir(lab)
    options.check_lab_path(lab)
    try:
        if executor == "ray":
            runner.start()  # a cluster that cannot be reached fails before the lab is written
        the_lab, result = execute(the_recipe, settings, lab, command="sweep", executor=runner,
                                  interleave_seeds=True)
    except UserError:
        raise
    except Exception as e:  # RayUnavailable from start()
        from rulelab.sweep.executors import RayUnavailable

        if isinstance(e, RayUnavailable):
            raise UserError(str(e)) from None
        raise
    finally:
        if executor == "ray":
            runner.close()
    plan = result.plan
    err_console.print(
        f"trained {result.done + result.failed} of {plural(plan.n_todo, 'run')} "
        f"({result.done} done, {result.failed} failed); {plan.n_done} were done before",
        markup=False, highlight=False)
    if result.failed:
        err_console.print("failure reasons: rulelab status", markup=False)
    print_results(the_lab, the_recipe, result)
    if result.lost:
        err_console.print(f"{len(result.lost)} chunk(s) lost ({result.lost[0]}); their runs "
                          "are pending again: re-run the sweep to retry them", markup=False)
        sys.exit(1)


sweep_cmd = command(sweep, PARAMS, "Run a recipe: every run trained once, packed into "
                    "ensembles; re-run to resume.")


def _trackers(recipe) -> dict:
    """What the recipe's task can track (``--track`` is checked against it)."""
    from rulelab.study_registry import task

    return task(recipe.task).trackers


def parse_overrides(items: list[str] | None) -> list:
    """``key=value`` arguments → overrides (:mod:`rulelab.sweep.overrides`)."""
    from rulelab.sweep.overrides import parse_override

    return [parse_override(item) for item in items or ()]


def _dry_run(the_recipe, recipe, settings, lab, console, describe_plan, make_plan, speed):
    from rulelab.store import StoreError

    existing = options.existing_lab(options.lab_dir(lab))
    try:
        plan = make_plan(the_recipe, existing, settings)
    except StoreError as e:  # e.g. a damaged checkpoint met while reading resume epochs
        raise UserError(str(e)) from None
    given = f" with {' '.join(the_recipe.overrides)}" if the_recipe.overrides else ""
    console.print(f"plan for {recipe}{given} (dry run: nothing written)", markup=False,
                  highlight=False)
    gpu = speed("cuda", settings.precision, plan.task)
    for line in describe_plan(plan, cpu=speed("cpu"), gpu=gpu):
        console.print(line, markup=False, highlight=False)


def _executor(name: str, address, device: str, cpus: int, gpus: float | None):
    from rulelab.sweep.executors import RayExecutor, RayUnavailable, import_ray

    if name == "local":
        return None  # the driver's: LocalExecutor(settings.parallel_chunks)
    try:
        import_ray()
    except RayUnavailable as e:
        raise UserError(f"--executor ray: {e}") from None
    if gpus is None:
        gpus = 1.0 if device.startswith("cuda") else 0.0
    return RayExecutor(address, cpus_per_chunk=cpus, gpus_per_chunk=gpus)
