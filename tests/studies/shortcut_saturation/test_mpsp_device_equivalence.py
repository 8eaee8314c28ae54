"""Study S's member ≡ solo on the test device (``RULELAB_TEST_DEVICE``, default cpu; DESIGN §1;
``bench/gpu_check.sh`` runs it with ``cuda`` on a lent GPU): a member of a 3-member ensemble
(different r, weight decay) ends with the weights and metric rows of the same run trained
alone, and a member that goes NaN fails alone there too. The engine's own check, on the toy
study: tests/engine/train/test_device_equivalence.py."""

import torch

from equivalence import assert_member_equals_alone, check_on_device, skip_unless_device
from rulelab.engine.runner import trainer_class
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

S_TINY = dict(seq_len=5, vocab=12, n_train=256, n_eval=64, d_model=16, d_mlp=32, heads=2,
              layers=2, eval_every=10, epochs=30, lr=3e-3)


def test_study_s_member_equals_alone_on_device():
    check_on_device([MPSPRunConfig(**{**S_TINY, "ratio": r, "weight_decay": w, "seed": s})
                     for r, w, s in [(0.5, 0.1, 0), (0.9, 0.3, 1), (1.0, 0.0, 2)]], micro_batch=96)


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
