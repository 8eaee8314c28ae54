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
from rulelab.errors import UserError
from rulelab.settings import ENGINE_HELP

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
        inspect.Parameter("device", KW, annotation=str, default=typer.Option(
            "cpu", "--device", help=options.DEVICE_HELP)),
        inspect.Parameter("precision", KW, annotation=str | None, default=typer.Option(
            None, "--precision", help="fp32 or bf16 (default: the recipe's)")),
        inspect.Parameter("quiet", KW, annotation=bool, default=typer.Option(
            False, "--quiet", help=options.QUIET_HELP)),
        inspect.Parameter("allow_engine_change", KW, annotation=bool, default=typer.Option(
            False, "--allow-engine-change", help=ENGINE_HELP)),
        inspect.Parameter("overrides", KW, annotation=list[str] | None, default=typer.Argument(
            None, metavar="KEY=VALUE", help="overrides of the scale's recipe, checked as its "
            "YAML is (base.epochs=50 seeds.count=2); default lab and report then end in a tag "
            "of them")),
    ]

    def run(scale: str, out: Path | None, lab: Path | None, device: str,
            precision: str | None, quiet: bool, allow_engine_change: bool,
            overrides: list[str] | None) -> None:
        reproduce(study, scale, out, lab, device, precision, quiet, allow_engine_change,
                  overrides=overrides or ())

    return command(run, params, f"{study.title}: its recipe, analyses and report.")


def reproduce(study, scale, out, lab, device, precision, quiet,
              allow_engine_change: bool = False, *, overrides=()) -> None:
    from rulelab.cli.execute import check_recipe, execute
    from rulelab.cli.sweep import parse_overrides
    from rulelab.report.terminal import console
    from rulelab.store import StoreError
    from rulelab.study import Reproduction, resolve
    from rulelab.sweep.recipe import RecipeError, load_recipe

    if scale not in study.scales():
        raise UserError(f"--scale: {scale!r} is not allowed; use one of "
                        f"{', '.join(study.scales())}")
    options.check_device(device)
    try:
        given = parse_overrides(list(overrides))
        name = f"{study.name}-{scale}" + (f"-{override_tag(given)}" if given else "")
        out = options.check_out("--out", out or Path("reports") / f"{name}.html")
        recipe = load_recipe(study.recipe_path(scale), given)
    except RecipeError as e:
        raise UserError(str(e)) from None
    settings = recipe.execution.merged(device=device, precision=precision, quiet=quiet or None,
                                       allow_engine_change=allow_engine_change or None)
    options.check_precision(settings.precision, device)
    check_recipe(recipe, settings)
    lab = lab or Path("rulelab-runs") / name
    t0 = time.perf_counter()
    the_lab, _ = execute(recipe, settings, lab, command="reproduce")
    train_seconds = time.perf_counter() - t0
    ids = tuple(c.run_id for c in recipe.configs())
    try:
        resolve(study.reproduce)(Reproduction(study, scale, recipe, the_lab, ids, out, device,
                                              console, train_seconds))
    except StoreError as e:  # reading the lab back or writing the report
        raise UserError(str(e)) from None
    for line in next_steps(study, the_lab.root, out):
        console.print(line, markup=False, highlight=False, soft_wrap=True)



def override_tag(overrides) -> str:
    """Six characters naming a set of overrides (the default lab and report of a reproduction
    with them, so an overridden run never mixes into the scale's own lab)."""
    from rulelab.config import stable_hash

    return stable_hash(sorted(o.text for o in overrides))[:6]
