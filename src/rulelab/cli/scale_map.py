"""``rulelab scale-map STUDY``: each headline claim of a study read at every scale the user holds
(issue 11) — the labs ``rulelab reproduce STUDY --scale S`` keeps at ``<labs>/STUDY-S``.

Prints one sentence per claim (at which scale it appears, or that it does not at any scale run
here) and one line per scale under it, and writes the figures: one HTML page (``--out``) with a
PNG of each claim's figure beside it. Reading never writes into the labs.
"""

from __future__ import annotations

from pathlib import Path

import typer

from rulelab.cli.options import check_out
from rulelab.errors import UserError


def scale_map_cmd(
    study: str = typer.Argument(..., help="the study whose claims to read, e.g. "
                                "shortcut-saturation or coexistence"),
    labs: Path = typer.Option(Path("rulelab-runs"), "--labs", help="folder holding the "
                              "study's labs, one per scale: <labs>/<study>-<scale>"),
    out: Path | None = typer.Option(None, "--out", help="HTML page to write (default "
                                    "reports/<study>-scale-map.html); each claim's figure is "
                                    "written beside it as <page>-<claim>.png"),
) -> None:
    """Each headline claim of a study at every scale you hold: one sentence per claim and a
    figure with the reading at each scale (95% Wilson intervals or seed ranges)."""
    from rulelab.report.scale_map import (
        claim_sentence,
        lab_path,
        open_scales,
        read_claims,
        scale_invariants,
    )
    from rulelab.report.terminal import console
    from rulelab.store import StoreError
    from rulelab.study_registry import studies
    from rulelab.study_registry import study as find_study

    the_study = find_study(study)
    if not the_study.claims:
        with_claims = ", ".join(s.name for s in studies() if s.claims)
        raise UserError(f"STUDY: {study!r} declares no claims to map; use one of {with_claims}")
    if labs.exists() and not labs.is_dir():
        raise UserError(f"--labs: {str(labs)!r} is not allowed; it is a file, give the folder "
                        "that holds the labs")
    out = check_out("--out", out or Path("reports") / f"{the_study.name}-scale-map.html", ".html")
    try:
        scales = open_scales(the_study, labs)
        if not scales:
            looked = ", ".join(str(lab_path(labs, the_study, s)) for s in the_study.scales())
            raise UserError(f"--labs: no lab of {the_study.name} under {labs} (looked for "
                            f"{looked}); run `rulelab reproduce {the_study.name} --scale quick` "
                            "first, or pass --labs")
        read = read_claims(the_study, scales)
        from rulelab.report.scale_map import write_scale_map

        path = write_scale_map(out, the_study, scales, read)
    except StoreError as e:
        raise UserError(str(e)) from None
    say = console.print
    say(f"{the_study.title} — scale map", style="bold", markup=False, highlight=False)
    for scale, lab in scales.items():
        say(f"  {scale}: {lab.path} ({len(lab.runs)} runs)", markup=False, highlight=False)
    invariants = scale_invariants(the_study, scales)
    if any(invariants.values()):
        say("\nwhat each scale keeps of the paper's setting (✗: a claim needing it reads "
            "'not testable at this scale'):", markup=False, highlight=False)
        for scale, held in invariants.items():
            marks = "; ".join(f"{i.label} {i.value} {i.mark}" for i in held)
            say(f"  {scale}: {marks}", markup=False, highlight=False)
    for claim, reading in read:
        say("")
        say(claim_sentence(claim, reading), style="bold", markup=False, highlight=False)
        for scale, r in reading.scales.items():
            say(f"  {scale} [{r.status}]: {r.sentence}", markup=False, highlight=False)
    say(f"\nscale map: {path}", markup=False, highlight=False)
