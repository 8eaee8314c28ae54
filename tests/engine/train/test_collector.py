"""Python's collector kept off the setup's objects for the length of a fit (issue 25): frozen
while a trainer trains, handed back afterwards — after an error too — so nothing that becomes
garbage later is kept."""

import gc

import pytest

from rulelab.engine.collector import setup_frozen
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer


def test_objects_are_frozen_within_and_handed_back_after_even_on_error():
    assert gc.get_freeze_count() == 0
    with setup_frozen():
        assert gc.get_freeze_count() > 1000  # the process's modules, at least
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), setup_frozen():
        raise RuntimeError("a failed epoch")
    assert gc.get_freeze_count() == 0


def test_a_fit_trains_with_the_setup_frozen_and_hands_it_back():
    cfg = MPSPRunConfig(seq_len=5, vocab=12, n_train=32, n_eval=16, d_model=8, d_mlp=16,
                        heads=2, layers=1, epochs=2, eval_every=1, seed=0)
    seen = []
    MPSPTrainer([cfg], Settings()).fit(lambda trainer, evaluated: seen.append(
        gc.get_freeze_count()))
    assert len(seen) == 3 and min(seen) > 1000  # epoch 0's evaluation and 2 epochs
    assert gc.get_freeze_count() == 0
