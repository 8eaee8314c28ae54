"""Phase detection (SPEC S.4.6) on synthetic curves whose phases are known by construction.

Phase 1 is "a shortcut map predicts ≥ 99% of val ∪ adv" (s, or 1 − s for k = 2), read here
from the accuracies of k = 2 runs; generalization is val and adv both 100% at one evaluation.
"""

import numpy as np
import pandas as pd
import pytest

from rulelab.studies.shortcut_saturation.analyses.phases import (
    PhaseThresholds,
    detect_phases,
    phase_table,
)

EPOCHS = list(range(0, 210, 10))  # 21 evaluations
VAL = [0.5, 0.8, 0.95] + [1.0] * 18  # val = 100% from epoch 30 on
# adv: the shortcut fits from epoch 30 (val 1.0, adv 0.01: 99.5% agreement with s), trough
# 0.005 at 40–80, climbs from 100, 1.0 at 130
CLASSIC = [0.5, 0.4, 0.3, 0.01, 0.005, 0.005, 0.005, 0.005, 0.005, 0.02, 0.1, 0.4, 0.7] + [1.0] * 8
TRANSIENT = CLASSIC[:16] + [0.9, 0.97, 1.0, 1.0, 1.0]  # reaches 1.0 at 130, 0.9 at 160
# a one-eval spike at 60 (not sustained), and a held climb at 100–130 while val dips to 0.95
# at 110–130 (not phase 2); the real climb starts at 150
SPIKY = [0.5, 0.4, 0.3, 0.01, 0.005, 0.005, 0.3, 0.005, 0.005, 0.005, 0.3, 0.3, 0.3, 0.3,
         0.005, 0.1, 0.3, 0.5, 0.8, 0.99, 0.995]
SPIKY_VAL = VAL[:11] + [0.95] * 3 + VAL[14:]
DIRECT_ADV = [0.5, 0.6, 0.8, 0.98] + [1.0] * 17  # the rule arrives with val: no phase 1
STUCK = [0.5, 0.4, 0.3] + [0.005] * 18  # the shortcut forever
# k = 2 below chance: the flipped shortcut 1 − s (val 0%, adv 100%) from epoch 30; then val
# climbs from 70 while adv holds (phase 2 on the flipped map); both 100% at 100
FLIP_VAL = [0.5, 0.3, 0.1, 0.0, 0.0, 0.0, 0.0, 0.1, 0.4, 0.8] + [1.0] * 11
FLIP_ADV = [0.5, 0.7, 0.9] + [1.0] * 18
FLIP_STUCK_VAL = [0.5, 0.3, 0.1] + [0.0] * 18


def _long(curves):
    rows = []
    for run, (val, adv) in curves.items():
        for ep, v, a in zip(EPOCHS, val, adv, strict=True):
            rows += [(run, ep, "val", "acc", v), (run, ep, "adv", "acc", a),
                     (run, ep, "train", "loss", 0.3), (run, ep, "val", "loss", 0.1)]
    return pd.DataFrame(rows, columns=["run_id", "epoch", "split", "metric", "value"])


CURVES = {"classic": (VAL, CLASSIC), "transient": (VAL, TRANSIENT), "spiky": (SPIKY_VAL, SPIKY),
          "direct": (VAL, DIRECT_ADV), "stuck": (VAL, STUCK), "flip": (FLIP_VAL, FLIP_ADV),
          "flip_stuck": (FLIP_STUCK_VAL, FLIP_ADV)}
RUNS = pd.DataFrame({"run_id": list(CURVES), "label_mod": 2, "ratio": 0.9})


@pytest.fixture(scope="module")
def table():
    frame = _long(CURVES).sample(frac=1.0, random_state=0)  # order must not matter
    return phase_table(frame, runs=RUNS).set_index("run_id")


def test_classic_two_phase_run(table):
    row = table.loc["classic"]
    assert row.phase1_epoch == 30 and row.adv_at_phase1 == 0.01 and row.phase1_map == "s"
    assert row.phase2_onset == 100  # 0.1 ≥ trough 0.005 + 0.05, and 0.4, 0.7, 1.0 follow
    assert row.climb_start == 80 and not row.phase2_censored  # the last evaluation at the trough
    assert row.gen_epoch == 130 and row.generalized and not row.transient
    assert row.max_adv_acc == 1.0 and row.n_evals == 21


def test_transient_generalization(table):
    row = table.loc["transient"]
    assert row.gen_epoch == 130 and row.generalized and row.transient
    assert row.phase2_onset == 100 and row.final_adv_acc == 1.0


