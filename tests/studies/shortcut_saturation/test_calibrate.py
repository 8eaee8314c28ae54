"""Every verdict against its null (issue 21): the detectors of study S read no effect in
simulated nulls at the presets' own settings, find a real one, and `rulelab calibrate` prints
each false-positive rate against the 5% bar.

The numbers asserted are properties of the detectors: the old phase-2 rule (a trough since
phase 1) calls every slowly drifting run, the new one (a trough over the last tenth of the
run) none; S1's disjoint-interval verdict cannot call the 1L fall at 8 seeds a cell.
"""

from __future__ import annotations

import numpy as np
import pytest

from rulelab.analysis.calibration import MAX_FPR, NullCheck
from rulelab.studies.shortcut_saturation.analyses.phase_null import (
    SINCE_PHASE1,
    onset_check,
    transient_check,
)
from rulelab.studies.shortcut_saturation.analyses.phases import detect_phases
from rulelab.studies.shortcut_saturation.claim_null import (
    half_power,
    s1_check,
    seeds_for_power,
    shows,
)
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.study_registry import study
from rulelab.sweep.recipe import load_recipe

S = study("shortcut-saturation")


def preset(scale: str) -> list:
    return load_recipe(S.recipe_path(scale)).configs()


def test_a_null_check_reads_its_rate_interval_and_bar():
    check = NullCheck("flat", "here", n_null=400, false_positives=20, effect="a dip",
                      n_effect=100, detected=90)
    assert check.fpr == 0.05 and check.within_bar and check.power == 0.9
    lo, hi = check.fpr_interval
    assert lo < 0.05 < hi
    assert check.line().startswith("FPR 5.0% [") and "(≤ 5% ✓); power 90% of 100 at a dip" in \
        check.line()
    assert not NullCheck("flat", "here", n_null=400, false_positives=21).within_bar


def test_a_slow_drift_is_not_a_phase_two_onset_but_a_climb_is():
    t = np.linspace(0, 1, 201)
    val = np.full(201, 0.995)
    drift = 0.005 + 0.10 * t  # 10 points over the whole run, noise-free
    ep = np.arange(201.0)
    assert detect_phases(ep, val, drift)["phase2_onset"] is None
    assert detect_phases(ep, val, drift, SINCE_PHASE1)["phase2_onset"] is not None  # old rule
    climb = 0.005 + 0.2 * np.clip((t - 0.5) / 0.05, 0, 1)
    out = detect_phases(ep, val, climb)
    assert out["phase2_onset"] is not None and 100 <= out["phase2_onset"] <= 110


@pytest.mark.parametrize("scale", ["quick", "medium", "ladder-2k"])
def test_phase_readings_call_at_most_5_percent_of_their_nulls_at_each_preset(scale):
    onset = onset_check(preset(scale), n_sims=200)
    assert onset.fpr <= MAX_FPR and onset.power >= 0.95
    assert "called 100% of them" in onset.note  # the rule before issue 21
    transient = transient_check(preset(scale), n_sims=200)
    assert transient.fpr <= MAX_FPR and transient.power >= 0.95


def test_s1_verdict_false_positive_rate_and_power_at_the_seeds_the_presets_use():
    ladder = s1_check(preset("ladder-2k"), n_sims=1000)
    assert ladder.setting == "8 seeds per headline cell" and ladder.fpr <= MAX_FPR
    assert ladder.power < 0.1  # 8 seeds cannot show the 1L half: 0/8 overlaps 33% of 8
    paper = s1_check(preset("paper-headline"), n_sims=1000)
    assert paper.setting == "30 seeds per headline cell" and paper.fpr <= MAX_FPR
    assert paper.power > 0.85


