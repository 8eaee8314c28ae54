"""What a lab shows, first (issue 23): the section a report opens with, before any figure.

At the lab's scale (its scale line printed once here, nowhere else on the page), each headline
claim of the runs' study (:class:`rulelab.study.Claim`, read by the same code as ``rulelab
scale-map``, gated by the same invariants) with its reading — rates with their 95% Wilson
intervals (SPEC "Cross-cutting") —, its verdict, and the false-positive rate of that verdict
where the study calibrates it (``Study.calibrations``, issue 21: a calibration named
``"<claim> verdict"``, simulated at this lab's own grid and seeds); then the study's own
results (a findings table, a steps table), the other detectors against their nulls when a
reproduction has calibrated them, and the README's "What it shows" for the preset the lab
is at, quoted as the README's. The module names no study: each piece is the study's own.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from rulelab.report.scale_map import ScaleLab, read_claims

REPORT_SIMS = 200  # simulated nulls per claim verdict in a report
README = Path(__file__).resolve().parents[3] / "README.md"  # a source checkout's README


def scale_of(study, lab_name: str) -> str | None:
    """The preset a lab is at, from its folder ``<study>-<scale>`` (where ``rulelab
    reproduce`` puts it), or None for a lab of its own grid."""
    prefix = f"{study.name}-"
    scale = lab_name[len(prefix):] if lab_name.startswith(prefix) else None
    return scale if scale in study.scales() else None


def page_title(study, scale: str | None, lab_name: str) -> str:
    """``"Shortcut saturation — quick scale"``; a lab of its own grid is named."""
    at = f"{scale} scale" if scale else "its own scale"
    return f"{study.title} — {at} (lab {lab_name})"


def claim_verdicts(study, configs, n_sims: int = REPORT_SIMS) -> list[tuple]:
    """``[(Calibration, NullCheck | None, seconds)]`` of the calibrations that check a claim's
    verdict (named ``"<claim> verdict"``): cheap, run by every report."""
    import time

    from rulelab.study import resolve

    names = {f"{c.name} verdict" for c in study.claims}
    out = []
    for c in study.calibrations:
        if c.name in names and configs:
            t0 = time.perf_counter()
            out.append((c, resolve(c.run)(configs, n_sims, 0), time.perf_counter() - t0))
    return out


def _fpr(check) -> str:
    if check is None:
        return "nothing here for its null to read"
    lo, hi = check.fpr_interval
    bar = "≤ 5% ✓" if check.within_bar else "> 5% ✗: a call is not evidence"
    return f"{check.fpr:.1%} [{lo:.1%}, {hi:.1%}] of {check.n_null} nulls ({bar})"


def _cell(text: str) -> str:
    return f'<td style="text-align:left">{html.escape(text)}</td>'


def claims_table(study, lab, runs: pd.DataFrame, metrics: pd.DataFrame, scale: str,
                 calibrations: list[tuple]) -> str:
    """Claim × (reading at this scale, verdict, false-positive rate of the verdict)."""
    if not study.claims or lab is None or runs.empty:
        return ""
    read = read_claims(study, {scale: ScaleLab(scale, runs, metrics, lab)})
    checks = {c.name: check for c, check, _ in calibrations}
    rows = []
    for claim, reading in read:
        r = reading.scales.get(scale)
        check = checks.get(f"{claim.name} verdict", "not calibrated")
        fpr = check if isinstance(check, str) else _fpr(check)
        rows.append("<tr>" + _cell(f"{claim.name}: {claim.title}")
                    + _cell(r.sentence if r else "not read") + _cell(r.status if r else "")
                    + _cell(fpr) + "</tr>")
    head = "".join(f'<th style="text-align:left">{h}</th>' for h in (
        "claim", "reading here [95% CI]", "verdict", "false-positive rate of the verdict"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def detectors_table(study, calibrations: list[tuple]) -> str:
    """The study's other detectors (phase onsets, dips, leads, …) against their nulls."""
    claims = {f"{c.name} verdict" for c in study.claims}
    rows = ["<tr>" + _cell(c.name) + _cell(c.reading) + _cell(_fpr(check))
            + _cell("" if check is None or not check.n_effect else
                    f"{check.power:.0%} at {check.effect}") + "</tr>"
            for c, check, _ in calibrations if c.name not in claims]
    if not rows:
        return ""
    head = "".join(f'<th style="text-align:left">{h}</th>' for h in (
        "detector", "what it calls", "false-positive rate", "power"))
    return ("<p>Each detector the analyses below use, against its null at this lab's grid and "
            f"seeds:</p><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table>")


