"""Study M's claims on the scale map (issue 11), read over synthetic labs written through the
store API (no training). The generic map: tests/report/test_scale_map.py."""

from __future__ import annotations

import itertools

import pandas as pd
from tests.report.test_scale_map import cli, read

from rulelab.report.scale_map import (
    ABSENT,
    DIRECTION,
    NOT_READ,
    SHOWS,
    claim_sentence,
)
from rulelab.store import Lab
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.study_registry import study

M = study("coexistence")


def m_lab(root, scale: str, rows: list[tuple], g_acc: dict | None = None) -> None:
    """A study-M lab: rows (noise, width, seed, test, noisy_fit); ``g_acc[(noise, width)]`` is
    FF's G test accuracy stored as the lab's ``ff`` table."""
    lab = Lab(root / f"coexistence-{scale}", create=True)
    ff = []
    for noise, width, seed, test, fit in rows:
        c = ModularRunConfig(p=11, width=width, noise=noise, seed=seed, epochs=10)
        lab.register([(c.run_id, c.flat())], f"coexistence-{scale}")
        lab.mark_done(c.run_id, {"final_test_acc": test, "final_noisy_acc": fit,
                                 "final_clean_acc": 1.0})
        if g_acc is not None:
            ff.append({"run_id": c.run_id, "epoch": 10, "member": 0, "network": "G",
                       "subset": "test", "acc": g_acc[noise, width], "noise": noise,
                       "width": width})
    if ff:
        lab.write_table("ff", "all", pd.DataFrame(ff))


def test_m1_and_m2_follow_the_network_and_g_accuracies(tmp_path):
    widths = (17, 65, 257)
    # quick: memorizes at 65+ but stays at chance; medium: test rises with width while fitting
    grid = list(itertools.product(widths, (0, 1)))
    quick = [(0.8, w, s, 0.1, 0.5 if w == 17 else 1.0) for w, s in grid]
    # medium has 3 seeds a width: disjoint seed ranges by chance 1/C(6, 3) = 5% (issue 21)
    medium = [(0.8, w, s, {17: 0.2, 65: 0.3, 257: 0.8}[w] + 0.01 * s, 0.5 if w == 17 else 1.0)
              for w, s in itertools.product(widths, (0, 1, 2))]
    m_lab(tmp_path, "quick", quick, g_acc={(0.8, w): 0.6 for w in widths})
    m_lab(tmp_path, "medium", medium, g_acc={(0.8, 17): 0.5, (0.8, 65): 0.97, (0.8, 257): 1.0})
    claims = read(M, tmp_path)
    (c1, m1), m2 = claims["M1"], claims["M2"][1]
    assert m1.scales["medium"].status == SHOWS and m1.scales["quick"].status == ABSENT
    assert "fitted from M = 65 (test 31.0% [30.0%, 32.0%]) to M = 257 (test 81.0%" in \
        m1.scales["medium"].sentence
    assert "appears at the medium scale" in claim_sentence(c1, m1)
    assert m2.scales["medium"].status == SHOWS
    assert m2.scales["quick"].status == DIRECTION  # G 60% beats the network's 10%
    assert "G's test accuracy 100.0% [100.0%, 100.0%] at M = 257" in m2.scales["medium"].sentence


def test_m1_at_two_seeds_a_width_is_too_few_to_call(tmp_path):
    """Two seed ranges are disjoint by chance 1/C(4, 2) = 17% of the time: above the 5% bar."""
    rows = [(0.8, w, s, {17: 0.2, 257: 0.8}[w] + 0.01 * s, 0.5 if w == 17 else 1.0)
            for w, s in itertools.product((17, 65, 257), (0, 1)) if w != 65]
    m_lab(tmp_path, "quick", [(a, 65 if w == 17 else w, s, t, 1.0) for a, w, s, t, _ in rows])
    m1 = read(M, tmp_path)["M1"][1].scales["quick"]
    assert m1.status == NOT_READ
    assert "too few seeds to call: 2 a width leave disjoint ranges by chance 17%" in m1.sentence
    assert "3 would hold it to 5%" in m1.sentence


def test_m2_says_how_to_get_the_ff_table_and_m1_needs_noise(tmp_path):
    m_lab(tmp_path, "quick", [(0.0, 17, 0, 0.9, float("nan"))])
    claims = read(M, tmp_path)
    assert claims["M1"][1].scales["quick"].status == NOT_READ
    m2 = claims["M2"][1].scales["quick"]
    assert m2.status == NOT_READ and "rulelab analyze ff --lab" in m2.sentence



def test_no_lab_of_the_study_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    code, _, err = cli(monkeypatch, capsys, "scale-map", "coexistence", "--labs", tmp_path)
    assert code == 2 and "--labs: no lab of coexistence under" in " ".join(err.split())
    assert err.count("error:") == 1 and not list(tmp_path.glob("*.html"))
