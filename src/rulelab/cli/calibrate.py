"""``rulelab calibrate STUDY``: every detector of a study against its null (issue 21).

For each detector the study declares (``Study.calibrations``: a phase-2 onset, a dip, an early
lead, a scale-map verdict, …) the study simulates its null at the grid and seed count of a
preset (``--scale``, default quick) or of a lab you hold (``--lab``), runs the detector on each
simulated case and prints how many it called — its false-positive rate, with a 95% Wilson
interval, against the bar of 5% — and its power against a stated effect. No training: seconds
to a minute.
"""

from __future__ import annotations

from pathlib import Path

import typer

from rulelab.errors import UserError


def calibrate_cmd(
    study: str = typer.Argument(..., help="the study whose detectors to check (as `rulelab "
                                "reproduce --help` lists them)"),
    scale: str = typer.Option("quick", "--scale", help="the preset whose grid and seeds to "
                              "simulate at (a recipe name of the study)"),
    lab: Path | None = typer.Option(None, "--lab", help="simulate at the grid and seeds of "
                                    "this lab's runs instead of a preset"),
    sims: int = typer.Option(400, "--sims", help="simulated null (and effect) cases per "
                             "detector", min=20, max=100_000),
    seed: int = typer.Option(0, "--seed", help="seed of the simulations", min=0),
) -> None:
    """Each detector's false-positive rate under its null, and its power, at a preset or lab."""
    from rulelab.analysis.calibration import MAX_FPR, calibrate
    from rulelab.report.terminal import console
    from rulelab.study_registry import config_from_flat, studies
    from rulelab.study_registry import study as find_study

    the_study = find_study(study)
    if not the_study.calibrations:
        have = ", ".join(s.name for s in studies() if s.calibrations)
        raise UserError(f"STUDY: {study!r} declares no detectors to calibrate; use one of {have}")
    if lab is not None:
        from rulelab.store import Lab, StoreError

        try:
            rows = Lab(lab).runs_json()
        except StoreError as e:
            raise UserError(str(e)) from None
        names = {t.name for t in the_study.tasks}
        configs = [config_from_flat(r["config"]) for r in rows
                   if r["config"].get("task") in names]
        where = f"lab {lab} ({len(configs)} runs)"
    else:
        if scale not in the_study.scales():
            raise UserError(f"--scale: {scale!r} is not allowed; use one of "
                            f"{', '.join(the_study.scales())}")
        from rulelab.sweep.recipe import load_recipe

        configs = load_recipe(the_study.recipe_path(scale)).configs()
        where = f"preset {scale} ({len(configs)} runs)"
    say = console.print
    say(f"{the_study.title} — detectors against their nulls at the {where}; bar: a "
        f"false-positive rate ≤ {MAX_FPR:.0%}", style="bold", markup=False, highlight=False)
    failing = read = 0
    for c, check, took in calibrate(the_study, configs, sims, seed):
        say("")
        say(f"{c.name} — {c.reading}", style="bold", markup=False, highlight=False)
        if check is None:
            say("  not read: nothing in these runs for this detector", markup=False,
                highlight=False)
            continue
        read += 1
        failing += not check.within_bar
        say(f"  null: {check.null}", markup=False, highlight=False)
        say(f"  at: {check.setting}", markup=False, highlight=False)
        say(f"  {check.line()} ({took:.1f} s)", markup=False, highlight=False)
    say("")
    above = f"; {failing} above it (✗): read those calls as uncalibrated" if failing else ""
    say(f"{read - failing} of {read} detectors read here within the bar{above}", markup=False,
        highlight=False)
