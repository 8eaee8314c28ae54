"""The scale map (issue 11): each headline claim of a study, read at every scale the user holds.

A study declares its claims (:class:`rulelab.study.Claim`); its labs live at
``<labs>/<study>-<scale>`` — where ``rulelab reproduce STUDY --scale S`` puts them — one per
recipe of the study (tiny, quick, medium, paper, …). This module finds the labs that exist,
hands every claim all of them at once (:class:`ScaleLab`, smallest scale first), and gathers
what each claim reads: one figure with the reading at every scale, with its intervals, and
one sentence per scale (:class:`ScaleReading`). :func:`claim_sentence` folds those into the one
sentence per claim the user reads first: at which scale the claim appears, or that it does not
at any scale run here. The module names no study: what a claim means is its study's code.

A study may declare *invariants* (:class:`rulelab.study.Invariant`, issue 20): quantities a
smaller scale must keep to be a fair copy of the paper (parameters per example, optimizer time
constants, …), computed from the configs each lab ran. A claim read at a scale that breaks an
invariant the claim ``needs`` reads :data:`NOT_TESTABLE`, never :data:`ABSENT`: a scale that
could not have shown the effect is no evidence against it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from rulelab.report.html import figure_html, page, write_page
from rulelab.report.views import upgrade_by_task
from rulelab.store import Lab, StoreError, load
from rulelab.study import Claim, Invariant, Study, resolve

# Scales in order of cost; a recipe name outside the ladder (variants, medium-s5s6) sorts
# after its ladder prefix ("medium-s5s6" after "medium"), then by name, numbers by value
# ("ladder-2k" before "ladder-16k").
LADDER = ("tiny", "quick", "medium", "ladder", "paper")

# What a claim can read at one scale.
SHOWS = "shows"  # in the paper's direction, beyond the intervals
DIRECTION = "direction only"  # in the paper's direction, but within the intervals
ABSENT = "does not show"
NOT_TESTABLE = "not testable at this scale"  # the scale breaks an invariant the claim needs
NOT_READ = "not read"  # the lab lacks the cells (or the analysis) the claim needs
STATUSES = (SHOWS, DIRECTION, ABSENT, NOT_TESTABLE, NOT_READ)


@dataclass(frozen=True)
class ScaleLab:
    """One scale's lab: the study's runs (summaries upgraded by their task's view) and metrics."""

    scale: str
    runs: pd.DataFrame
    metrics: pd.DataFrame
    lab: Lab = field(repr=False)

    @property
    def path(self) -> Path:
        """The lab's folder (the lab is the one thing held: issue 22)."""
        return self.lab.root

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


def scale_key(scale: str) -> tuple:
    base = scale.split("-")[0]
    natural = tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                    for p in re.split(r"(\d+)", scale) if p)
    return (LADDER.index(base) if base in LADDER else len(LADDER), natural)


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
        out[scale] = ScaleLab(scale, upgrade_by_task(runs, metrics).reset_index(drop=True),
                              metrics, lab)
    return out


def scale_invariants(study: Study, scales: Mapping[str, ScaleLab]
                     ) -> dict[str, tuple[Invariant, ...]]:
    """Each scale's invariants (empty where the study declares none)."""
    if not study.invariants:
        return {s: () for s in scales}
    compute = resolve(study.invariants)
    return {s: tuple(compute(lab.runs, lab.metrics)) for s, lab in scales.items()}


def broken_text(broken: list[Invariant]) -> str:
    """``"parameters per training example (2L) 34 (fair 3–6.5, paper 4.4); …"``."""
    return "; ".join(f"{i.label} {i.value} ("
                     + (f"fair {i.allowed}, " if i.allowed not in ("same", i.paper) else "")
                     + f"paper {i.paper})" for i in broken)


def gate(claim: Claim, reading: ClaimReading,
         invariants: Mapping[str, tuple[Invariant, ...]]) -> ClaimReading:
    """``reading`` with every scale that breaks an invariant ``claim`` needs marked
    :data:`NOT_TESTABLE` (its rates still in the sentence); a reading that could not be made
    (:data:`NOT_READ`) stays so, with the broken invariants named."""
    out = {}
    for scale, r in reading.scales.items():
        broken = [i for i in invariants.get(scale, ()) if i.name in claim.needs and not i.kept]
        if not broken:
            out[scale] = r
        elif r.status == NOT_READ:
            out[scale] = ScaleReading(NOT_READ, f"{r.sentence}; and the scale breaks "
                                      f"{broken_text(broken)}")
        else:
            out[scale] = ScaleReading(NOT_TESTABLE, f"{r.sentence} — the rates would read "
                                      f"'{r.status}', but the scale breaks what the claim "
                                      f"needs: {broken_text(broken)}")
    return ClaimReading(reading.figure, out)