def readme_shows(heading: str, readme: Path = README) -> str | None:
    """The "**What it shows.**" paragraph of the README section whose heading starts with
    ``heading``, or None (no README beside the package, or no such paragraph)."""
    if not readme.is_file():
        return None
    text = readme.read_text(encoding="utf-8")
    section = re.search(rf"^## {re.escape(heading)}.*?(?=^## |\Z)", text, re.M | re.S)
    if not section:
        return None
    para = re.search(r"\*\*What it shows\.\*\*(.*?)(?:\n\s*\n|\Z)", section.group(0), re.S)
    return " ".join(para.group(1).split()) if para else None


def _markdown_html(text: str) -> str:
    """Bold and code spans of a README paragraph as HTML (the rest escaped)."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def results_html(study, runs: pd.DataFrame, metrics: pd.DataFrame, *, lab=None,
                 scale: str | None = None, scale_lines=(), configs=None,
                 calibrations: list[tuple] | None = None, own: str = "") -> str:
    """The opening section: the scale lines, the claims table, ``own`` (the study's results as
    HTML), the other detectors (when ``calibrations`` holds them) and the README's "What it
    shows" for ``scale`` (when the study's view names its README section)."""
    from rulelab.report.views import view_of

    if calibrations is None:
        calibrations = claim_verdicts(study, configs) if study is not None else []
    runs = view_of(runs).upgrade(runs, metrics)  # claims read the current summary columns
    parts = ["<h2>What this lab shows</h2>"]
    parts += [f'<p class="meta">{html.escape(line)}</p>' for line in scale_lines if line]
    if study is not None:
        parts.append(claims_table(study, lab, runs, metrics, scale or "this lab", calibrations))
    parts.append(own)
    if study is not None:
        parts.append(detectors_table(study, calibrations))
    shows = view_of(runs).readme
    if shows and scale and shows[1] == scale and (text := readme_shows(shows[0])):
        parts.append(f"<p>What the README reports for the {html.escape(scale)} preset (its "
                     "numbers are from the run it describes, not necessarily this lab's):</p>"
                     f"<blockquote>{_markdown_html(text)}</blockquote>")
    return "\n".join(p for p in parts if p)


def lab_configs(lab, study, ids=None) -> list:
    """The run configs of ``study``'s tasks in ``lab`` (the grid its nulls are simulated at),
    of the runs ``ids`` only where given."""
    from rulelab.study_registry import config_from_flat

    names = {t.name for t in study.tasks}
    return [config_from_flat(r["config"]) for r in lab.runs_json()
            if r["config"].get("task") in names and (ids is None or r["run_id"] in ids)]


def write_lab_report(out, lab, runs: pd.DataFrame, metrics: pd.DataFrame,
                     analyses: dict[str, pd.DataFrame]) -> Path:
    """``rulelab report``: the lab's page, titled by its study and scale, opening with what
    each study in it shows (claims at the lab's scale, their verdicts' false-positive rates at
    its grid and seeds) before the generic sections of :func:`rulelab.report.html.write_report`."""
    from rulelab.report.html import by_task, write_report
    from rulelab.report.views import view_of
    from rulelab.study_registry import study_of

    name = Path(lab.root).name
    by_study: dict[str, tuple] = {}
    for _, part in by_task(runs):
        if "task" in part.columns and part["task"].notna().any():
            study = study_of(str(part["task"].dropna().iloc[0]))
            held = by_study.get(study.name, (study, []))[1]
            by_study[study.name] = (study, [*held, part])
    leads, replaced = [], False
    for study, parts in by_study.values():
        part = pd.concat(parts).dropna(axis=1, how="all")
        view = view_of(parts[0])
        part = view.upgrade(part, metrics)
        scale = scale_of(study, name)
        leads.append(results_html(study, part, metrics, lab=lab, scale=scale,
                                  scale_lines=[view.scale(part)],
                                  configs=lab_configs(lab, study, set(part["run_id"])),
                                  own=view.results(part, metrics)))
        replaced |= view.replaces_rate_table
    if len(by_study) == 1:
        study, _ = next(iter(by_study.values()))
        title = page_title(study, scale_of(study, name), name)
    else:
        title = f"rulelab report — lab {name}: " + ", ".join(
            s.title for s, _ in by_study.values()) if by_study else f"rulelab report — {name}"
    return write_report(out, title=title, runs=runs, metrics=metrics, analyses=analyses,
                        lead="\n".join(leads), rates=not replaced)
