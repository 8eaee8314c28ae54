"""The scale map (issue 11): each headline claim of a study, read at every scale the user holds.

A study declares its claims (:class:`rulelab.study.Claim`); its labs live at
``<labs>/<study>-<scale>`` — where ``rulelab reproduce STUDY --scale S`` puts them — one per
recipe of the study (tiny, quick, medium, paper, …). This module finds the labs that exist,
hands every claim all of them at once (:class:`ScaleLab`, smallest scale first), and gathers
what each claim reads: one figure with the reading at every scale, with its intervals, and
one sentence per scale (:class:`ScaleReading`). :func:`claim_sentence` folds those into the one
sentence per claim the user reads first: at which scale the claim appears, or that it does not
at any scale run here. The module names no study: what a claim means is its study's code.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from rulelab.report.html import figure_html, page, write_page
from rulelab.report.views import upgrade_by_task
from rulelab.store import Lab, StoreError, load
from rulelab.study import Claim, Study, resolve

# Scales in order of cost; a recipe name outside the ladder (variants, medium-s5s6) sorts
# after its ladder prefix ("medium-s5s6" after "medium"), then by name.
LADDER = ("tiny", "quick", "medium", "paper")

# What a claim can read at one scale.
SHOWS = "shows"  # in the paper's direction, beyond the intervals
DIRECTION = "direction only"  # in the paper's direction, but within the intervals
ABSENT = "does not show"
NOT_READ = "not read"  # the lab lacks the cells (or the analysis) the claim needs
STATUSES = (SHOWS, DIRECTION, ABSENT, NOT_READ)


@dataclass(frozen=True)
class ScaleLab:
    """One scale's lab: the study's runs (summaries upgraded by their task's view) and metrics."""

    scale: str
    path: Path
    runs: pd.DataFrame
    metrics: pd.DataFrame
    lab: Lab = field(repr=False)

    def table(self, name: str) -> pd.DataFrame:
        """Analysis table ``name`` stored in this lab (``rulelab analyze``), or an empty frame."""
        return self.lab.read_table(name)


@dataclass(frozen=True)
class ScaleReading:
    """What a claim reads at one scale: a status (:data:`STATUSES`) and one sentence."""

    status: str
    sentence: str

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")


@dataclass(frozen=True)
class ClaimReading:
    """A claim read over the scales: its figure and one :class:`ScaleReading` per scale."""

    figure: Figure
    scales: Mapping[str, ScaleReading]


def scale_key(scale: str) -> tuple[int, str]:
    base = scale.split("-")[0]
    return (LADDER.index(base) if base in LADDER else len(LADDER), scale)


def lab_path(labs: Path, study: Study, scale: str) -> Path:
    """Where ``rulelab reproduce`` keeps ``study``'s lab of ``scale`` under ``labs``."""
    return Path(labs) / f"{study.name}-{scale}"


def open_scales(study: Study, labs: Path) -> dict[str, ScaleLab]:
    """Every lab of ``study`` under ``labs`` that exists and holds runs of the study's tasks,
    keyed by scale, smallest first. A folder that is not a lab is skipped; a damaged lab
    raises :class:`StoreError`."""
    tasks = {t.name for t in study.tasks}
    out = {}
    for scale in sorted(study.scales(), key=scale_key):
        path = lab_path(labs, study, scale)
        if not (path / "registry.sqlite").is_file():
            continue
        lab = Lab(path)
        frames = load(lab)
        runs = frames.runs
        if "task" in runs.columns:
            runs = runs[runs["task"].isin(tasks)]
        if runs.empty:
            continue
        runs = runs.dropna(axis=1, how="all")
        ids = set(runs["run_id"])
        metrics = frames.metrics[frames.metrics["run_id"].isin(ids)]
        out[scale] = ScaleLab(scale, path, upgrade_by_task(runs, metrics).reset_index(drop=True),
                              metrics, lab)
    return out


def read_claims(study: Study, scales: Mapping[str, ScaleLab]) -> list[tuple[Claim, ClaimReading]]:
    """Every claim of ``study`` read over ``scales``."""
    return [(claim, resolve(claim.read)(dict(scales))) for claim in study.claims]


def claim_sentence(claim: Claim, reading: ClaimReading) -> str:
    """One sentence: at which scale the claim appears (the smallest that shows it), how it reads
    at the others, or that it shows at no scale run here."""
    by_status: dict[str, list[str]] = {}
    for scale in sorted(reading.scales, key=scale_key):
        by_status.setdefault(reading.scales[scale].status, []).append(scale)
    parts = [f"{status} at {', '.join(scales)}" for status, scales in
             sorted(by_status.items(), key=lambda kv: STATUSES.index(kv[0]))]
    if SHOWS in by_status:
        head = f"appears at the {by_status[SHOWS][0]} scale"
    elif not reading.scales:
        head = "no lab of this study to read"
    else:
        head = "shows at no scale run here"
    detail = f" ({'; '.join(parts)})" if parts else ""
    return f"{claim.name} — {claim.title}: {head}{detail}."


def scale_map_html(study: Study, scales: Mapping[str, ScaleLab],
                   read: list[tuple[Claim, ClaimReading]]) -> str:
    """The scale map as one HTML page: the labs read, then per claim its sentence, the
    per-scale sentences and its figure."""
    parts = [f"<h1>{html.escape(study.title)} — scale map</h1>"]
    labs = "".join(f"<li><b>{html.escape(s)}</b>: <code>{html.escape(str(lab.path))}</code> "
                   f"({len(lab.runs)} runs)</li>" for s, lab in scales.items())
    parts.append(f"<p>Labs read:</p><ul>{labs or '<li>none</li>'}</ul>")
    for claim, reading in read:
        parts.append(f"<h2>{html.escape(claim.name)}: {html.escape(claim.title)}</h2>")
        parts.append(f"<p><b>{html.escape(claim_sentence(claim, reading))}</b></p>")
        rows = "".join(f"<li><b>{html.escape(s)}</b> ({html.escape(r.status)}): "
                       f"{html.escape(r.sentence)}</li>"
                       for s, r in sorted(reading.scales.items(), key=lambda kv: scale_key(kv[0])))
        parts.append(f"<ul>{rows}</ul>")
        parts.append(figure_html(reading.figure, f"{claim.name}: {claim.title}"))
    return page(f"{study.title} — scale map", parts)


def write_scale_map(out: Path, study: Study, scales: Mapping[str, ScaleLab],
                    read: list[tuple[Claim, ClaimReading]]) -> Path:
    """Write the HTML page to ``out`` and each claim's figure beside it as
    ``<out stem>-<claim>.png``; returns the page's path."""
    path = write_page(out, scale_map_html(study, scales, read))
    for claim, reading in read:
        png = path.with_name(f"{path.stem}-{claim.name}.png")
        try:
            reading.figure.savefig(png, dpi=110)
        except OSError as err:
            raise StoreError(f"cannot write {png}: {err.strerror or err}") from None
    return path
