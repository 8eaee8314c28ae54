"""What reading commands check before they show a run (issue 24): its summary against its
recorded hash and against the values a summary can hold, its metrics file and final checkpoint
against theirs (:mod:`rulelab.store.digests`, the cheap check).

A damaged summary is named and its run left out (a wrong number is worse than a missing one);
a damaged metrics file is named and its curves left out; a damaged checkpoint is named. All of
it goes into one warning line that points to ``rulelab verify``, which checks everything and
repairs what it can.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from rulelab.store.digests import Stamp, file_problem, text_stamp

SHOWN = 4  # damaged items named in the warning line; the rest are counted


@dataclass(frozen=True)
class Damage:
    run_id: str
    kind: str  # "summary", "metrics" or "checkpoint"
    text: str  # what the warning line says of it


def summary_problem(summary: dict) -> str | None:
    """A value no summary can hold (None when there is none): an accuracy — a key with an
    ``acc`` part, such as ``max_adv_acc`` — outside [0, 1]."""
    for key, value in summary.items():
        if "acc" not in key.split("_") or isinstance(value, bool) or not isinstance(
                value, int | float) or math.isnan(value):
            continue
        if not 0.0 <= value <= 1.0:
            return f"{key} = {value} is not an accuracy in [0, 1]"
    return None


def stored_summary_problem(text: str | None, recorded: Stamp | None,
                           summary: dict) -> str | None:
    """Why a stored summary cannot be shown: its text is not what was recorded, or it holds an
    impossible value."""
    if recorded is not None and text is not None and text_stamp(text).sha256 != recorded.sha256:
        return "differs from its recorded hash"
    return summary_problem(summary)


def row_damage(row: dict, stamps: dict[tuple[str, str], Stamp], metrics_file: Path,
               checkpoint_file: Path, *, full: bool = False) -> list[Damage]:
    """What is wrong with one readable registry row's summary and files."""
    rid, out = row["run_id"], []
    why = stored_summary_problem(row.get("summary_text"), stamps.get((rid, "summary")),
                                 row["summary"])
    if why:
        out.append(Damage(rid, "summary", f"summary of run {rid} ({why}; run left out)"))
    for kind, path in (("metrics", metrics_file), ("checkpoint", checkpoint_file)):
        recorded = stamps.get((rid, kind))
        why = recorded and file_problem(path, recorded, full=full)
        if why == "missing" and kind == "metrics":
            out.append(Damage(rid, kind, f"no metrics file {path}"))
        elif why:
            out.append(Damage(rid, kind, f"{kind} file {path} ({why})"))
    return out


def warning_line(damage: list[Damage], root: Path) -> str:
    """The one line naming ``damage`` and what to do about it."""
    shown = "; ".join(d.text for d in damage[:SHOWN])
    more = f"; and {len(damage) - SHOWN} more" if len(damage) > SHOWN else ""
    return (f"damaged lab contents: {shown}{more}; run `rulelab verify --lab {root}` to check "
            "every run (--repair restores them)")
