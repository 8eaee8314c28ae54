"""``rulelab reproduce shortcut-saturation``: study S end to end (SPEC S.3) — once the recipe
has trained: the rate table beside the paper's → one HTML report.

The paper's headline is the *interaction* of depth and imbalance — 2L: r=0.5 → 0% of seeds
generalize, r=0.9 → 77%; 1L: r=0.5 → 33%, r=0.9 → 0%. Every run prints the recipe's
description (the scale it trains at) above its table and in its report; the paper's numbers
appear beside a cell only where its runs are at the paper's setting (:mod:`.paper`, checked
from the config values), otherwise one line says the column is omitted and how the setting
differs.
"""

from __future__ import annotations

from pathlib import Path

from rulelab.report.html import write_report
from rulelab.report.terminal import print_rate_table
from rulelab.store import load
from rulelab.studies.shortcut_saturation.paper import describe_scale, run_matches
from rulelab.study import Reproduction

HEADLINE = ("2L: r=0.5 → 0% of seeds generalize, r=0.9 → 77%; 1L: r=0.5 → 33%, r=0.9 → 0% "
            "(≈30 runs per cell, adv accuracy alone as the paper's text reads it). Imbalance "
            "helps the 2-layer model and hurts the 1-layer one.")


def reproduce(r: Reproduction) -> Path:
    """Print the rate table of the trained recipe in ``r.lab`` and write the report."""
    frames = load(r.lab)
    ids = set(r.run_ids)
    runs = frames.runs[frames.runs["run_id"].isin(ids)]
    metrics = frames.metrics[frames.metrics["run_id"].isin(ids)]
    note = r.recipe.description
    r.console.print(note, markup=False, highlight=False)
    print_rate_table(r.console, runs, metrics=metrics)
    wall = r.train_seconds
    r.console.print(f"training wall time {wall:.0f} s", markup=False, highlight=False)
    comparable = bool(run_matches(runs).all())
    sections = [
        ("What this reproduction is", f"{note}\n{describe_scale(runs)}"),
        ("The paper's headline (SPEC S.3)" if comparable else
         "The paper's headline — at its own setting, not comparable with this scale", HEADLINE),
        ("Wall time", f"training took {wall:.0f} s on {r.device} (a resumed run counts the "
         "rest)."),
    ]
    path = write_report(r.out, title=f"{r.study.title} — {r.scale} reproduction", runs=runs,
                        metrics=metrics, sections=sections)
    r.console.print(f"report: {path}")
    return path
