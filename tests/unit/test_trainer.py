"""The ensemble trainer: a member equals the same run trained alone; failures stay local."""

import math

import pytest
import torch

from equivalence import assert_member_equals_alone
from rulelab.config import MPSPRunConfig
from rulelab.train.ensemble import EnsembleTrainer, TrainOptions
from rulelab.train.summary import MemberSummary

TINY = dict(seq_len=5, vocab=12, n_train=256, n_eval=64, d_model=16, d_mlp=32, heads=2,
            layers=2, eval_every=10)
OPTS = TrainOptions(micro_batch=96)  # several micro-batches per full-batch step


def _cfg(**kw):
    return MPSPRunConfig(**{**TINY, **kw})


def test_member_equals_the_same_config_trained_alone():
    members = [_cfg(ratio=r, weight_decay=w, seed=s, epochs=60, lr=3e-3)
               for r, w, s in [(0.5, 0.1, 0), (0.9, 0.3, 1), (1 / 3, 0.2, 2), (1.0, 0.0, 3)]]
    ens = EnsembleTrainer(members, OPTS)
    ens.fit()
    for e in (1, 2, 3):
        alone = EnsembleTrainer([members[e]], OPTS)
        alone.fit()
        assert_member_equals_alone(ens, e, alone)
    # training moved the weights and members differ from one another
    assert not torch.equal(ens.model.W_E[1], ens.model.W_E[2])
    assert ens.rows[0][-1][0] == 60
    # r = 1 has no anti examples: its anti metrics are NaN, not a fake number
    anti = [v for (ep, s, m, v) in ens.rows[3] if s == "train_anti"]
    assert all(math.isnan(v) for v in anti)


def test_minibatch_member_equals_alone_and_shuffles_per_member():
    members = [_cfg(ratio=r, seed=s, epochs=6, batch_size=64) for r, s in [(0.7, 0), (0.9, 1)]]
    ens = EnsembleTrainer(members, OPTS)
    ens.fit()
    alone = EnsembleTrainer([members[1]], OPTS)
    alone.fit()
    assert_member_equals_alone(ens, 1, alone)
    assert ens.opt.step_count == 6 * 4  # 256 / 64 steps per epoch


def test_same_config_and_seed_give_the_same_numbers():
    a = EnsembleTrainer([_cfg(epochs=20, seed=4)], OPTS)
    b = EnsembleTrainer([_cfg(epochs=20, seed=4)], OPTS)
    a.fit()
    b.fit()
    assert a.rows == b.rows
    c = EnsembleTrainer([_cfg(epochs=20, seed=5)], OPTS)
    c.fit()
    assert a.rows != c.rows


def test_a_diverging_member_fails_alone():
    good = _cfg(seed=1, epochs=12)
    members = [_cfg(seed=0, epochs=12, lr=1.0), good]
    ens = EnsembleTrainer(members, OPTS)
    with torch.no_grad():  # make member 0 blow up: NaN in its weights
        ens.model.W_U[0].fill_(float("nan"))
    ens.fit()
    assert ens.summaries[0].failed_reason is not None
    assert "non-finite" in ens.summaries[0].failed_reason
    assert ens.summaries[1].failed_reason is None
    alone = EnsembleTrainer([good], OPTS)
    alone.fit()
    assert_member_equals_alone(ens, 1, alone)


def test_summary_records_generalization_and_transients():
    s = MemberSummary(transient_threshold=0.95)
    for epoch, adv in [(0, 0.2), (10, 0.99), (20, 1.0), (30, 0.97), (40, 0.9), (50, 1.0)]:
        s.update(epoch, {("adv", "acc"): adv, ("val", "acc"): 1.0, ("train", "loss"): 0.1})
    assert s.generalized and s.first_epoch_100 == 20 and s.transient
    assert s.max_adv_acc == 1.0 and s.final_adv_acc == 1.0 and s.final_epoch == 50
    t = MemberSummary()
    for epoch, adv in [(0, 0.5), (10, 0.999)]:
        t.update(epoch, {("adv", "acc"): adv, ("val", "acc"): 1.0, ("train", "loss"): 0.1})
    assert not t.generalized and t.first_epoch_100 is None and not t.transient


def test_members_must_share_shapes():
    with pytest.raises(ValueError, match="shape"):
        EnsembleTrainer([_cfg(layers=1), _cfg(layers=2)], OPTS)
