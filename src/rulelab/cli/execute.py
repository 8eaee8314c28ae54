"""Running a recipe from the command line — the one path of ``train``, ``reproduce`` and
``sweep`` (issue 9): check everything, open the lab, hand the recipe to the driver
(:func:`rulelab.sweep.driver.run_sweep`, the registry's one writer) with progress: a rich bar on a
terminal, else a plain line every ``$RULELAB_PROGRESS_SECONDS`` (default 30) seconds, so a run
under nohup, a scheduler or CI logs where it is.

Checks, all before anything is written: the task's own checks (e.g. study S's sequence space),
that one run fits the device's memory, the lab path; then the driver reads every unfinished
run's checkpoint before it takes the lab's lock.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

from rulelab.errors import UserError
from rulelab.report.terminal import err_console


def as_keys(message: str) -> str:
    """A message naming flags (``--n-train``) as a recipe names its keys (``n_train``)."""
    return re.sub(r"--([a-z0-9-]+)", lambda m: m.group(1).replace("-", "_"), message)


def check_recipe(recipe, settings) -> None:
    """The task's checks and the memory check of ``recipe``'s runs (one line each); a recipe
    file's problems name the file and its keys, a command line's its flags."""
    from rulelab.study_registry import task
    from rulelab.sweep.estimate import oversized

    configs = recipe.configs()
    spec = task(recipe.task)
    try:
        if spec.check:
            spec.check(configs)
        too_big = oversized(configs, settings.device, settings.largest_pass, settings.eval_chunk)
        if too_big:
            raise UserError(too_big)
    except UserError as e:
        if recipe.path is None:
            raise
        raise UserError(f"{recipe.path}: {as_keys(str(e))}") from None


PROGRESS_SECONDS = "RULELAB_PROGRESS_SECONDS"


def progress_for(settings, console):
    """The progress display: none (``--quiet``), a bar on a terminal or in a notebook, else
    plain lines (a log file) every ``$RULELAB_PROGRESS_SECONDS`` seconds."""
    from rulelab.sweep.progress import (
        LINE_SECONDS,
        LineSweepProgress,
        RichSweepProgress,
        SweepProgress,
    )

    given = os.environ.get(PROGRESS_SECONDS, "").strip()
    try:
        every = float(given) if given else LINE_SECONDS
    except ValueError:
        every = -1.0
    if not every > 0 or every == float("inf"):
        raise UserError(f"{PROGRESS_SECONDS}: {given!r} is not allowed; use a number of seconds "
                        "> 0 (default 30)")
    if settings.quiet:
        return SweepProgress()
    if console.is_terminal or console.is_jupyter:
        return RichSweepProgress(console)
    return LineSweepProgress(every=every)


def execute(recipe, settings, lab, *, command: str, executor=None,
            interleave_seeds: bool = False):
    """Train ``recipe`` into ``lab`` (a :class:`~rulelab.store.LabDir`, created if missing);
    returns (the opened :class:`~rulelab.store.Lab`, driver result)."""
    from rulelab.cli.options import check_lab_path, open_lab
    from rulelab.store import StoreError
    from rulelab.sweep.driver import run_sweep
    from rulelab.sweep.executors import RayUnavailable

    progress = progress_for(settings, err_console)
    check_lab_path(lab)
    the_lab = open_lab(lab, create=True)
    name = getattr(executor, "name", "local")

    def header(plan) -> None:
        capped = "" if min(plan.caps.values(), default=plan.max_members) >= plan.max_members \
            else f"; at most {min(plan.caps.values())} per ensemble: memory"
        side = min(getattr(executor, "workers", settings.parallel_chunks), len(plan.chunks))
        at_once = f", {side} chunks at once" if name == "local" and side > 1 else ""
        for line in (f"{recipe.experiment}: {plural(plan.n_runs, 'run')} → lab {the_lab.root} "
                     f"({name} executor{at_once}, {settings.device_label}{capped})",
                     *estimate_lines(plan, settings)):
            err_console.print(line, markup=False, highlight=False,
                              soft_wrap=True)  # one line in a log file too

    try:
        result = run_sweep(recipe, the_lab, settings, executor, progress, command=command,
                     interleave_seeds=interleave_seeds, on_start=header,
                     on_restart=lambda line: err_console.print(
                         f"warning: {line}", markup=False, highlight=False, soft_wrap=True))
    except (StoreError, RayUnavailable) as e:  # a damaged checkpoint, a busy lab, a full disk
        raise UserError(str(e)) from None
    return the_lab, result


LONG_SECONDS = 3600.0  # above this, the estimate comes with a warning line


def plural(n: int, noun: str) -> str:
    """``1 run``, ``2 runs``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def estimate_lines(plan, settings) -> list[str]:
    """How long the plan will take, by the planner's cost model on ``settings``' device (the
    figure ``sweep --dry-run`` prints), and a warning line when that is over an hour (issue
    23: a two-hour ``train`` used to start with "ETA unknown")."""
    from rulelab.sweep.estimate import human_seconds, speed

    if not plan.chunks:
        return [f"nothing to train: {plural(plan.n_done, 'run')} done, {plan.n_failed} "
                "failed before"]
    on = speed(settings.device, settings.precision, plan.task)
    seconds = plan.seconds(on)
    before = f"; {plan.n_done} done before" if plan.n_done else ""
    lines = [f"estimate: {human_seconds(seconds)} for {plural(plan.n_todo, 'run')} "
             f"({plan.seed_epochs():,} member-epochs) on {on.note}{before}"]
    if seconds > LONG_SECONDS:
        lines.append(f"warning: this takes about {human_seconds(seconds)} (estimate); stop it "
                     "with Ctrl-C at any time and run the same command again to resume")
    return lines


