"""``rulelab reproduce STUDY --scale S``: a study end to end — its recipe
``recipes/S.yaml`` trained through the planner and the one driver, then the study's own
analyses, printed tables and report (``reports/STUDY-S.html`` by default), one command per
registered study (:class:`rulelab.study.Study`)."""

from __future__ import annotations

import inspect
import json
import shlex
import time
from pathlib import Path

import typer

from rulelab.cli import options
from rulelab.cli.commands import command
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
        inspect.Parameter("device", KW, annotation=str, default=typer.Option(
            "cpu", "--device", help=options.DEVICE_HELP)),
        inspect.Parameter("precision", KW, annotation=str | None, default=typer.Option(
            None, "--precision", help="fp32 or bf16 (default: the recipe's)")),
        inspect.Parameter("quiet", KW, annotation=bool, default=typer.Option(
            False, "--quiet", help=options.QUIET_HELP)),
    ]

    def run(scale: str, out: Path | None, lab: Path | None, device: str,
            precision: str | None, quiet: bool) -> None:
        reproduce(study, scale, out, lab, device, precision, quiet)

    return command(run, params, f"{study.title}: its recipe, analyses and report.")


def reproduce(study, scale, out, lab, device, precision, quiet) -> None:
    from rulelab.cli.execute import check_recipe, execute
    from rulelab.report.terminal import console
    from rulelab.store import StoreError
    from rulelab.study import Reproduction, resolve
    from rulelab.sweep.recipe import RecipeError, load_recipe

    if scale not in study.scales():
        raise UserError(f"--scale: {scale!r} is not allowed; use one of "
                        f"{', '.join(study.scales())}")
    options.check_device(device)
    out = options.check_out("--out", out or Path("reports") / f"{study.name}-{scale}.html")
    try:
        recipe = load_recipe(study.recipe_path(scale))
    except RecipeError as e:
        raise UserError(str(e)) from None
    settings = recipe.execution.merged(device=device, precision=precision, quiet=quiet or None)
    options.check_precision(settings.precision, device)
    check_recipe(recipe, settings)
    lab = lab or Path("rulelab-runs") / f"{study.name}-{scale}"
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


def next_steps(study, lab: Path, out: Path) -> list[str]:
    """The commands that inspect the lab a reproduction wrote (issue 10: after ``make quick``
    a new user should not have to guess that its lab is not ``./rulelab-runs``)."""
    from rulelab.cli.options import shown_path

    where = shlex.quote(shown_path(lab))
    code = f"import rulelab; lab = rulelab.load({json.dumps(shown_path(lab))}); print(lab.runs)"
    lines = ["", f"inspect the lab {shown_path(lab)}:",
             f"  rulelab runs --lab {where}",
             f"  rulelab status --lab {where}",
             f"  rulelab report --lab {where} --out {shlex.quote(shown_path(out))}"]
    names = [a.name for a in study.analyses]
    if names:
        others = f"  (also: {', '.join(names[1:])})" if names[1:] else ""
        lines.append(f"  rulelab analyze {names[0]} --lab {where}{others}")
    lines.append(f"  python -c {shlex.quote(code)}")
    return lines
