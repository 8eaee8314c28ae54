"""Engine 13 (the transformer's step as one Triton kernel) compiled and run on the test device
(``RULELAB_TEST_DEVICE=cuda``: ``bench/gpu_check.sh`` on a lent GPU; skipped elsewhere — on the
CPU its numbers are checked by Triton's interpreter, tests/engine/models/test_gpu_tile_step.py):
a member's weights equal its solo run's bitwise (the kernel's sums do not depend on the
ensemble), and it trains what engine 4 trains to float rounding."""

import pytest
import torch

from equivalence import DEVICE, assert_member_equals_alone, member_params, skip_unless_device
from rulelab.engine.runner import trainer_class
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

S_TILE = dict(seq_len=5, vocab=12, n_train=600, n_eval=64, d_model=32, d_mlp=32, heads=2,
              layers=2, eval_every=10, epochs=20, lr=3e-3)


@pytest.fixture
def device():
    if not DEVICE.startswith("cuda"):
        pytest.skip("engine 13 runs on CUDA only")
    pytest.importorskip("triton")
    return skip_unless_device()


def test_engine_13_member_equals_alone_bitwise(device):
    members = [MPSPRunConfig(**{**S_TILE, "ratio": r, "weight_decay": w, "seed": s})
               for r, w, s in [(0.5, 0.1, 0), (0.9, 0.3, 1), (1.0, 0.0, 2)]]
    opts = Settings(device=device, engine="13")
    ens = trainer_class("mpsp")(members, opts)
    assert ens.engine_version == 13
    ens.fit()
    for e, cfg in enumerate(members):
        alone = trainer_class("mpsp")([cfg], opts)
        alone.fit()
        ours, theirs = member_params(ens, e), member_params(alone, 0)
        for name in ours:
            assert torch.equal(ours[name], theirs[name]), name
        assert_member_equals_alone(ens, e, alone)  # the rows: engine 4's forward evaluates


def test_engine_13_trains_what_engine_4_trains(device):
    cfg = MPSPRunConfig(**{**S_TILE, "seed": 3, "epochs": 5})
    four = trainer_class("mpsp")([cfg], Settings(device=device, engine="4"))
    thirteen = trainer_class("mpsp")([cfg], Settings(device=device, engine="13"))
    four.fit()
    thirteen.fit()
    ours, theirs = member_params(thirteen, 0), member_params(four, 0)
    for name in ours:
        if name.endswith("b_K"):  # its exact gradient is 0: Adam scales rounding noise to ±lr
            continue
        torch.testing.assert_close(ours[name], theirs[name], rtol=1e-4, atol=1e-5, msg=name)
