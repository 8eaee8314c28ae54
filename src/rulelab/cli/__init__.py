"""The ``rulelab`` command line (typer + rich), built from the study registry.

Every command validates all of its input first and reports a bad value as one line naming the
flag and what is allowed (exit code 2), before anything is written. Layout: :mod:`.options`
(shared options and checks), :mod:`.commands` (commands generated from declarations),
:mod:`.train` (``train`` / ``data``), :mod:`.execute` (the one run path), :mod:`.reproduce`,
:mod:`.sweep`, :mod:`.analyze`, :mod:`.lab` (``runs``, ``report``, ``status``), :mod:`.app`.
"""

from __future__ import annotations

import sys

from rulelab.errors import UserError


def main() -> None:
    """Entry point: bad input → ``error: …`` on one line and exit code 2."""
    from typer.exceptions import Abort, Exit, TyperException

    from rulelab.cli.app import build_app, list_flags
    from rulelab.cli.options import check_path_flags, split_multi_value_flags
    from rulelab.report.terminal import err_console

    argv = sys.argv[1:]
    try:
        argv = split_multi_value_flags(argv, list_flags(argv))
        check_path_flags(argv)
        build_app()(args=argv, prog_name="rulelab", standalone_mode=False)
    except UserError as e:
        err_console.print(f"error: {e}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except TyperException as e:  # usage errors from parsing (unknown flag, not an integer, …)
        if type(e).__name__ == "NoArgsIsHelpError":
            print(e.format_message())
            sys.exit(0)
        err_console.print(f"error: {e.format_message()}", markup=False, highlight=False,
                          soft_wrap=True)
        sys.exit(getattr(e, "exit_code", 2) or 2)
    except Exit as e:
        sys.exit(e.exit_code)
    except Abort:
        err_console.print("aborted")
        sys.exit(130)


__all__ = ["UserError", "main"]
