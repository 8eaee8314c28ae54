"""Study S's stored runs load for analysis with no trainer and no optimizer, bitwise as the
trainer held them (issue 22), at the final checkpoint and at a weight snapshot."""

import pytest

from model_loading import assert_loads_like_trainer, assert_loads_without_optimizer, trained_lab
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

TINY = dict(seq_len=5, vocab=12, n_train=96, n_eval=32, d_model=16, d_mlp=16, heads=2,
            layers=2, epochs=10, eval_every=5)
CONFIGS = [MPSPRunConfig(**TINY, ratio=r, seed=s) for r, s in ((0.5, 0), (0.9, 1))]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return trained_lab(tmp_path_factory.mktemp("mpsp"), CONFIGS, snapshots=2)


@pytest.mark.parametrize("epoch", [None, 0])
def test_loaded_ensemble_equals_the_trainer_path(lab, epoch):
    assert_loads_like_trainer(lab, CONFIGS, "adv_x", epoch)


def test_loading_builds_no_optimizer(lab, monkeypatch):
    assert_loads_without_optimizer(lab, CONFIGS, monkeypatch)
