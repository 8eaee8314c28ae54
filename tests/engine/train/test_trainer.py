"""The ensemble trainer (:mod:`rulelab.engine.base`) on the toy study: a member equals the same
run trained alone, full batch and minibatch, whatever its neighbours' member fields; a run is
deterministic; a diverging member fails alone; members must share shapes. Study S's trainer
has the same checks in tests/studies/shortcut_saturation/test_mpsp_trainer.py."""

import math

import pytest
import torch

from equivalence import assert_member_equals_alone
from rulelab.settings import Settings
from toy_study import ToyRunConfig
from toy_study.trainer import ToyTrainer

OPTS = Settings(micro_batch=24)  # several micro-batches per full-batch step (64 examples)


def _cfg(**kw) -> ToyRunConfig:
    return ToyRunConfig(**{"n_train": 64, "n_eval": 32, "width": 16, **kw})


def test_member_equals_the_same_config_trained_alone():
    members = [_cfg(noise=n, weight_decay=w, lr=lr, seed=s, data_seed=s % 2, epochs=60)
               for n, w, lr, s in [(0.0, 0.1, 2e-2, 0), (0.2, 0.3, 1e-2, 1), (0.1, 0.2, 5e-3, 2),
                                   (0.5, 0.0, 2e-2, 3)]]
    ens = ToyTrainer(members, OPTS)
    ens.fit()
    for e in (1, 2, 3):
        alone = ToyTrainer([members[e]], OPTS)
        alone.fit()
        assert_member_equals_alone(ens, e, alone)
    # training moved the weights and members differ from one another
    assert not torch.equal(ens.model.W1[1], ens.model.W1[2])
    assert ens.rows[0][-1][0] == 60
    assert len(ens.rows[0]) == (60 // 5 + 1) * 4  # 13 evaluations × train/eval × loss/acc
    # noise 0 learns the sign; half the labels flipped leaves nothing to learn in training
    assert ens.summaries[0].generalized and ens.summaries[0].final_eval_acc >= 0.9
    assert ens.summaries[3].final_train_loss > ens.summaries[0].final_train_loss


def test_minibatch_member_equals_alone_and_shuffles_per_member():
    members = [_cfg(noise=n, seed=s, epochs=6, batch_size=16) for n, s in [(0.1, 0), (0.2, 1)]]
    ens = ToyTrainer(members, OPTS)
    ens.fit()
    alone = ToyTrainer([members[1]], OPTS)
    alone.fit()
    assert_member_equals_alone(ens, 1, alone)
    assert ens.opt.step_count == 6 * 4  # 64 / 16 steps per epoch
    first = [torch.randperm(64, generator=torch.Generator().manual_seed(g.initial_seed()))
             for g in ens.generators]
    assert not torch.equal(first[0], first[1])  # each member draws its own order


def test_same_config_and_seed_give_the_same_numbers():
    a = ToyTrainer([_cfg(epochs=20, seed=4)], OPTS)
    b = ToyTrainer([_cfg(epochs=20, seed=4)], OPTS)
    a.fit()
    b.fit()
    assert a.rows == b.rows
    c = ToyTrainer([_cfg(epochs=20, seed=5)], OPTS)
    c.fit()
    assert a.rows != c.rows


def test_a_diverging_member_fails_alone():
    good = _cfg(seed=1, epochs=12)
    members = [_cfg(seed=0, epochs=12, lr=1.0), good]
    ens = ToyTrainer(members, OPTS)
    with torch.no_grad():  # make member 0 blow up: NaN in its weights
        ens.model.W2[0].fill_(float("nan"))
    ens.fit()
    assert ens.summaries[0].failed_reason is not None
    assert "non-finite" in ens.summaries[0].failed_reason
    assert ens.summaries[1].failed_reason is None
    assert ens.rows[0] and all(ep == 0 for ep, *_ in ens.rows[0])  # no rows after it failed
    assert all(math.isnan(v) for ep, s, m, v in ens.rows[0] if m == "loss")
    alone = ToyTrainer([good], OPTS)
    alone.fit()
    assert_member_equals_alone(ens, 1, alone)


def test_members_must_share_shapes():
    with pytest.raises(ValueError, match="shape"):
        ToyTrainer([_cfg(width=8), _cfg(width=16)], OPTS)
