"""What scale a set of study-M runs is, and how it departs from the paper's setting (SPEC M.1–M.3).

The paper's setting (Liu & Lu 2026, as far as the research notes can tell; SPEC M.1–M.3): add
mod P = 113 (likely — from a secondary summary and the authors' companion paper), an 80/20 split,
full-batch AdamW at lr 1e-3 and weight decay 0.1 with cross-entropy, up to 200k steps, widths
M = 2^j + 1 for j = 4..12 (17…4097) and label noise up to α = 0.8. The comparison is made from
the runs' own config values, not from a preset's name, so a lab trained by hand at the paper's
values counts as the paper's setting and a renamed toy grid does not.
"""

from __future__ import annotations

import pandas as pd

PAPER_P = 113
PAPER_LR, PAPER_WD = 1e-3, 0.1
PAPER_STEPS = 200_000
PAPER_WIDTHS = (17, 4097)
PAPER_NOISE = 0.8
PAPER_TRAIN_FRAC = 0.8


def _values(runs: pd.DataFrame, col: str) -> list:
    return sorted(runs[col].dropna().unique().tolist()) if col in runs else []


def _fmt(values: list) -> str:
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def departures(runs: pd.DataFrame) -> list[str]:
    """How ``runs`` (a runs frame with config columns) depart from the paper's setting: one
    phrase per departing field, e.g. ``"P = 31 (paper: 113, likely)"``; empty when it matches."""
    out = []
    checks = (
        ("op", lambda v: v == "add", "op {} (paper: add)"),
        ("p", lambda v: v == PAPER_P, "P = {} (paper: 113, likely)"),
        ("train_frac", lambda v: v == PAPER_TRAIN_FRAC, "train fraction {} (paper: 0.8)"),
        ("loss", lambda v: v == "ce", "loss {} (paper: cross-entropy)"),
    )
    for col, ok, text in checks:
        bad = [v for v in _values(runs, col) if not ok(v)]
        if bad:
            out.append(text.format(_fmt(bad)))
    adamw = runs[runs["optimizer"] == "adamw"] if "optimizer" in runs else runs
    for col, want, name in (("lr", PAPER_LR, "lr"), ("weight_decay", PAPER_WD, "weight decay")):
        bad = [v for v in _values(adamw, col) if v != want]
        if bad:
            out.append(f"AdamW {name} {_fmt(bad)} (paper: {want:g})")
    steps = _values(runs, "epochs")
    if steps and max(steps) < PAPER_STEPS:
        out.append(f"{max(steps):,} full-batch steps (paper: up to {PAPER_STEPS:,})")
    widths = _values(runs, "width")
    if widths and (min(widths) > PAPER_WIDTHS[0] or max(widths) < PAPER_WIDTHS[1]):
        out.append(f"widths {min(widths)}…{max(widths)} (paper: {PAPER_WIDTHS[0]}…"
                   f"{PAPER_WIDTHS[1]})")
    noise = _values(runs, "noise")
    if noise and max(noise) < PAPER_NOISE:
        out.append(f"α up to {max(noise):g} (paper: up to {PAPER_NOISE:g})")
    return out


def matches_paper(runs: pd.DataFrame) -> bool:
    """Whether ``runs`` are at the paper's setting (no :func:`departures`)."""
    return not departures(runs)


def scale_line(name: str, runs: pd.DataFrame) -> str:
    """One line: the scale's name and its departures, or that it matches the paper."""
    gone = departures(runs)
    if not gone:
        return (f"scale: {name} — the paper's setting (P = {PAPER_P}, AdamW lr {PAPER_LR:g}, "
                f"wd {PAPER_WD:g}, {PAPER_STEPS:,} steps, widths {PAPER_WIDTHS[0]}…"
                f"{PAPER_WIDTHS[1]}, α up to {PAPER_NOISE:g}): every claim gets a verdict")
    return (f"scale: {name} — departs from the paper: {'; '.join(gone)}. Verdicts only for "
            "scale-free claims; every other row is a reading, not a reproduction")
