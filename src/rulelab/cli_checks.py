"""Input checks shared by the ``rulelab`` commands (SPEC "Cross-cutting": bad input gets one
clear line naming the field and the allowed range, before any work starts).

Each check raises :class:`UserError`, which the entry point prints as ``error: <message>``
with exit code 2. Paths a command will write are checked before any work (a file target must
not be a directory, and its folder must accept new files), and what a reading command skipped
in a damaged lab is printed as ``warning:`` lines.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path


class UserError(Exception):
    """Bad input: printed as ``error: <message>`` and exit code 2."""


PATH_FLAGS = ("--lab", "--out", "--mnist-dir")
EXPERIMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")  # as recipe names


def check_path_flags(argv: list[str]) -> None:
    """An empty path would silently mean the current directory (``Path("") == Path(".")``)."""
    for i, tok in enumerate(argv):
        flag, eq, value = tok.partition("=")
        given = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
        if flag in PATH_FLAGS and given == "":
            raise UserError(f"{flag} must be a path; it was given an empty string")


def check_out(flag: str, out: Path, suffix: str | None = None) -> Path:
    """A file the command will write: not a directory, with the right suffix, in a folder
    that accepts new files (probed: see :mod:`rulelab.store.paths`)."""
    from rulelab.store.paths import file_problem

    if out.is_dir():
        raise UserError(f"{flag}: {str(out)!r} is not allowed; it is a directory; give a file "
                        f"name{f' ending in {suffix}' if suffix else ''}")
    if suffix and out.suffix != suffix:
        raise UserError(f"{flag}: {str(out)!r} is not allowed; the file must end in {suffix}")
    why = file_problem(out)
    if why:
        raise UserError(f"{flag}: {str(out)!r} is not allowed; {why}")
    return out


def write_out(out: Path, write: Callable[[Path], object]) -> None:
    """``write(out)`` after making its folder; a full disk or a read-only place is one line."""
    from rulelab.store import StoreError
    from rulelab.store.errors import write_errors

    try:
        with write_errors(out):
            out.parent.mkdir(parents=True, exist_ok=True)
            write(out)
    except StoreError as e:
        raise UserError(str(e)) from None


def check_lab_path(lab: Path | None) -> None:
    """``--lab`` for a command that writes: not a file, and creatable where it is missing."""
    from rulelab.store import resolve_lab
    from rulelab.store.paths import folder_problem

    root = resolve_lab(lab)
    if root.exists() and not root.is_dir():
        raise UserError(f"--lab: {str(root)!r} is not allowed; it is a file, not a folder")
    why = None if root.exists() else folder_problem(root)
    if why:
        raise UserError(f"--lab: {str(root)!r} is not allowed; {why}")


def check_experiment(name: str) -> str:
    """``--experiment``: a plain name (it is stored, and printed by ``rulelab status``)."""
    if not EXPERIMENT_NAME.fullmatch(name):
        shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}… ({len(name)} characters)"
        raise UserError(f"--experiment: {shown} is not allowed; use up to 100 letters, digits, "
                        "'-', '_' or '.', starting with a letter or digit")
    return name


def print_warnings(lab) -> None:
    """Print what a command skipped in a damaged lab (:attr:`Lab.warnings`), one line each."""
    for line in lab.warnings:
        print(f"warning: {line}", file=sys.stderr)
    lab.warnings.clear()
