"""Every study's ``rulelab report`` rendered in a real browser (issue 10): headless Chromium
(Debian's ``/usr/bin/chromium``, driven by the ``playwright`` package; no browser is
downloaded) opens the page of a tiny lab per study — study S with tables tracked during
training *and* a post-hoc ``rulelab analyze``, study M with its analyses, sparse parity, and a
lab holding two tasks — and checks what a reader sees:

- every figure is there and drawn: each ``<img>`` decoded (natural width and height > 0) and
  not blank (its pixels take more than a handful of values), each ``<svg>`` non-empty;
- no console error and no page error;
- no panel says "no metrics yet" (or any other no-data message) where the lab holds the data;
- no figure the figure check (:mod:`rulelab.report.figure_check`, run on each figure as the
  report saves it) marked: no text cut at the figure's edge (a colour-bar label, a y label),
  no tick labels over each other, no curve leaving its axes, no legend entry that draws
  nothing ("thick: median" where no median is drawn);
- results first (issue 23): the page opens with what the lab shows (its first heading), its
  title names the study, and the scale line is printed once;
- the study's own figures are there (captions), a section per task in the mixed lab.

A full-page screenshot per study is kept in ``$RULELAB_SCREENSHOTS`` (default: the test's tmp
dir) and its path printed. The labs take seconds: a few runs of a few epochs each.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason=f"{CHROMIUM} is missing (Debian's chromium package)")

S_TRAIN = ["train", "mpsp", "--layers", "1", "--heads", "1", "--ratio", "0.5", "--seq-len", "4",
           "--vocab", "6", "--n-train", "256", "--n-eval", "128", "--epochs", "10",
           "--batch-size", "64", "--eval-every", "2", "--seeds", "2", "--d-model", "16",
           "--d-mlp", "16", "--track", "gradients,fingerprints"]
M_TRAIN = ["train", "modular", "--p", "11", "--train-frac", "0.8", "--width", "9", "--width",
           "33", "--noise", "0", "--noise", "0.5", "--epochs", "40", "--lr", "0.01",
           "--weight-decay", "1", "--eval-every", "10", "--seeds", "2"]
P_TRAIN = ["train", "sparse_parity", "--n-bits", "6", "--n-bits", "8", "--k", "2", "--width",
           "32", "--epochs", "200", "--eval-every", "10", "--seeds", "2"]

# What each page must show beside the generic curves: (figure captions it must hold,
# headings it must hold).
EXPECTED = {
    "shortcut-saturation": (["Generalization rate vs spurious ratio", "Gradient conflict",
                             "QK/OV fingerprints"], ["Mechanistic analyses"]),
    "coexistence": (["Test accuracy vs width", "Learning order", "Frequency filtering",
                     "Early lead"], ["Analyses (docs/methods.md)"]),
    "sparse-parity": (["Steps to learn vs n", "Support mass and Fourier gap"], []),
    "two-tasks": (["Generalization rate vs spurious ratio", "Test accuracy vs width"],
                  ["Task modular", "Task mpsp"]),
}


def rulelab(*argv) -> None:
    """``rulelab ARGV`` in this process (the torch import is paid once); exit 0 required."""
    from rulelab.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["rulelab", *map(str, argv)])
        mp.delenv("RULELAB_HOME", raising=False)
        try:
            main()
        except SystemExit as e:
            assert not e.code, f"rulelab {' '.join(map(str, argv))} exited {e.code}"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """study → its report, each from a tiny lab built here."""
    root = tmp_path_factory.mktemp("labs")
    labs = {name: root / name for name in EXPECTED}
    rulelab(*S_TRAIN, "--quiet", "--lab", labs["shortcut-saturation"])
    rulelab("analyze", "gradients", "--lab", labs["shortcut-saturation"])  # beside the tracked
    rulelab(*M_TRAIN, "--quiet", "--lab", labs["coexistence"])
    for name in ("ff", "order"):
        rulelab("analyze", name, "--lab", labs["coexistence"])
    rulelab(*P_TRAIN, "--quiet", "--lab", labs["sparse-parity"])
    shutil.copytree(labs["shortcut-saturation"], labs["two-tasks"])
    rulelab(*M_TRAIN, "--quiet", "--lab", labs["two-tasks"])
    out = {}
    for name, lab in labs.items():
        out[name] = root / f"{name}.html"
        rulelab("report", "--lab", lab, "--out", out[name])
    return out


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright  # the test extra; never skipped

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM))
        yield chromium
        chromium.close()


# Per <img>: decoded size and how many distinct colours a 64×64 thumbnail holds (1 = blank).
IMAGES_JS = """() => [...document.images].map(img => {
  const c = document.createElement('canvas'); c.width = 64; c.height = 64;
  const g = c.getContext('2d'); g.drawImage(img, 0, 0, 64, 64);
  const px = g.getImageData(0, 0, 64, 64).data, seen = new Set();
  for (let i = 0; i < px.length; i += 4) seen.add(px[i] << 16 | px[i + 1] << 8 | px[i + 2]);
  return {alt: img.alt, w: img.naturalWidth, h: img.naturalHeight, complete: img.complete,
          colours: seen.size};
})"""
SVGS_JS = """() => [...document.querySelectorAll('svg')].map(s => {
  const r = s.getBoundingClientRect(); return {w: r.width, h: r.height, n: s.childElementCount};
})"""


def screenshot_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("RULELAB_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("study", list(EXPECTED))
def test_every_figure_renders_in_chromium(study, reports, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(reports[study].as_uri(), wait_until="load")

    images = page.evaluate(IMAGES_JS)
    svgs = page.evaluate(SVGS_JS)
    captions = page.eval_on_selector_all("figcaption", "els => els.map(e => e.textContent)")
    headings = page.eval_on_selector_all("h2, h3", "els => els.map(e => e.textContent)")
    empty = page.eval_on_selector_all("figure[data-no-data]",
                                      "els => els.map(e => e.dataset.noData)")
    problems = page.eval_on_selector_all(
        "figure[data-figure-problems]",
        "els => els.map(e => e.querySelector('img').alt + ': ' + e.dataset.figureProblems)")
    title = page.title()
    scale_lines = page.eval_on_selector_all(
        "p.meta", "els => els.map(e => e.textContent).filter(t => t.startsWith('scale:'))")
    shot = screenshot_dir(tmp_path) / f"report-{study}.png"
    page.screenshot(path=str(shot), full_page=True)
    page.close()
    print(f"screenshot of the {study} report: {shot}")

    assert not errors, errors
    assert len(images) + len(svgs) >= 3 and len(images) == len(captions)
    for img in images:
        assert img["complete"] and img["w"] > 0 and img["h"] > 0, img["alt"]
        assert img["colours"] > 8, f"blank figure: {img['alt']} ({img['colours']} colours)"
    for svg in svgs:
        assert svg["w"] > 0 and svg["h"] > 0 and svg["n"] > 0, svg
    assert not empty, f"no-data messages where the lab has data: {empty}"
    assert not problems, "\n".join(problems)
    assert headings[0] == "What this lab shows", headings
    assert len(scale_lines) == len(set(scale_lines)) >= 1, scale_lines  # each scale once
    assert "rulelab report" not in title or study == "two-tasks", title
    if study != "two-tasks":
        from rulelab.study_registry import study as find_study

        assert title.startswith(find_study(study).title + " — "), title
    want_captions, want_headings = EXPECTED[study]
    for want in want_captions:
        assert any(c.startswith(want) for c in captions), (want, captions)
    for want in want_headings:
        assert any(h.startswith(want) for h in headings), (want, headings)
    assert shot.stat().st_size > 10_000
