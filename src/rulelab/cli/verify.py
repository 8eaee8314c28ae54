"""``rulelab verify [--lab L] [--repair]``: one line per problem (its kind first), then a
summary; exit 0 when the lab is clean, 1 when damage was found (or is left after
``--repair``), so scripts can use it (issue 24)."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from rulelab.cli.options import LabOpt, lab_dir, open_lab
from rulelab.errors import UserError


def verify_cmd(
    lab: Path | None = LabOpt,
    repair: bool = typer.Option(False, "--repair", help="fix what can be fixed exactly: "
                                "re-derive summaries, rewrite or retrain damaged files (moved "
                                "aside into <lab>/damaged/, never deleted)"),
) -> None:
    """Check every run: registry rows, summaries, metrics and checkpoints against their hashes,
    stray files, statuses. Exit 0 when the lab is clean, 1 when damage is found (or left)."""
    from rulelab.store import StoreError
    from rulelab.verify import repair as repair_lab
    from rulelab.verify import scan

    try:
        the_lab = open_lab(lab_dir(lab), create=False)
    except UserError as e:  # the registry itself is damaged: that is a finding, not bad input
        if "corrupt lab registry" not in str(e):
            raise
        print(f"registry-corrupt: {e}")
        print("verified 0 run(s): the registry itself is damaged; no run can be checked or "
              "repaired from this lab (restore registry.sqlite from a copy)")
        raise SystemExit(1) from None
    try:
        start = time.perf_counter()
        found = scan(the_lab)
        _print(found, time.perf_counter() - start)
        unhashed = any(p.kind.endswith("-nohash") for p in found.problems)
        if repair and (found.damage or unhashed):  # a lab made before hashes gets them
            if the_lab.read_only:
                raise UserError(f"--repair: lab {the_lab.root} is read-only")
            for line in repair_lab(found):
                print(line)
            start = time.perf_counter()
            found = scan(the_lab)
            print("after repair:")
            _print(found, time.perf_counter() - start)
    except StoreError as e:
        raise UserError(str(e)) from None
    if found.damage:
        raise SystemExit(1)  # not typer.Exit: the entry point runs click without standalone


def _print(found, seconds: float) -> None:
    for problem in found.problems:
        print(problem.line())
    damage, info = len(found.damage), len(found.problems) - len(found.damage)
    verdict = "clean" if not damage else f"{damage} problem(s): `rulelab verify --repair` fixes " \
        "what can be fixed exactly"
    note = f", {info} note(s)" if info else ""
    print(f"verified {len(found.runs)} run(s) and {found.files_checked} file(s) in "
          f"{seconds:.2f} s: {verdict}{note}")
