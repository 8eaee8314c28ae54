"""Study M trainer: a member equals the same run trained alone; MSE; schedule; failures."""

import math

import numpy as np
import pytest
import torch

from equivalence import assert_member_equals_alone
from rulelab.settings import Settings
from rulelab.studies.coexistence.config import ModularRunConfig, eval_steps
from rulelab.studies.coexistence.trainer import ModularSummary, ModularTrainer

TINY = dict(p=11, width=16, epochs=60, eval_every=20, log_eval_steps=5)
OPTS = Settings(micro_batch=24)  # 61 train pairs: three micro-batches per step


def _cfg(**kw):
    return ModularRunConfig(**{**TINY, **kw})


# Muon runs Newton–Schulz in float64 by default (ns_dtype): torch's CPU bf16 ``baddbmm`` can
# round one element differently for a batch of E members than for a batch of 1.
@pytest.mark.parametrize("optimizer", ["adamw", "adam", "sgd", "muon"])
def test_member_equals_the_same_config_trained_alone(optimizer):
    lr = 3e-3 if optimizer != "sgd" else 0.1
    members = [_cfg(optimizer=optimizer, noise=a, seed=s, lr=lr * f, weight_decay=w)
               for a, s, f, w in [(0.0, 0, 1.0, 0.1), (0.5, 1, 2.0, 0.3), (0.8, 2, 0.5, 0.0)]]
    ens = ModularTrainer(members, OPTS)
    ens.fit()
    assert ens.epoch == 60
    for e in range(3):
        alone = ModularTrainer([members[e]], OPTS)
        alone.fit()
        assert_member_equals_alone(ens, e, alone)
    assert not torch.equal(ens.model.U[0], ens.model.U[1])
    # α = 0 has no noisy examples: its noisy metrics are NaN, not a fake number
    noisy = [v for (_, s, _, v) in ens.rows[0] if s in ("train_noisy", "train_noisy_true")]
    assert noisy and all(math.isnan(v) for v in noisy)
    splits = {s for (_, s, _, _) in ens.rows[1]}
    assert splits == {"train", "train_clean", "train_noisy", "train_noisy_true", "test"}


def test_mse_loss_matches_a_hand_computation():
    cfg = _cfg(loss="mse", activation="relu", width=3, p=5)
    tr = ModularTrainer([cfg, cfg.model_copy(update={"seed": 1})], OPTS)
    x = tr.data.train_x[:, :7]
    y = tr.data.train_y[:, :7]
    got = tr.loss(x, y, 7.0).detach()  # [E]: the per-member mean over these 7 examples
    for e in range(2):
        U, V, W, mu = (t[e].detach().double().numpy() for t in
                       (tr.model.U, tr.model.V, tr.model.W, tr.model.mu))
        total = 0.0
        for (a, b), label in zip(x[e].tolist(), y[e].tolist(), strict=True):
            h = np.maximum(U[:, a] + V[:, b], 0.0)  # [M]
            f = W @ h + mu  # [P]
            target = np.eye(5)[label]
            total += float(((f - target) ** 2).sum())  # summed over classes
        assert float(got[e]) == pytest.approx(total / 7, rel=1e-5)


def test_log_spaced_schedule():
    cfg = ModularRunConfig(epochs=20000)  # defaults: every step to 100, ×1.1, then every 100
    steps = eval_steps(cfg)
    assert steps[:101] == list(range(101))
    assert steps[101:105] == [110, 121, 133, 146]
    assert 1100 in steps and 1150 not in steps and steps[-1] == 20000
    gaps = np.diff(steps)
    assert (gaps >= 1).all() and (gaps <= 100).all() and (gaps[-50:] == 100).all()
    assert eval_steps(_cfg(epochs=30, eval_every=7, log_eval_steps=0)) == [0, 7, 14, 21, 28, 30]
    tr = ModularTrainer([_cfg(epochs=40)], OPTS)
    tr.fit()
    assert sorted({r[0] for r in tr.rows[0]}) == eval_steps(_cfg(epochs=40))


def test_a_diverging_member_fails_alone():
    good = _cfg(seed=1, noise=0.3)
    ens = ModularTrainer([_cfg(seed=0), good], OPTS)
    with torch.no_grad():
        ens.model.U[0].fill_(float("nan"))
    ens.fit()
    assert "non-finite" in ens.summaries[0].failed_reason
    assert ens.summaries[1].failed_reason is None
    alone = ModularTrainer([good], OPTS)
    alone.fit()
    assert_member_equals_alone(ens, 1, alone)


def test_summary_learning_order_and_round_trip():
    s = ModularSummary()
    series = [(0, 0.1, 0.0, 0.1), (5, 0.4, 0.6, 0.3), (9, 0.95, 0.7, 0.995), (20, 0.97, 0.92, 0.98)]
    for step, clean, noisy, test in series:
        s.update(step, {("test", "acc"): test, ("test", "loss"): 1.0, ("train", "loss"): 0.5,
                        ("train_clean", "acc"): clean, ("train_noisy", "acc"): noisy,
                        ("train_noisy_true", "acc"): 0.0})
    assert (s.first_step_noisy_50, s.first_step_clean_50) == (5, 9)
    assert (s.first_step_clean_90, s.first_step_noisy_90, s.first_step_test_99) == (9, 20, 9)
    assert s.max_test_acc == 0.995 and s.final_test_acc == 0.98 and not s.generalized
    assert ModularSummary.from_dict(s.as_dict(), None) == s


def test_resume_from_a_member_state_equals_an_uninterrupted_run():
    cfg = _cfg(epochs=30, noise=0.3)
    full = ModularTrainer([cfg], OPTS)
    full.fit()
    part = ModularTrainer([cfg], OPTS)

    def stop(tr, evaluated):
        if tr.epoch == 17:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        part.fit(on_epoch=stop)
    resumed = ModularTrainer([cfg], OPTS)
    resumed.load_member_state(0, part.member_state(0))
    resumed.fit()
    assert resumed.rows[0] == full.rows[0] and resumed.summaries[0] == full.summaries[0]