def study_of(task_name: str):
    """The registered study that declares task ``task_name``."""
    from rulelab.study_registry import studies

    return next(s for s in studies() if task_name in {t.name for t in s.tasks})


def print_results(lab, recipe, result) -> None:
    """How a ``train`` or ``sweep`` ended: the rate table of its runs (as ``rulelab runs``
    prints it) and the commands that go on from there (issue 23)."""
    from functools import partial

    from rulelab.cli.options import print_warnings
    from rulelab.report.terminal import console, print_rate_table
    from rulelab.store import StoreError

    ids = {c.run_id for c in recipe.configs()}
    try:
        runs = lab.runs()
        runs = runs[runs["run_id"].isin(ids)]
        print_rate_table(console, runs, metrics=partial(lab.read_metrics, skip_damaged=True))
    except StoreError as e:
        raise UserError(str(e)) from None
    finally:
        print_warnings(lab)
    for line in next_steps(study_of(recipe.task), lab, Path("report.html")):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def next_steps(study, lab, out: Path) -> list[str]:
    """The commands that inspect ``lab`` (a :class:`~rulelab.store.LabDir`), which a command
    wrote (issue 10: after ``make quick`` a new user should not have to guess that its lab is
    not ``./rulelab-runs``)."""
    from rulelab.cli.options import shown_path

    shown = shown_path(lab.root)
    where = shlex.quote(shown)
    code = f"import rulelab; lab = rulelab.load({json.dumps(shown)}); print(lab.runs)"
    lines = ["", f"inspect the lab {shown}:",
             f"  rulelab runs --lab {where}",
             f"  rulelab status --lab {where}",
             f"  rulelab report --lab {where} --out {shlex.quote(shown_path(out))}"]
    names = [a.name for a in study.analyses]
    if names:
        others = f"  (also: {', '.join(names[1:])})" if names[1:] else ""
        lines.append(f"  rulelab analyze {names[0]} --lab {where}{others}")
    lines.append(f"  python -c {shlex.quote(code)}")
    return lines