def read_claims(study: Study, scales: Mapping[str, ScaleLab]) -> list[tuple[Claim, ClaimReading]]:
    """Every claim of ``study`` read over ``scales``, gated by each scale's invariants."""
    invariants = scale_invariants(study, scales)
    return [(claim, gate(claim, resolve(claim.read)(dict(scales)), invariants))
            for claim in study.claims]


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
    elif not {DIRECTION, ABSENT} & set(by_status):
        head = "not tested: no scale run here keeps what it needs, or holds its cells"
    else:
        head = "shows at no scale run here"
    detail = f" ({'; '.join(parts)})" if parts else ""
    return f"{claim.name} — {claim.title}: {head}{detail}."


def scale_map_html(study: Study, scales: Mapping[str, ScaleLab],
                   read: list[tuple[Claim, ClaimReading]]) -> str:
    """The scale map as one HTML page: the labs read, then per claim (its text once, in the
    heading) where it shows, the per-scale sentences and its figure."""
    parts = [f"<h1>{html.escape(study.title)} — scale map</h1>"]
    labs = "".join(f"<li><b>{html.escape(s)}</b>: <code>{html.escape(str(lab.path))}</code> "
                   f"({len(lab.runs)} runs)</li>" for s, lab in scales.items())
    parts.append(f"<p>Labs read:</p><ul>{labs or '<li>none</li>'}</ul>")
    parts.append(_status_table(scales, read))
    parts.append(_invariant_table(scale_invariants(study, scales)))
    for claim, reading in read:
        parts.append(f"<h2>{html.escape(claim.name)}: {html.escape(claim.title)}</h2>")
        verdict = claim_sentence(claim, reading).removeprefix(f"{claim.name} — {claim.title}: ")
        parts.append(f"<p><b>{html.escape(verdict)}</b></p>")
        rows = "".join(f"<li><b>{html.escape(s)}</b> ({html.escape(r.status)}): "
                       f"{html.escape(r.sentence)}</li>"
                       for s, r in sorted(reading.scales.items(), key=lambda kv: scale_key(kv[0])))
        parts.append(f"<ul>{rows}</ul>")
        parts.append(figure_html(reading.figure, f"{claim.name} at every scale held, with "
                                 "its intervals"))  # the claim's text once, in the heading
    return page(f"{study.title} — scale map", parts)


def _status_table(scales: Mapping[str, ScaleLab],
                  read: list[tuple[Claim, ClaimReading]]) -> str:
    """Claims × scales: what each claim reads at each scale."""
    head = "".join(f"<th>{html.escape(s)}</th>" for s in scales)
    rows = "".join(
        f"<tr><td><b>{html.escape(c.name)}</b></td>" + "".join(
            f"<td>{html.escape(r.scales[s].status) if s in r.scales else ''}</td>"
            for s in scales) + "</tr>" for c, r in read)
    return (f"<table><tr><th>claim</th>{head}</tr>{rows}</table>" if read else "")


def _invariant_table(invariants: Mapping[str, tuple[Invariant, ...]]) -> str:
    """Invariants × scales beside the paper's value and the range a fair scale keeps."""
    first = next((v for v in invariants.values() if v), ())
    if not first:
        return ""
    head = "".join(f"<th>{html.escape(s)}</th>" for s in invariants)
    rows = []
    for k, inv in enumerate(first):
        cells = []
        for values in invariants.values():
            i = values[k] if k < len(values) else None
            cells.append("<td></td>" if i is None else
                         f"<td>{html.escape(i.value)} {i.mark}</td>")
        rows.append(f"<tr><td>{html.escape(inv.label)}</td><td>{html.escape(inv.paper)}</td>"
                    f"<td>{html.escape(inv.allowed)}</td>{''.join(cells)}</tr>")
    return ("<p>What each scale keeps of the paper's setting (✗: broken; a claim that needs it "
            "reads “not testable at this scale” there):</p>"
            f"<table><tr><th>invariant</th><th>paper</th><th>fair</th>{head}</tr>"
            f"{''.join(rows)}</table>")


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
