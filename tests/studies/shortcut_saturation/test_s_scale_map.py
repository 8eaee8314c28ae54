"""Study S's claims on the scale map (issue 11), read over synthetic labs, one per scale.

Labs are written through the store API (register + mark_done with a summary), so no training
runs: each test builds the rates it wants and checks that the verdict sentences follow the
data — a claim that shows at medium and not at quick says so, and changing the medium data
changes the sentence. The generic map: tests/report/test_scale_map.py.
"""

from __future__ import annotations

from tests.report.test_scale_map import cli, read

from rulelab.report.scale_map import (
    ABSENT,
    DIRECTION,
    NOT_READ,
    NOT_TESTABLE,
    SHOWS,
    claim_sentence,
    open_scales,
    read_claims,
    write_scale_map,
)
from rulelab.store import Lab
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.study_registry import study

S = study("shortcut-saturation")


# A setting that keeps the paper's invariants (the ladder's first rung: 5.7 parameters per
# example for 2L, lr·wd·steps 1.5, lr·steps 15, full batch, the paper's task), and a toy one
# that breaks all of them (the quick preset's kind).
FAITHFUL = dict(seq_len=10, vocab=64, n_train=2048, n_eval=32, d_model=24, d_mlp=48,
                epochs=15000)
TOY = dict(seq_len=6, vocab=8, n_train=64, n_eval=32, epochs=10)


def s_lab(root, scale: str, cells: dict, setting: dict = FAITHFUL) -> None:
    """A study-S lab at ``root/shortcut-saturation-<scale>``: ``cells`` maps (layers, ratio,
    weight_decay) → list of (generalized, transient) per seed; configs at ``setting``."""
    lab = Lab(root / f"shortcut-saturation-{scale}", create=True)
    for (layers, ratio, wd), seeds in cells.items():
        for seed, (gen, transient) in enumerate(seeds):
            c = MPSPRunConfig(layers=layers, heads=2, ratio=ratio, weight_decay=wd, seed=seed,
                              **setting)
            lab.register([(c.run_id, c.flat())], f"shortcut-saturation-{scale}")
            lab.mark_done(c.run_id, {"generalized": gen, "adv_generalized": gen,
                                     "transient": transient, "max_adv_acc": 1.0 if gen else 0.5})


def headline(r2_05: int, r2_09: int, r1_05: int, r1_09: int, n: int = 8) -> dict:
    """The four headline cells with k of n seeds generalizing (none transient)."""
    def seeds(k):
        return [(i < k, False) for i in range(n)]

    return {(2, 0.5, 0.1): seeds(r2_05), (2, 0.9, 0.1): seeds(r2_09),
            (1, 0.5, 0.1): seeds(r1_05), (1, 0.9, 0.1): seeds(r1_09)}




def test_a_scale_that_breaks_an_invariant_reads_not_testable_with_its_rates(tmp_path):
    """The same rates read 'does not show' at a faithful scale and 'not testable' at a toy one,
    naming each broken invariant against the paper's value (issue 20)."""
    s_lab(tmp_path, "quick", headline(2, 2, 0, 0), setting=TOY)
    s_lab(tmp_path, "ladder-2k", headline(2, 2, 0, 0))
    claim, reading = read(S, tmp_path)["S1"]
    assert reading.scales["ladder-2k"].status == ABSENT
    quick = reading.scales["quick"]
    assert quick.status == NOT_TESTABLE
    assert "2L: r=0.5 25% [7%, 59%] (2/8)" in quick.sentence  # the rates stay in the sentence
    assert "would read 'does not show'" in quick.sentence
    # 2L at d_model 64, d_mlp 128 on n = 6, V = 8: 68,226 parameters / 64 examples
    assert "parameters per training example (2L) 1066.0 (fair 3–6.5, paper 4.4)" in \
        quick.sentence
    assert "AdamW weight-decay time lr·wd·steps 0.001 (fair ≥ 1, paper 1.5)" in quick.sentence
    assert "Adam's optimization time lr·steps 0.01 (fair 7.5–30, paper 15)" in quick.sentence
    assert "task (n, V, k, shortcut) n=6, V=8, k=2, max (paper n=10, V=64, k=2, max)" in \
        quick.sentence
    assert "full-batch" not in quick.sentence  # the one invariant it keeps
    assert "not testable at this scale at quick" in claim_sentence(claim, reading)
    assert "shows at no scale run here" in claim_sentence(claim, reading)


