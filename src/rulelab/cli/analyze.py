"""``rulelab analyze NAME``: every analysis every registered study declares
(:class:`rulelab.study.Analysis`), over a lab's stored runs (SPEC S.4, M.4).

Each command checks its options first (``--epochs``, then the study's own), opens the lab
(nothing is opened for a bad flag), and runs the analysis; what a damaged lab made it skip is
printed as warnings, a store problem as one error line. ``--where`` (as ``rulelab runs
--where``, issue 23) shows the analysis only the runs it picks (:class:`WhereLab`).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pandas as pd
import typer

from rulelab.cli.commands import command
from rulelab.cli.options import (
    EpochsOpt,
    LabOpt,
    check_epochs,
    lab_dir,
    open_lab,
    print_warnings,
)
from rulelab.errors import UserError

KW = inspect.Parameter.KEYWORD_ONLY
WHERE_HELP = ("only the runs where this holds, in pandas query syntax over the config columns "
              "(as `rulelab runs --where`): \"layers == 2 and ratio > 0.5\"")


class WhereLab:
    """The lab as ``--where`` shows it to an analysis: only the runs it picks (the view of
    ``lab.analyze(runs=…)``, :class:`rulelab.api.run_analysis.RecordingLab`). Tables are
    stored as without it, but never at the cost of other runs' rows: a key that holds rows of
    runs outside the filter (one table for the whole lab, e.g. ``phases/all``) keeps them, and
    a table without a ``run_id`` column (rows pooled over runs) is printed, not stored."""

    def __init__(self, lab, run_ids) -> None:
        from rulelab.api.run_analysis import RecordingLab  # torch: not at command-line start

        self.view = RecordingLab(lab, run_ids, save=True)
        self.inner, self.run_ids = lab, set(run_ids)

    def __getattr__(self, name: str):
        return getattr(self.view, name)

    def write_table(self, name: str, key: str, frame: pd.DataFrame):
        if "run_id" not in frame.columns:
            self.inner.warn(f"--where: the {name} table pools runs (no run_id column), so it "
                            f"was not stored (the lab keeps its table of every run); run "
                            f"`rulelab analyze {name}` without --where to store it")
            return None
        old = self.inner.read_run_table(name, key)
        if old is not None and "run_id" in old.columns:
            others = old[~old["run_id"].isin(self.run_ids)]
            if len(others):
                frame = pd.concat([others, frame], ignore_index=True)
        return self.inner.write_table(name, key, frame)


def analysis_command(analysis):
    """The typer command of one :class:`~rulelab.study.Analysis`."""
    params = [inspect.Parameter("lab", KW, annotation=Path | None, default=LabOpt),
              inspect.Parameter("where_expr", KW, annotation=str | None,
                                default=typer.Option(None, "--where", help=WHERE_HELP))]
    if analysis.epochs:
        params.append(inspect.Parameter("epochs", KW, annotation=str, default=EpochsOpt))
    for o in analysis.options:
        params.append(inspect.Parameter(o.name, KW, annotation=type(o.default),
                                        default=typer.Option(o.default, o.flag, help=o.help)))

    def run(lab: Path | None, where_expr: str | None, **values) -> None:
        from rulelab.api.find_runs import select
        from rulelab.store import StoreError
        from rulelab.study import resolve

        if analysis.epochs:
            check_epochs(values["epochs"])
        for o in analysis.options:
            why = o.check(values[o.name]) if o.check else None
            if why:
                raise UserError(f"{o.flag}: {values[o.name]} is not allowed; {why}")
        the_lab = open_lab(lab_dir(lab), create=False)
        try:
            seen = the_lab if not where_expr else WhereLab(
                the_lab, select(the_lab, where_expr)["run_id"])
            resolve(analysis.run)(seen, **values)
        except StoreError as e:
            raise UserError(str(e)) from None
        finally:
            print_warnings(the_lab)

    return command(run, params, analysis.help)