def test_spikes_and_climbs_with_low_val_are_not_phase_two(table):
    row = table.loc["spiky"]
    assert row.phase1_epoch == 30
    # 60: one-eval spike; 100–130: val < 0.99; 150: 0.1 ≥ 0.005 + 0.05 with 0.3, 0.5, 0.8 after
    assert row.phase2_onset == 150 and row.climb_start == 140
    assert not row.generalized and pd.isna(row.gen_epoch) and row.max_adv_acc == 0.995


def test_runs_without_phases_give_na(table):
    direct, stuck = table.loc["direct"], table.loc["stuck"]
    assert pd.isna(direct.phase1_epoch) and pd.isna(direct.phase2_onset)
    assert direct.gen_epoch == 40  # epoch 30 has adv 0.98: not yet both at 100%
    assert stuck.phase1_epoch == 30 and pd.isna(stuck.phase2_onset)
    assert pd.isna(stuck.climb_start) and not stuck.generalized and not stuck.transient
    assert not stuck.phase2_censored
    assert str(table.phase2_onset.dtype) == "Int64"
    assert table.attrs["thresholds"]["shortcut_fit"] == 0.99


def test_flipped_shortcut_is_phase_one_and_not_generalization(table):
    # The old definitions (phase 1 = val ≥ 99% and adv < 50%; generalized = adv 100%) gave
    # no phase 1 here and "generalized at epoch 30".
    stuck = table.loc["flip_stuck"]
    assert stuck.phase1_epoch == 30 and stuck.phase1_map == "1-s"
    assert not stuck.generalized and pd.isna(stuck.gen_epoch)
    assert stuck.adv_generalized and stuck.adv_gen_epoch == 30
    flip = table.loc["flip"]
    assert flip.phase1_map == "1-s" and flip.phase2_onset == 70 and flip.climb_start == 60
    assert flip.gen_epoch == 100 and flip.adv_gen_epoch == 30


def test_without_k_accuracies_alone_cannot_give_phase_one():
    row = phase_table(_long({"classic": (VAL, CLASSIC)})).iloc[0]  # no runs frame: k unknown
    assert pd.isna(row.phase1_epoch) and row.phase1_basis == "undefined: k unknown without " \
        "shortcut_acc"
    assert row.gen_epoch == 130


def test_thresholds_move_the_answers():
    ep, val, adv = np.array(EPOCHS), np.array(VAL), np.array(CLASSIC)
    assert detect_phases(ep, val, adv, PhaseThresholds(rise=0.25))["phase2_onset"] == 110
    assert detect_phases(ep, val, adv, PhaseThresholds(shortcut_fit=0.997))["phase1_epoch"] == 40
    late = detect_phases(ep, val, adv, PhaseThresholds(generalized=0.65, transient=0.3))
    assert late["gen_epoch"] == 120 and not late["transient"]


def test_onset_with_a_truncated_sustain_window_is_censored():
    # A climb at the last evaluation (200) has no evaluations left to show it is sustained:
    # it is censored, not an onset. (The old code counted it: onset 200, climb start 190.)
    ep, val = np.array(EPOCHS), np.array(VAL)
    end = detect_phases(ep, val, np.array(STUCK[:-1] + [0.6]))
    assert end["phase2_onset"] is None and end["climb_start"] is None
    assert end["phase2_censored"] is True
    # two evaluations before the end: 2 of the 3 sustain evaluations exist — still censored
    near = detect_phases(ep, val, np.array(STUCK[:-3] + [0.3, 0.5, 0.7]))
    assert near["phase2_onset"] is None and near["phase2_censored"]
    # a full window (3 evaluations after the onset) is an onset, not censored
    full = detect_phases(ep, val, np.array(STUCK[:-4] + [0.3, 0.5, 0.7, 0.8]))
    assert full["phase2_onset"] == 170 and not full["phase2_censored"]
    # a truncated candidate whose remaining window already fails is neither
    fails = detect_phases(ep, val, np.array(STUCK[:-2] + [0.3, 0.005]))
    assert fails["phase2_onset"] is None and not fails["phase2_censored"]


def test_nan_evaluations_are_dropped_and_bad_frames_refused():
    frame = _long({"a": (VAL, CLASSIC)})
    frame.loc[(frame.epoch == 100) & (frame.split == "adv"), "value"] = np.nan
    row = phase_table(frame, runs=RUNS.assign(run_id="a")).iloc[0]
    assert row.n_evals == 20 and row.phase2_onset == 110 and row.climb_start == 80
    with pytest.raises(ValueError, match="epoch"):
        phase_table(frame.rename(columns={"epoch": "step"}))