def test_not_testable_everywhere_is_not_read_as_evidence_against_the_claim(tmp_path):
    s_lab(tmp_path, "quick", headline(2, 2, 0, 0), setting=TOY)
    claim, reading = read(S, tmp_path)["S1"]
    assert "not tested: no scale run here keeps what it needs" in claim_sentence(claim, reading)
    assert "shows at no scale" not in claim_sentence(claim, reading)


def test_the_ladder_panel_draws_only_scales_that_keep_the_invariants(tmp_path):
    s_lab(tmp_path, "quick", headline(2, 2, 0, 0), setting=TOY)
    s_lab(tmp_path, "ladder-2k", headline(0, 3, 2, 0))
    s_lab(tmp_path, "ladder-4k", headline(0, 6, 1, 0), setting={**FAITHFUL, "n_train": 4096,
                                                                "d_model": 32, "d_mlp": 64})
    _, reading = read(S, tmp_path)["S1"]
    ladder = reading.figure.axes[-1]
    bars = {c.get_label(): c.lines[0] for c in ladder.containers}
    assert list(bars["2L r=0.9"].get_xdata()) == [2048, 4096]  # quick (toy) is not drawn
    assert list(bars["2L r=0.9"].get_ydata()) == [3 / 8, 6 / 8]
    assert list(bars["1L r=0.5"].get_ydata()) == [2 / 8, 1 / 8]
    stars = {ln.get_label(): ln for ln in ladder.get_lines()}
    assert list(stars["paper 2L r=0.9: 77%"].get_xdata()) == [16384]


def test_s1_appears_at_the_scale_whose_rates_show_it_and_not_where_they_do_not(tmp_path):
    s_lab(tmp_path, "quick", headline(2, 2, 0, 0))  # no interaction
    s_lab(tmp_path, "medium", headline(0, 7, 6, 0))  # paper-like, disjoint intervals
    claim, reading = read(S, tmp_path)["S1"]
    assert list(reading.scales) == ["quick", "medium"]
    assert reading.scales["medium"].status == SHOWS
    assert reading.scales["quick"].status == ABSENT
    assert "2L: r=0.5 0% [0%, 32%] (0/8), r=0.9 88% [53%, 98%] (7/8)" in \
        reading.scales["medium"].sentence
    sentence = claim_sentence(claim, reading)
    assert sentence.startswith("S1 — depth × imbalance")
    assert "appears at the medium scale" in sentence
    assert "does not show at quick" in sentence


def test_s1_changes_when_the_data_change(tmp_path):
    s_lab(tmp_path, "medium", headline(1, 3, 2, 1))  # right direction, overlapping intervals
    claim, reading = read(S, tmp_path)["S1"]
    assert reading.scales["medium"].status == DIRECTION
    assert "shows at no scale run here" in claim_sentence(claim, reading)
    s_lab(tmp_path, "quick", {(2, 0.5, 0.1): [(False, False)] * 4})  # 1L cells missing
    _, reading = read(S, tmp_path)["S1"]
    assert reading.scales["quick"].status == NOT_READ
    assert "not all run" in reading.scales["quick"].sentence


def test_s1_names_cells_whose_runs_started_but_did_not_finish(tmp_path):
    """A GPU slice cut by its time limit: the 1L runs finished, the 2L ones are registered
    (running) — the sentence says they are unfinished, not that they were never run."""
    s_lab(tmp_path, "paper-headline", {(1, 0.5, 0.1): [(False, False)],
                                       (1, 0.9, 0.1): [(False, False)]})
    lab = Lab(tmp_path / "shortcut-saturation-paper-headline")
    for ratio in (0.5, 0.9):
        c = MPSPRunConfig(layers=2, heads=2, ratio=ratio, weight_decay=0.1, seed=0, seq_len=6,
                          vocab=8, n_train=64, n_eval=32, epochs=10)
        lab.register([(c.run_id, c.flat())], "shortcut-saturation-paper-headline")
    _, reading = read(S, tmp_path)["S1"]
    sentence = reading.scales["paper-headline"].sentence
    assert reading.scales["paper-headline"].status == NOT_READ
    assert "2L: r=0.5 not finished (1 started), r=0.9 not finished (1 started)" in sentence
    assert "1L: r=0.5 0% [0%, 79%] (0/1), r=0.9 0% [0%, 79%] (0/1)" in sentence


