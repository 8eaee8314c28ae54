"""The ``rulelab`` command tree, built from the study registry (issue 9): ``data`` / ``train``
get one command per task, ``analyze`` one per declared analysis, ``reproduce`` one per study;
``runs``, ``report``, ``sweep`` and ``status`` serve every study."""

from __future__ import annotations

import functools

import typer

from rulelab.cli.analyze import analysis_command
from rulelab.cli.calibrate import calibrate_cmd
from rulelab.cli.commands import LIST_FLAGS
from rulelab.cli.lab import report_cmd, runs_cmd, status_cmd
from rulelab.cli.reproduce import reproduce_command
from rulelab.cli.scale_map import scale_map_cmd
from rulelab.cli.show import show_cmd
from rulelab.cli.sweep import sweep_cmd
from rulelab.cli.train import data_command, train_command
from rulelab.cli.verify import verify_cmd
from rulelab.study_registry import studies


@functools.cache
def build_app() -> typer.Typer:
    app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                      help="rulelab: when does a network learn the rule, a shortcut, or noise?")
    groups = {name: typer.Typer(no_args_is_help=True, help=text) for name, text in (
        ("data", "Generate task data."), ("train", "Train ensembles of runs into a lab."),
        ("analyze", "Analyses on stored runs (methods: docs/methods.md). By study: " + "; ".join(
            f"{s.name}: {', '.join(a.name for a in s.analyses)}" for s in studies()
            if s.analyses) + "."),
        ("reproduce", "Reproduce a study end to end."))}
    for name, group in groups.items():
        app.add_typer(group, name=name)
    for study in studies():
        for task in study.tasks:
            cmd, flags = train_command(task)
            groups["train"].command(task.name)(cmd)
            LIST_FLAGS["train", task.name] = flags
            if task.data:
                cmd, flags = data_command(task)
                groups["data"].command(task.name)(cmd)
                LIST_FLAGS["data", task.name] = flags
        for analysis in study.analyses:
            groups["analyze"].command(analysis.name)(analysis_command(analysis))
        groups["reproduce"].command(study.name)(reproduce_command(study))
    app.command("runs")(runs_cmd)
    app.command("show")(show_cmd)
    app.command("report")(report_cmd)
    app.command("sweep")(sweep_cmd)
    app.command("status")(status_cmd)
    app.command("scale-map")(scale_map_cmd)
    app.command("calibrate")(calibrate_cmd)
    app.command("verify")(verify_cmd)
    from rulelab.cli.export import export_app  # issue 10: `rulelab export tl`

    app.add_typer(export_app(), name="export")
    return app


def list_flags(argv: list[str]) -> set[str]:
    """The list-valued flags of the command ``argv`` invokes (``train mpsp`` → --ratio, …)."""
    build_app()
    words = [a for a in argv[:2] if not a.startswith("-")]
    return LIST_FLAGS.get(tuple(words), set())
