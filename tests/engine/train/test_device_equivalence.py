"""Member ≡ solo on the test device (``RULELAB_TEST_DEVICE``, default cpu; DESIGN §1).

The CPU tests of each trainer pin this on the CPU; this file trains the same kind of check on
whatever device the environment names, so ``bench/gpu_check.sh`` can run it on a lent GPU
(``RULELAB_TEST_DEVICE=cuda``): a member of a 3-member ensemble (different r / noise, weight
decay and learning rate) must end with the weights and every metric row of the same run
trained alone, and a member that goes NaN must fail alone there too.
"""

import torch

from equivalence import assert_member_equals_alone, skip_unless_device
from rulelab.settings import Settings
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.train.runner import trainer_class

S_TINY = dict(seq_len=5, vocab=12, n_train=256, n_eval=64, d_model=16, d_mlp=32, heads=2,
              layers=2, eval_every=10, epochs=30, lr=3e-3)
M_TINY = dict(p=11, width=16, epochs=30, eval_every=10, log_eval_steps=5, lr=3e-3)


def _check(members, micro_batch: int) -> None:
    opts = Settings(device=skip_unless_device(), micro_batch=micro_batch)
    cls = trainer_class(members[0].task)
    ens = cls(members, opts)
    ens.fit()
    for e in range(len(members)):
        alone = cls([members[e]], opts)
        alone.fit()
        assert_member_equals_alone(ens, e, alone)


def test_study_s_member_equals_alone_on_device():
    _check([MPSPRunConfig(**{**S_TINY, "ratio": r, "weight_decay": w, "seed": s})
            for r, w, s in [(0.5, 0.1, 0), (0.9, 0.3, 1), (1.0, 0.0, 2)]], micro_batch=96)


def test_study_m_member_equals_alone_on_device():
    _check([ModularRunConfig(**{**M_TINY, "noise": a, "weight_decay": w, "seed": s})
            for a, w, s in [(0.0, 0.1, 0), (0.5, 0.3, 1), (0.8, 0.0, 2)]], micro_batch=24)


def test_a_nan_member_fails_alone_on_device():
    good = MPSPRunConfig(**{**S_TINY, "seed": 1, "epochs": 12})
    members = [MPSPRunConfig(**{**S_TINY, "seed": 0, "epochs": 12}), good]
    opts = Settings(device=skip_unless_device(), micro_batch=96)
    ens = trainer_class("mpsp")(members, opts)
    with torch.no_grad():
        ens.model.W_U[0].fill_(float("nan"))
    ens.fit()
    assert "non-finite" in ens.summaries[0].failed_reason
    assert ens.summaries[1].failed_reason is None
    alone = trainer_class("mpsp")([good], opts)
    alone.fit()
    assert_member_equals_alone(ens, 1, alone)