def test_s5_and_s6_read_below_chance_and_transient_counts(tmp_path):
    cells = headline(0, 7, 6, 0)
    cells[2, 0.1, 0.1] = [(True, False)] * 7 + [(False, False)]  # below chance also helps
    for r in (0.1, 0.5, 0.9):  # wd 0.4: as many find it, but most cannot stay
        cells[2, r, 0.4] = [(True, True)] * 7 + [(False, False)]
    s_lab(tmp_path, "medium", cells)
    s_lab(tmp_path, "quick", headline(0, 7, 6, 0))
    claims = read(S, tmp_path)
    s5, s6 = claims["S5"][1], claims["S6"][1]
    assert s5.scales["medium"].status == SHOWS
    assert "best below chance r=0.1 88%" in s5.scales["medium"].sentence
    assert s5.scales["quick"].status == NOT_READ  # no ratio below chance there
    assert s6.scales["medium"].status == SHOWS
    # Wilson 95% of 21/24: centre 22.92/27.84, half 1.96·√(21·3/24 + 0.96)/27.84
    assert "wd 0.4: transient 88% [69%, 96%] (21/24), ever generalized 21/24" in \
        s6.scales["medium"].sentence
    assert "wd 0.1: transient 0% [0%, 14%] (0/24), ever generalized 14/24" in \
        s6.scales["medium"].sentence
    assert s6.scales["quick"].status == NOT_READ


def test_the_page_and_one_png_per_claim_are_written(tmp_path):
    s_lab(tmp_path, "medium", headline(0, 7, 6, 0))
    scales = open_scales(S, tmp_path)
    out = write_scale_map(tmp_path / "out" / "map.html", S, scales, read_claims(S, scales))
    text = out.read_text()
    assert "appears at the medium scale" in text and text.count("data:image/png") == 3
    # the invariants table: the paper's value, the fair range, this scale's value and a mark
    assert "<td>parameters per training example (2L)</td><td>4.4</td><td>3–6.5</td>" \
        "<td>5.7 ✓</td>" in text
    assert "<td>AdamW weight-decay time lr·wd·steps</td><td>1.5</td><td>≥ 1</td><td>1.5 ✓" in text
    assert sorted(p.name for p in out.parent.glob("*.png")) == ["map-S1.png", "map-S5.png",
                                                               "map-S6.png"]



def test_a_folder_without_labs_gives_no_scales(tmp_path):
    (tmp_path / "shortcut-saturation-quick").mkdir()  # not a lab: no registry
    assert open_scales(S, tmp_path) == {}


def test_the_command_prints_one_sentence_per_claim_and_writes_the_page(tmp_path, monkeypatch,
                                                                       capsys):
    s_lab(tmp_path, "quick", headline(2, 2, 0, 0))
    s_lab(tmp_path, "medium", headline(0, 7, 6, 0))
    out = tmp_path / "map.html"
    code, text, err = cli(monkeypatch, capsys, "scale-map", "shortcut-saturation", "--labs",
                          tmp_path, "--out", out)
    assert code == 0, err
    flat = " ".join(text.split())
    assert "S1 — depth × imbalance" in flat and "appears at the medium scale" in flat
    assert "quick [does not show]" in flat and "medium [shows]" in flat
    assert "medium: parameters per training example (2L) 5.7 ✓; AdamW weight-decay time " \
        "lr·wd·steps 1.5 ✓" in flat
    assert "S5 — distance from chance" in flat and "S6 — weight decay" in flat
    assert out.is_file() and (tmp_path / "map-S1.png").is_file()



def test_a_bad_out_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    s_lab(tmp_path, "quick", headline(0, 0, 0, 0))
    code, _, err = cli(monkeypatch, capsys, "scale-map", "shortcut-saturation", "--out",
                       "x.txt", "--labs", tmp_path)
    assert code == 2 and "--out: 'x.txt' is not allowed; the file must end in .html" in " ".join(
        err.split()) and err.count("error:") == 1
    assert not list(tmp_path.glob("*.html"))


def test_s1_with_too_few_seeds_to_show_it_is_not_read_as_absent(tmp_path):
    """One seed a cell could not have shown the paper's rise: not "does not show" (issue 21)."""
    s_lab(tmp_path, "ladder-2k", headline(0, 0, 0, 0, n=1))
    _, reading = read(S, tmp_path)["S1"]
    r = reading.scales["ladder-2k"]
    assert r.status == NOT_READ
    assert "too few seeds to call: 1 a cell would show the paper's 2L rise with 0% power " \
        "(9 seeds give 80%; the 1L fall needs 26)" in r.sentence
    s_lab(tmp_path, "ladder-4k", headline(0, 0, 0, 0, n=6),
          setting={**FAITHFUL, "n_train": 4096, "d_model": 32, "d_mlp": 64})
    _, reading = read(S, tmp_path)["S1"]
    assert reading.scales["ladder-4k"].status == ABSENT  # 6 seeds: 58% power
