"""``rulelab reproduce shortcut-saturation``: study S end to end (SPEC S.3) — once the recipe
has trained: the rate table beside the paper's, gradient and fingerprint readings of the final
weights (SPEC S.4) → one HTML report with its mechanistic section.

The paper's headline is the *interaction* of depth and imbalance — 2L: r=0.5 → 0% of seeds
generalize, r=0.9 → 77%; 1L: r=0.5 → 33%, r=0.9 → 0%. Every run prints the recipe's
description (the scale it trains at) above its table and in its report; the paper's numbers
appear beside a cell only where its runs are at the paper's setting (:mod:`.paper`, checked
from the config values), otherwise one line says the column is omitted and how the setting
differs.
"""

from __future__ import annotations

import time
from pathlib import Path

from rulelab.analysis.calibration import calibrate, calibration_text
from rulelab.analysis.stored import analyze_stored
from rulelab.report.html import write_report
from rulelab.report.results import results_html
from rulelab.report.stored_analyses import read_analyses
from rulelab.report.terminal import print_rate_table, progress_line
from rulelab.store import load
from rulelab.studies.shortcut_saturation.invariants import describe_invariants
from rulelab.studies.shortcut_saturation.paper import describe_scale, run_matches
from rulelab.study import Reproduction

HEADLINE = ("2L: r=0.5 → 0% of seeds generalize, r=0.9 → 77%; 1L: r=0.5 → 33%, r=0.9 → 0% "
            "(≈30 runs per cell, adv accuracy alone as the paper's text reads it). Imbalance "
            "helps the 2-layer model and hurts the 1-layer one.")


# Post-hoc analyses on the final weights for the report's mechanistic section (SPEC S.4): the
# cheap ones — about 30 s for the quick recipe's 32 runs on one CPU thread (ablation and
# patching would double that; `rulelab analyze` runs them on demand).
FINAL_ANALYSES = ("gradients", "fingerprints")
REPORT_SIMS = 200  # simulated nulls per detector in the report's calibration section


def final_analyses(r: Reproduction) -> float:
    """Run :data:`FINAL_ANALYSES` on the final checkpoints of the recipe's runs, store them
    like ``rulelab analyze`` does, print the gradient summary; the seconds it took."""
    from rulelab.studies.shortcut_saturation.analyses.gradients import gradient_conflict
    from rulelab.studies.shortcut_saturation.analyses.tables import fingerprint_table
    from rulelab.studies.shortcut_saturation.commands import COLUMNS, TASK, print_gradient_summary

    fns = {"gradients": lambda tr: gradient_conflict(tr.model, tr.data),
           "fingerprints": fingerprint_table}
    t0 = time.perf_counter()
    for name in FINAL_ANALYSES:
        frame = analyze_stored(r.lab, name, fns[name], task=TASK, columns=COLUMNS,
                               run_ids=list(r.run_ids), on_step=progress_line)
        if name == "gradients":
            print_gradient_summary(frame)
    return time.perf_counter() - t0


def reproduce(r: Reproduction) -> Path:
    """Print the rate table of the trained recipe in ``r.lab``, run the cheap mechanistic
    analyses on its final weights and write the report."""
    frames = load(r.lab)
    ids = set(r.run_ids)
    runs = frames.runs[frames.runs["run_id"].isin(ids)]
    metrics = frames.metrics[frames.metrics["run_id"].isin(ids)]
    note = r.recipe.description
    r.console.print(note, markup=False, highlight=False)
    kept = describe_invariants(runs, metrics)
    r.console.print(kept, markup=False, highlight=False)
    print_rate_table(r.console, runs, metrics=metrics)
    analysis_seconds = final_analyses(r)
    analyses = read_analyses(r.lab, runs, ("gradients", "fingerprints", "ablation", "patching"))
    wall = r.train_seconds
    r.console.print(f"training wall time {wall:.0f} s; analyses of the final weights "
                    f"{analysis_seconds:.0f} s", markup=False, highlight=False)
    at_paper = run_matches(runs)
    # paper.yaml also sweeps heads and weight decay: only its 2-head wd-0.1 cells compare
    headline = ("The paper's headline (docs/methods.md § S.3)" if at_paper.all() else
                "The paper's headline — comparable only with the cells at its setting"
                if at_paper.any() else
                "The paper's headline — at its own setting, not comparable with this scale")
    checks = calibrate(r.study, r.recipe.configs(), n_sims=REPORT_SIMS)
    lead = results_html(r.study, runs, metrics, lab=r.lab, scale=r.scale,  # results first
                        scale_lines=[note, describe_scale(runs), kept], calibrations=checks)
    sections = [
        (headline, HEADLINE),
        ("Wall time", f"training took {wall:.0f} s on {r.device} (a resumed run counts the "
         f"rest); the analyses of the final weights ({', '.join(FINAL_ANALYSES)}) "
         f"{analysis_seconds:.0f} s."),
        ("Each verdict against its null", calibration_text(checks)),
    ]
    path = write_report(r.out, title=f"{r.study.title} — {r.scale} reproduction", runs=runs,
                        metrics=metrics, sections=sections, analyses=analyses, lead=lead)
    r.console.print(f"report: {path}")
    return path