def test_seeds_the_s1_halves_need_for_80_percent_power():
    from scipy.stats import binom

    # 2L at 8 seeds: 0/8 is [0%, 32%]; 6/8 is [41%, 93%], 5/8 [31%, 86%]: shows at k ≥ 6
    assert half_power("2L", 8) == pytest.approx(binom.sf(5, 8, 0.77), rel=1e-12)  # 0.7276
    assert half_power("1L", 8) < 0.05  # 0/8's interval reaches 32%: 33% of 8 cannot clear it
    assert seeds_for_power("1L") == 26 and seeds_for_power("both") == 26
    assert seeds_for_power("2L") == 9  # 7 seeds give 79.7%, 8 give 72.8% (Wilson's steps)
    assert half_power("both", 30) == pytest.approx(half_power("2L", 30) * half_power("1L", 30))
    # the simulation agrees with the exact sum
    rng = np.random.default_rng(1)
    paper = {(2, 0.5): 0.0, (2, 0.9): 0.77, (1, 0.5): 0.33, (1, 0.9): 0.0}
    assert shows(rng, paper, 8, 20000, "2L") / 20000 == pytest.approx(0.7276, abs=0.015)


def test_the_s1_verdict_needs_both_halves():
    rng = np.random.default_rng(0)
    only_2l = {(2, 0.5): 0.0, (2, 0.9): 1.0, (1, 0.5): 0.3, (1, 0.9): 0.3}
    assert shows(rng, only_2l, 10, 200, "2L") == 200
    assert shows(rng, only_2l, 10, 200) == 0


def test_random_heads_above_the_probe_band_are_rare_and_the_old_line_is_not():
    from rulelab.studies.shortcut_saturation.analyses.probe_null import probe_check

    cfg = MPSPRunConfig(layers=1, heads=2, d_model=16, d_mlp=32, vocab=16, seq_len=6,
                        n_train=256, n_eval=256)
    check = probe_check([cfg], n_sims=128)
    assert check.fpr <= MAX_FPR and check.n_null == 128
    small = probe_check([cfg.model_copy(update={"vocab": 6})], n_sims=64)
    assert small.fpr <= MAX_FPR
    old = float(small.note.split("called ")[1].split("%")[0])  # random heads ≥ 0.75 at V = 6
    assert old > 10  # issue 21: 8–15% of random heads at V = 6–16


def test_the_command_prints_every_detector_with_its_rate(monkeypatch, capsys):
    from rulelab.cli import main

    monkeypatch.setattr("sys.argv", ["rulelab", "calibrate", "coexistence", "--scale", "quick",
                                     "--sims", "100"])
    main()
    out = " ".join(capsys.readouterr().out.split())
    assert "double-descent dip" in out and "7 widths (17…1025) × 2 seeds, 192 test pairs" in out
    assert "noisy-first lead" in out and "M1 verdict" in out
    # M1 at 2 seeds a width: disjoint seed ranges by chance 1/6 of the time (claim_null)
    assert "2 of 3 detectors read here within the bar; 1 above it" in out


def test_a_detector_with_nothing_to_read_is_not_counted_within_the_bar(monkeypatch, capsys):
    from rulelab.cli import main

    # the tiny preset has two widths: no dip to test, so only the lead is counted
    monkeypatch.setattr("sys.argv", ["rulelab", "calibrate", "coexistence", "--scale", "tiny",
                                     "--sims", "50"])
    main()
    out = " ".join(capsys.readouterr().out.split())
    assert "not read: nothing in these runs for this detector" in out
    assert "1 of 2 detectors read here within the bar" in out  # the lead and M1 (1 seed: ✗)


@pytest.mark.parametrize("args, message", [
    (["sparse-parity", "--scale", "nope"],
     "--scale: 'nope' is not allowed; use one of quick, scaling-k"),  # it has a detector now
    (["coexistence", "--scale", "huge"], "--scale: 'huge' is not allowed"),
    (["coexistence", "--lab", "nope"], "nope"),
])
def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path, args, message):
    from rulelab.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["rulelab", "calibrate", *args])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in " ".join(err.split()) and err.count("error:") == 1
