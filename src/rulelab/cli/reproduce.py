"""``rulelab reproduce STUDY --scale S``: a study end to end — its recipe
``recipes/S.yaml`` trained through the planner and the one driver, then the study's own
analyses, printed tables and report (``reports/STUDY-S.html`` by default), one command per
registered study (:class:`rulelab.study.Study`)."""

from __future__ import annotations

import inspect
import time
from pathlib import Path

import typer

from rulelab.cli import options
from rulelab.cli.commands import command
from rulelab.cli.execute import next_steps
from rulelab.cli.settings_flags import settings_from_flags, settings_options
from rulelab.errors import UserError

KW = inspect.Parameter.KEYWORD_ONLY


def reproduce_command(study):
    """The ``rulelab reproduce NAME`` command of ``study``."""
    scales = study.scales()
    params = [
        inspect.Parameter("scale", KW, annotation=str, default=typer.Option(
            "quick", "--scale", help=" or ".join(scales))),
        inspect.Parameter("out", KW, annotation=Path | None, default=typer.Option(
            None, "--out", help=f"default reports/{study.name}-<scale>.html")),
        inspect.Parameter("lab", KW, annotation=Path | None, default=typer.Option(
            None, "--lab", help=f"default rulelab-runs/{study.name}-<scale>")),
        *settings_options(from_recipe=True),  # --device, --precision, …: rulelab.settings
        inspect.Parameter("overrides", KW, annotation=list[str] | None, default=typer.Argument(
            None, metavar="KEY=VALUE", help="overrides of the scale's recipe, checked as its "
            "YAML is (base.epochs=50 seeds.count=2); default lab and report then end in a tag "
            "of them")),
    ]

    def run(scale: str, out: Path | None, lab: Path | None, overrides: list[str] | None,
            **flags) -> None:
        reproduce(study, scale, out, lab, flags, overrides=overrides or ())

    return command(run, params, f"{study.title}: its recipe, analyses and report.")


def reproduce(study, scale, out, lab, flags: dict, *, overrides=()) -> None:
    """Train ``study``'s recipe of ``scale`` (with ``overrides``) with the execution ``flags``
    given (:mod:`rulelab.cli.settings_flags`), then run its reproduction."""
    from rulelab.cli.execute import check_recipe, execute
    from rulelab.cli.sweep import parse_overrides
    from rulelab.report.terminal import console
    from rulelab.store import StoreError
    from rulelab.study import Reproduction, resolve
    from rulelab.study_registry import task
    from rulelab.sweep.recipe import RecipeError, load_recipe

    if scale not in study.scales():
        raise UserError(f"--scale: {scale!r} is not allowed; use one of "
                        f"{', '.join(study.scales())}")
    try:
        given = parse_overrides(list(overrides))
        name = f"{study.name}-{scale}" + (f"-{override_tag(given)}" if given else "")
        out = options.check_out("--out", out or Path("reports") / f"{name}.html")
        recipe = load_recipe(study.recipe_path(scale), given)
    except RecipeError as e:
        raise UserError(str(e)) from None
    settings = settings_from_flags(recipe.execution, flags, trackers=task(recipe.task).trackers,
                                   task=recipe.task)
    check_recipe(recipe, settings)
    lab = options.lab_dir(lab or Path("rulelab-runs") / name)
    t0 = time.perf_counter()
    the_lab, _ = execute(recipe, settings, lab, command="reproduce")
    train_seconds = time.perf_counter() - t0
    ids = tuple(c.run_id for c in recipe.configs())
    try:
        resolve(study.reproduce)(Reproduction(study, scale, recipe, the_lab, ids, out,
                                              settings.device, console, train_seconds))
    except StoreError as e:  # reading the lab back or writing the report
        raise UserError(str(e)) from None
    for line in next_steps(study, the_lab, out):
        console.print(line, markup=False, highlight=False, soft_wrap=True)



def override_tag(overrides) -> str:
    """Six characters naming a set of overrides (the default lab and report of a reproduction
    with them, so an overridden run never mixes into the scale's own lab)."""
    from rulelab.config import stable_hash

    return stable_hash(sorted(o.text for o in overrides))[:6]
