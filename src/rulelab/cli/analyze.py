"""``rulelab analyze NAME``: every analysis every registered study declares
(:class:`rulelab.study.Analysis`), over a lab's stored runs (SPEC S.4, M.4).

Each command checks its options first (``--epochs``, then the study's own), opens the lab
(nothing is opened for a bad flag), and runs the analysis; what a damaged lab made it skip is
printed as warnings, a store problem as one error line.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import typer

from rulelab.cli.commands import command
from rulelab.cli.options import EpochsOpt, LabOpt, check_epochs, open_lab, print_warnings
from rulelab.errors import UserError

KW = inspect.Parameter.KEYWORD_ONLY


def analysis_command(analysis):
    """The typer command of one :class:`~rulelab.study.Analysis`."""
    params = [inspect.Parameter("lab", KW, annotation=Path | None, default=LabOpt)]
    if analysis.epochs:
        params.append(inspect.Parameter("epochs", KW, annotation=str, default=EpochsOpt))
    for o in analysis.options:
        params.append(inspect.Parameter(o.name, KW, annotation=type(o.default),
                                        default=typer.Option(o.default, o.flag, help=o.help)))

    def run(lab: Path | None, **values) -> None:
        from rulelab.store import StoreError
        from rulelab.study import resolve

        if analysis.epochs:
            check_epochs(values["epochs"])
        for o in analysis.options:
            why = o.check(values[o.name]) if o.check else None
            if why:
                raise UserError(f"{o.flag}: {values[o.name]} is not allowed; {why}")
        the_lab = open_lab(lab, create=False)
        try:
            resolve(analysis.run)(the_lab, **values)
        except StoreError as e:
            raise UserError(str(e)) from None
        finally:
            print_warnings(the_lab)

    return command(run, params, analysis.help)
