"""Member ≡ solo on the test device (``RULELAB_TEST_DEVICE``, default cpu; DESIGN §1).

The CPU tests of the trainer pin this on the CPU; this file trains the same kind of check on
whatever device the environment names, so ``bench/gpu_check.sh`` can run it on a lent GPU
(``RULELAB_TEST_DEVICE=cuda``): a member of a 3-member ensemble (different noise, weight
decay and learning rate) must end with the weights and every metric row of the same run
trained alone, and a member that goes NaN must fail alone there too. On the toy study; the
studies' own models: tests/studies/*/test_*_device_equivalence.py.
"""

import pytest
import torch

from equivalence import assert_member_equals_alone, check_on_device, skip_unless_device
from rulelab.settings import Settings
from toy_study import ToyRunConfig
from toy_study.trainer import ToyTrainer

TINY = dict(n_train=256, n_eval=64, width=32, eval_every=10, epochs=30, lr=3e-3)


@pytest.mark.usefixtures("toy")
def test_member_equals_alone_on_device():
    check_on_device([ToyRunConfig(**{**TINY, "noise": n, "weight_decay": w, "lr": lr, "seed": s})
                     for n, w, lr, s in [(0.0, 0.1, 3e-3, 0), (0.2, 0.3, 1e-2, 1),
                                         (0.4, 0.0, 2e-2, 2)]], micro_batch=96)


def test_a_nan_member_fails_alone_on_device():
    good = ToyRunConfig(**{**TINY, "seed": 1, "epochs": 12})
    members = [ToyRunConfig(**{**TINY, "seed": 0, "epochs": 12}), good]
    opts = Settings(device=skip_unless_device(), micro_batch=96)
    ens = ToyTrainer(members, opts)
    with torch.no_grad():
        ens.model.W2[0].fill_(float("nan"))
    ens.fit()
    assert "non-finite" in ens.summaries[0].failed_reason
    assert ens.summaries[1].failed_reason is None
    alone = ToyTrainer([good], opts)
    alone.fit()
    assert_member_equals_alone(ens, 1, alone)
