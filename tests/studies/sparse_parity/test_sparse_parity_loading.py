"""Sparse parity's stored runs (MLP and transformer) load for analysis with no trainer and no
optimizer, bitwise as the trainer held them (issue 22)."""

import pytest

from model_loading import assert_loads_like_trainer, assert_loads_without_optimizer, trained_lab
from rulelab.config.base import make_config
from rulelab.studies.sparse_parity.config import SparseParityRunConfig

BASE = dict(n_bits=8, k=3, batch_size=16, epochs=20, eval_every=10, n_eval=128)
MLP = [make_config(SparseParityRunConfig, **BASE, width=16, seed=s, data_seed=s)
       for s in (0, 1)]
TRANSFORMER = [make_config(SparseParityRunConfig, **BASE, model="transformer", layers=1, heads=2,
                           d_model=16, d_mlp=32, seed=s) for s in (0, 1)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return trained_lab(tmp_path_factory.mktemp("parity"), MLP + TRANSFORMER)


@pytest.mark.parametrize("configs", [MLP, TRANSFORMER], ids=["mlp", "transformer"])
def test_loaded_ensemble_equals_the_trainer_path(lab, configs):
    assert_loads_like_trainer(lab, configs, "eval_x")


@pytest.mark.parametrize("configs", [MLP, TRANSFORMER], ids=["mlp", "transformer"])
def test_loading_builds_no_optimizer(lab, configs, monkeypatch):
    assert_loads_without_optimizer(lab, configs, monkeypatch)
