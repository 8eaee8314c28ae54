"""Study M's stored runs (modular and digits) load for analysis with no trainer and no
optimizer, bitwise as the trainer held them (issue 22)."""

import pytest

from model_loading import assert_loads_like_trainer, assert_loads_without_optimizer, trained_lab
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.studies.coexistence.digits_config import DigitsRunConfig

MODULAR = [ModularRunConfig(p=11, width=16, epochs=20, eval_every=10, noise=a, seed=s)
           for a, s in ((0.0, 0), (0.3, 1))]
DIGITS = [DigitsRunConfig(hidden=16, epochs=3, noise=a, seed=s) for a, s in ((0.05, 0), (0.2, 1))]


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    return {"modular": trained_lab(tmp_path_factory.mktemp("modular"), MODULAR, snapshots=2),
            "digits": trained_lab(tmp_path_factory.mktemp("digits"), DIGITS)}


@pytest.mark.parametrize("name, configs, epoch", [("modular", MODULAR, None),
                                                   ("modular", MODULAR, 0),
                                                   ("digits", DIGITS, None)])
def test_loaded_ensemble_equals_the_trainer_path(labs, name, configs, epoch):
    assert_loads_like_trainer(labs[name], configs, "test_x", epoch)


@pytest.mark.parametrize("name, configs", [("modular", MODULAR), ("digits", DIGITS)])
def test_loading_builds_no_optimizer(labs, name, configs, monkeypatch):
    assert_loads_without_optimizer(labs[name], configs, monkeypatch)
