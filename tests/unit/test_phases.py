"""Phase detection (SPEC S.4.6) on synthetic curves whose phases are known by construction."""

import numpy as np
import pandas as pd
import pytest

from rulelab.analysis.phases import PhaseThresholds, detect_phases, phase_table

EPOCHS = list(range(0, 210, 10))  # 21 evaluations
VAL = [0.5, 0.8, 0.95] + [1.0] * 18  # val ≥ 0.99 from epoch 30 on
# adv: falls after phase 1 (epoch 30), trough 0.1 at 40–80, climbs from 100, 1.0 at 130
CLASSIC = [0.5, 0.4, 0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.12, 0.2, 0.4, 0.7] + [1.0] * 8
TRANSIENT = CLASSIC[:16] + [0.9, 0.97, 1.0, 1.0, 1.0]  # reaches 1.0 at 130, 0.9 at 160
# a one-eval spike at 60 (not sustained), and a held climb at 100–130 while val dips to 0.95
# at 110–130 (not phase 2); the real climb starts at 150
SPIKY = [0.5, 0.4, 0.3, 0.2, 0.1, 0.1, 0.35, 0.1, 0.1, 0.1, 0.3, 0.3, 0.3, 0.3,
         0.1, 0.2, 0.3, 0.5, 0.8, 0.99, 0.995]
SPIKY_VAL = VAL[:11] + [0.95] * 3 + VAL[14:]
DIRECT_ADV = [0.5, 0.6, 0.8, 0.98] + [1.0] * 17  # the rule arrives with val: no phase 1
STUCK = [0.5, 0.4, 0.3] + [0.02] * 18  # the shortcut forever


def _long(curves):
    rows = []
    for run, (val, adv) in curves.items():
        for ep, v, a in zip(EPOCHS, val, adv, strict=True):
            rows += [(run, ep, "val", "acc", v), (run, ep, "adv", "acc", a),
                     (run, ep, "train", "loss", 0.3), (run, ep, "val", "loss", 0.1)]
    return pd.DataFrame(rows, columns=["run_id", "epoch", "split", "metric", "value"])


@pytest.fixture(scope="module")
def table():
    curves = {"classic": (VAL, CLASSIC), "transient": (VAL, TRANSIENT), "spiky": (SPIKY_VAL, SPIKY),
              "direct": (VAL, DIRECT_ADV), "stuck": (VAL, STUCK)}
    frame = _long(curves).sample(frac=1.0, random_state=0)  # order must not matter
    return phase_table(frame).set_index("run_id")


def test_classic_two_phase_run(table):
    row = table.loc["classic"]
    assert row.phase1_epoch == 30 and row.adv_at_phase1 == 0.2
    assert row.phase2_onset == 100  # 0.2 ≥ trough 0.1 + 0.05, and 0.4, 0.7, 1.0 follow
    assert row.climb_start == 80  # the last evaluation at the trough
    assert row.gen_epoch == 130 and row.generalized and not row.transient
    assert row.max_adv_acc == 1.0 and row.n_evals == 21


def test_transient_generalization(table):
    row = table.loc["transient"]
    assert row.gen_epoch == 130 and row.generalized and row.transient
    assert row.phase2_onset == 100 and row.final_adv_acc == 1.0


def test_spikes_and_climbs_with_low_val_are_not_phase_two(table):
    row = table.loc["spiky"]
    assert row.phase1_epoch == 30
    # 60: one-eval spike; 100–130: val < 0.99; 150: 0.2 ≥ 0.1 + 0.05 with 0.3, 0.5, 0.8 after
    assert row.phase2_onset == 150 and row.climb_start == 140
    assert not row.generalized and pd.isna(row.gen_epoch) and row.max_adv_acc == 0.995


def test_runs_without_phases_give_na(table):
    direct, stuck = table.loc["direct"], table.loc["stuck"]
    assert pd.isna(direct.phase1_epoch) and pd.isna(direct.phase2_onset)
    assert direct.gen_epoch == 40
    assert stuck.phase1_epoch == 30 and pd.isna(stuck.phase2_onset)
    assert pd.isna(stuck.climb_start) and not stuck.generalized and not stuck.transient
    assert str(table.phase2_onset.dtype) == "Int64"
    assert table.attrs["thresholds"]["val_high"] == 0.99


def test_thresholds_move_the_answers():
    ep, val, adv = np.array(EPOCHS), np.array(VAL), np.array(CLASSIC)
    assert detect_phases(ep, val, adv, PhaseThresholds(rise=0.25))["phase2_onset"] == 110
    assert detect_phases(ep, val, adv, PhaseThresholds(adv_low=0.15))["phase1_epoch"] == 40
    late = detect_phases(ep, val, adv, PhaseThresholds(generalized=0.65, transient=0.3))
    assert late["gen_epoch"] == 120 and not late["transient"]
    # a climb in the last evaluations is judged on the window that is left
    end = detect_phases(ep, val, np.array(STUCK[:-1] + [0.6]))
    assert end["phase2_onset"] == 200 and end["climb_start"] == 190


def test_nan_evaluations_are_dropped_and_bad_frames_refused():
    frame = _long({"a": (VAL, CLASSIC)})
    frame.loc[(frame.epoch == 100) & (frame.split == "adv"), "value"] = np.nan
    row = phase_table(frame).iloc[0]
    assert row.n_evals == 20 and row.phase2_onset == 110 and row.climb_start == 80
    with pytest.raises(ValueError, match="epoch"):
        phase_table(frame.rename(columns={"epoch": "step"}))
