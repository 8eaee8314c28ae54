"""Commands that read a lab: ``rulelab runs`` (the rate table, or ``--json``), ``report`` (one
self-contained HTML page) and ``status`` (progress per experiment). Reading never writes: a
read-only lab works, and what a damaged lab forced a command to skip is printed as warnings."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

import typer

from rulelab.cli.analyze import WHERE_HELP
from rulelab.cli.options import LabOpt, check_out, lab_dir, open_lab, print_warnings
from rulelab.errors import UserError


def _clean(obj):
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    return obj


def runs_cmd(
    lab: Path | None = LabOpt,
    as_json: bool = typer.Option(False, "--json", help="print a JSON array with one "
                                 "object per run (its config, status and summary)"),
    ids: bool = typer.Option(False, "--ids", help="one row per run instead, led by its short "
                             "id (any unique prefix names the run elsewhere)"),
    where_expr: str | None = typer.Option(None, "--where", help="only the runs where this "
                                          "holds, in pandas query syntax over the config "
                                          "columns: \"layers == 2 and ratio > 0.5\""),
) -> None:
    """One row per configuration: seeds, generalization rate, 95% Wilson CI (--ids: one row
    per run, with its id)."""
    from rulelab.api.find_runs import config_columns, query_columns, short_ids, where
    from rulelab.report.terminal import console, print_rate_table, print_run_list
    from rulelab.store import StoreError

    the_lab = open_lab(lab_dir(lab), create=False)
    try:
        rows = the_lab.runs_json()
        runs = the_lab.runs()
        runs = where(runs, where_expr, query_columns(runs, rows))  # all without --where
        if as_json:
            picked = set(runs["run_id"])
            print(json.dumps([_clean(r) for r in rows if r["run_id"] in picked], indent=1))
            the_lab.check_metrics_files(runs)
            return
        the_lab.check_metrics_files(runs)
        if where_expr and runs.empty:
            console.print(f"no runs match --where {where_expr!r}", markup=False,
                          highlight=False)
            return
        if ids:
            print_run_list(console, runs, config_columns(rows),
                           short_ids(r["run_id"] for r in rows))
            return
        print_rate_table(console, runs, metrics=partial(the_lab.read_metrics,  # old labs
                                                        skip_damaged=True))
    except StoreError as e:
        raise UserError(str(e)) from None
    finally:
        print_warnings(the_lab)


def report_cmd(
    out: Path = typer.Option(Path("report.html"), "--out", help="HTML file to write"),
    lab: Path | None = LabOpt,
    where_expr: str | None = typer.Option(None, "--where", help=WHERE_HELP),
) -> None:
    """Write one self-contained HTML report with figures for the lab: a section per task,
    with its study's figures and analyses (--where: of the runs it picks only)."""
    from rulelab.api.find_runs import select
    from rulelab.report.html import by_task
    from rulelab.report.results import write_lab_report
    from rulelab.report.stored_analyses import read_analyses
    from rulelab.report.terminal import console
    from rulelab.report.views import view_of
    from rulelab.store import StoreError

    check_out("--out", out)
    the_lab = open_lab(lab_dir(lab), create=False)
    try:
        runs = select(the_lab, where_expr)  # every run without --where
        the_lab.check_metrics_files(runs)
        metrics = the_lab.read_metrics(list(runs["run_id"]) if where_expr else None,
                                       skip_damaged=True)  # a damaged file: report the rest
        names = [n for _, part in by_task(runs) for n in view_of(part).analyses]
        analyses = read_analyses(the_lab, runs, names)  # tracked and post-hoc rows apart
        path = write_lab_report(out, the_lab, runs, metrics, analyses)  # results first
    except StoreError as e:
        raise UserError(str(e)) from None
    finally:
        print_warnings(the_lab)
    picked = f" ({len(runs)} runs where {where_expr})" if where_expr else ""
    console.print(f"wrote {path}{picked}", markup=False, highlight=False)


def status_cmd(
    lab: Path | None = LabOpt,
    as_json: bool = typer.Option(False, "--json", help="one JSON object"),
) -> None:
    """Progress per experiment: done / running / pending / failed, and generalized runs."""
    from rulelab.report.terminal import console
    from rulelab.store import StoreError
    from rulelab.sweep.status import lab_status, print_status

    the_lab = open_lab(lab_dir(lab), create=False)
    try:
        status = lab_status(the_lab)
    except StoreError as e:
        raise UserError(str(e)) from None
    finally:
        print_warnings(the_lab)
    if as_json:
        print(json.dumps(status, indent=1))
        return
    print_status(console, status)
