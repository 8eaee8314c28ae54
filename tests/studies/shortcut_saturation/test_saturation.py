"""Saturated-loss gradient readings (issue 11): the flag, what it marks, and how the summary,
the printed table and the figures treat it — beside the identity's † (issue 8)."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.analyses.gradients import gradient_conflict
from rulelab.studies.shortcut_saturation.analyses.saturation import (
    LOSS_SATURATED,
    is_saturated,
    known,
    saturated_rows,
)
from rulelab.studies.shortcut_saturation.analyses.tables import ALL_SATURATED, gradient_summary
from rulelab.studies.shortcut_saturation.commands import print_gradient_summary
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.figures import gradient_dynamics
from rulelab.studies.shortcut_saturation.final_readings import GRADIENTS, final_readings
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

TINY = dict(seq_len=5, vocab=12, n_train=64, n_eval=32, d_model=16, d_mlp=32, heads=2,
            layers=1, eval_every=1000, weight_decay=0.0, lr=1e-2, ratio=0.75, epochs=150)
MARGIN_SCALE = 3.0  # member 1's logits ×3: its fitted training set's loss falls below float32


@pytest.fixture(scope="module")
def readings():
    """Two members: readings at initialisation (healthy), after fitting the training set
    (loss ≈ 1e-4, still resolved), and with member 1's unembedding scaled so every margin is
    3× larger (a saturated loss), in float32 and — the oracle — float64."""
    # engine 10: the margins below were set on the model it trains (what is tested is the
    # analysis, whatever engine trained the model)
    tr = MPSPTrainer([MPSPRunConfig(**TINY, seed=s) for s in range(2)],
                     Settings(micro_batch=128, engine="10"))
    at_init = gradient_conflict(tr.model, tr.data)
    tr.fit()
    trained = tr.evaluate()
    assert trained[("train", "acc")].tolist() == [1.0, 1.0]
    model = copy.deepcopy(tr.model)
    with torch.no_grad():
        model.W_U[1] *= MARGIN_SCALE
        model.b_U[1] *= MARGIN_SCALE
    fp32 = gradient_conflict(model, tr.data)
    fp64 = gradient_conflict(copy.deepcopy(model).double(), tr.data)
    return at_init, fp32, fp64, trained


def _all(frame: pd.DataFrame, member: int) -> pd.Series:
    return frame[(frame.module == "all") & (frame.member == member)].iloc[0]


def test_float32_cross_entropy_loses_the_true_class_term_as_documented():
    """The numbers :mod:`.analysis.saturation` cites: margin 16 → ℓ = 2⁻²³ (true 1.13e-7),
    margin 17 → ℓ = 0 and the true-class gradient term 0, the off-class one kept."""
    y = torch.tensor([0])
    z16 = torch.tensor([[19.0, 3.0]])
    assert F.cross_entropy(z16, y).item() == pytest.approx(2.0**-23, rel=1e-6)
    assert F.cross_entropy(z16.double(), y).item() == pytest.approx(1.1253517e-7, rel=1e-6)
    z17 = torch.tensor([[20.0, 3.0]], requires_grad=True)
    loss = F.cross_entropy(z17, y)
    loss.backward()
    assert loss.item() == 0.0 and z17.grad[0, 0].item() == 0.0
    assert z17.grad[0, 1].item() == pytest.approx(4.1399375e-8, rel=1e-5)


def test_flag_threshold_and_missing_groups():
    lp = np.array([2e-6, 5e-7, 0.0, 0.3, np.nan, np.nan])
    lm = np.array([3e-6, 0.4, 0.2, 0.0, 0.5, 1e-9])
    assert is_saturated(lp, lm).tolist() == [False, True, True, True, False, True]
    assert LOSS_SATURATED == 1e-6


def test_saturated_member_is_flagged_and_its_float32_readings_are_wrong(readings):
    at_init, fp32, fp64, trained = readings
    # every module of a member carries the member's flag and group losses
    assert not at_init["saturated"].any() and fp32["saturated"].tolist() == [False, True] * 5
    init = _all(at_init, 0)
    assert 0.5 < init.loss_plus < 1.2 and 0.5 < init.loss_minus < 1.2  # chance is ln 2 = 0.69
    healthy, saturated = _all(fp32, 0), _all(fp32, 1)
    assert 1e-5 < healthy.loss_plus < 1e-3 and 1e-5 < healthy.loss_minus < 1e-3
    # the group losses are the trainer's own train-consistent / train-anti losses
    assert healthy.loss_plus == pytest.approx(trained[("train_consistent", "loss")][0].item(),
                                              rel=1e-5)
    assert healthy.loss_minus == pytest.approx(trained[("train_anti", "loss")][0].item(), rel=1e-5)
    assert saturated.loss_plus == 0.0 and saturated.loss_minus == 0.0  # rounds to 0 in float32
    assert saturated.example_norm_plus < 1e-9 < healthy.example_norm_plus / 1e3
    # the float64 oracle: where the flag is off float32 agrees, where it is on it does not
    ok, ok64 = healthy, _all(fp64, 0)
    assert abs(ok.cos - ok64.cos) < 1e-4 and ok.amplification == pytest.approx(ok64.amplification,
                                                                             rel=1e-3)
    bad, bad64 = saturated, _all(fp64, 1)
    assert 0 < bad64.loss_plus < LOSS_SATURATED  # the float64 loss is real, and tiny
    assert abs(bad.cos - bad64.cos) > 0.05
    assert abs(bad.amplification / bad64.amplification - 1) > 0.1
    assert abs(bad.example_norm_plus / bad64.example_norm_plus - 1) > 0.2


EPOCHS = (10, 1000)


def _table(saturated: bool | None = True) -> pd.DataFrame:
    """Three seeds at r = 0.9, two epochs. At epoch 1000 seed 2 is saturated (cos 0.9, ε 0.1:
    noise that would otherwise read as identity-dominated) and, in the 2-layer rows, all three
    are. ``saturated`` None: a table stored before the flag."""
    rows = []
    for layers in (1, 2):
        for seed in range(3):
            for e in EPOCHS:
                sat = e == 1000 and (seed == 2 or layers == 2)
                rows.append(dict(run_id=f"L{layers}s{seed}", epoch=e, module="all",
                                 layers=layers, ratio=0.9, seed=seed,
                                 cos=0.9 if sat else -0.5 - 0.1 * seed,
                                 amplification=2.0 if sat else 9.0 + seed, odds=9.0,
                                 eps=0.1 if sat else 0.5, example_norm_plus=1e-7 if sat else 1.0,
                                 example_norm_minus=1e-7 if sat else 5.0, saturated=sat))
    frame = pd.DataFrame(rows)
    return frame if saturated else frame.drop(columns=["saturated"])


def test_summary_leaves_saturated_runs_out_of_medians_and_counts():
    t = gradient_summary(_table()).set_index(["layers", "epoch"])
    one = t.loc[(1, 1000)]  # seed 2 saturated: medians over seeds 0 and 1
    assert one["saturated"] == "1/3" and not one[ALL_SATURATED]
    assert one["cos"] == pytest.approx(-0.55) and one["amplification"] == pytest.approx(9.5)
    assert one["identity_dominated"] == "0/3"  # seed 2's ε = 0.1 is noise, not the identity
    two = t.loc[(2, 1000)]  # every run saturated: the medians are of the noise, flagged
    assert two["saturated"] == "3/3" and two[ALL_SATURATED] and two["cos"] == pytest.approx(0.9)
    assert t.loc[(1, 10), "saturated"] == "0/3" and t.loc[(1, 10), "cos"] == pytest.approx(-0.6)


def test_old_table_without_the_flag_loads_summarises_and_draws(capsys):
    old = _table(saturated=None)
    assert not known(old) and not saturated_rows(old).any()
    t = gradient_summary(old).set_index(["layers", "epoch"])
    assert t["saturated"].eq("?").all() and not t[ALL_SATURATED].any()
    assert t.loc[(1, 1000), "cos"] == pytest.approx(-0.5)  # median of all three, as before
    assert t.loc[(2, 1000), "identity_dominated"] == "3/3"  # ε 0.1 read at face value
    print_gradient_summary(old)
    assert "‡" not in "".join(ln for ln in capsys.readouterr().out.splitlines() if "│" in ln)
    fig = gradient_dynamics(old)
    assert isinstance(fig, Figure)
    assert not [ln for ax in fig.axes for ln in ax.lines if ln.get_marker() == "x"]
    # a lab holding both kinds of table, concatenated as stored (index labels repeat): rows
    # without the flag read as not saturated
    mixed = pd.concat([_table(), old.assign(epoch=old.epoch + 1)])
    assert saturated_rows(mixed).sum() == _table()["saturated"].sum() == 4
    t = gradient_summary(mixed).set_index(["layers", "epoch"])
    assert t.loc[(1, 1000), "cos"] == pytest.approx(-0.55)
    assert t.loc[(1, 1001), "cos"] == pytest.approx(-0.5)
    assert t.loc[(1, 1000), "saturated"] == "1/3" and t.loc[(1, 1001), "saturated"] == "0/3"
    crosses = [ln for ax in gradient_dynamics(mixed).axes for ln in ax.lines
               if ln.get_marker() == "x"]
    assert sum(len(ln.get_xdata()) for ln in crosses) == 4 * 3


def test_printed_summary_marks_all_saturated_rows_with_double_dagger(capsys):
    print_gradient_summary(_table())
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if "│" in ln]
    noise = [ln for ln in rows if "‡" in ln]
    assert len(rows) == 4 and len(noise) == 1
    assert "1000" in noise[0] and "3/3" in noise[0] and "†" not in noise[0]
    assert not [ln for ln in rows if "†" in ln]  # ε 0.1 only in saturated runs: no † anywhere
    assert "‡ saturated loss" in out and f"< {LOSS_SATURATED:g} nats" in out


def test_gradient_dynamics_crosses_saturated_readings_and_drops_them_from_medians():
    frame = _table()
    fig = gradient_dynamics(frame)
    assert len(fig.axes) == 6  # (cos, amplification, ε) × (1L, 2L)
    cos_1l = fig.axes[0]
    crosses = [ln for ax in fig.axes for ln in ax.lines if ln.get_marker() == "x"]
    assert sum(len(ln.get_xdata()) for ln in crosses) == 3 * 4  # 4 saturated readings × 3 rows
    # the 1L median over epochs: the saturated seed 2 is left out at epoch 1000
    median = next(ln for ln in cos_1l.lines if ln.get_linewidth() == 1.9)
    assert list(median.get_ydata()) == pytest.approx([-0.6, -0.55])
    rings = [ln for ax in fig.axes for ln in ax.lines if ln.get_marker() == "o"
             and ln.get_markerfacecolor() == "none"]
    assert sum(len(ln.get_xdata()) for ln in rings) == 0  # ε 0.1 rows are saturated: no †
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("saturated loss") for t in legend)


def test_final_readings_cross_saturated_runs_and_leave_them_out_of_the_bar():
    last = _table()[lambda t: t.epoch == 1000]
    fig = final_readings(last, None, GRADIENTS, module="all")
    cos_1l, cos_2l = fig.axes[0], fig.axes[1]
    crosses = lambda ax: [ln for ln in ax.lines if ln.get_marker() == "x"]  # noqa: E731
    assert [len(ln.get_xdata()) for ln in crosses(cos_1l)] == [1]
    assert [len(ln.get_xdata()) for ln in crosses(cos_2l)] == [3]
    bars = [ln for ln in cos_1l.lines if ln.get_linewidth() == 2.2]
    assert len(bars) == 1 and list(bars[0].get_ydata()) == pytest.approx([-0.55, -0.55])
    assert not [ln for ln in cos_2l.lines if ln.get_linewidth() == 2.2]  # all noise: no bar
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("saturated loss") for t in legend)


def test_printed_summary_splits_weight_decays_so_a_saturated_cell_is_not_mixed_in(capsys):
    """medium + medium-s5s6 in one lab: wd 0.1 saturated, wd 0.4 healthy at the same (L, r).
    One row per decay — a pooled median would average rounding noise into a real reading."""
    low, high = _table(), _table()
    high["weight_decay"], low["weight_decay"] = 0.4, 0.1
    high["saturated"] = False
    high["run_id"] = high["run_id"] + "-wd4"
    print_gradient_summary(pd.concat([low, high], ignore_index=True))
    rows = [ln for ln in capsys.readouterr().out.splitlines() if "│" in ln]
    assert len(rows) == 8  # (layers, wd, epoch) = 2 × 2 × 2
    noise = [ln for ln in rows if "‡" in ln]
    assert len(noise) == 1 and "0.1" in noise[0] and "3/3" in noise[0]
    healthy = [ln for ln in rows if "0.4" in ln]
    assert len(healthy) == 4 and all("0/3" in ln and "‡" not in ln for ln in healthy)
