"""Sparse-parity run config: defaults, relations and one-line errors naming the flag."""

import pytest

from rulelab.config.base import ConfigError, make_config
from rulelab.studies.sparse_parity.config import SparseParityRunConfig as C


def cfg(**kw):
    return make_config(C, **kw)


def test_defaults_follow_the_paper_and_fill_the_chosen_model():
    c = cfg()
    assert (c.n_bits, c.k, c.width, c.batch_size, c.lr, c.loss, c.optimizer, c.samples) == (
        50, 3, 1000, 32, 0.1, "hinge", "sgd", "fresh")
    assert c.layers is None and c.bias is True
    t = cfg(model="transformer")
    assert (t.layers, t.heads, t.d_model, t.d_mlp, t.width, t.bias) == (2, 4, 64, 256, None, None)


@pytest.mark.parametrize("values, message", [
    ({"n_bits": 4, "k": 5}, "--k: 5 is not allowed; it must be ≤ --n-bits (4)"),
    ({"n_bits": True}, "--n-bits: true is not allowed; it must be an integer, not a boolean"),
    ({"lr": False}, "--lr: false is not allowed; it must be a number"),
    ({"samples": "fixed"}, "--n-train: required with --samples fixed"),
    ({"n_train": 100}, "--n-train: 100 is not allowed with --samples fresh"),
    ({"samples": "fixed", "n_train": 10, "batch_size": 32}, "--batch-size: 32 is not allowed"),
    ({"model": "transformer", "width": 64}, "--width: not allowed with --model transformer"),
    ({"d_model": 32}, "--d-model: not allowed with --model mlp"),
    ({"optimizer": "adam", "momentum": 0.9}, "--momentum: not allowed with --optimizer adam"),
    ({"nesterov": True}, "--nesterov: needs --momentum > 0"),
    ({"model": "transformer", "d_model": 30, "heads": 4}, "--heads: 4 is not allowed"),
    ({"optimizer": "muon"}, "--optimizer: 'muon' is not allowed"),
    ({"bias": "yes"}, "--bias: 'yes' is not allowed; use true or false"),
    ({"k": 0}, "--k: 0 is not allowed"),
])
def test_bad_values_are_one_line_naming_the_flag(values, message):
    with pytest.raises(ConfigError) as err:
        cfg(**values)
    text = str(err.value)
    assert message in text and "\n" not in text


def test_run_ids_shapes_and_members():
    a, b = cfg(n_bits=10, seed=0), cfg(n_bits=10, seed=1)
    assert a.run_id != b.run_id and a.shape_key() == b.shape_key()
    assert cfg(n_bits=10, seed=0).run_id == a.run_id  # stable
    assert cfg(n_bits=10, lr=0.05, data_seed=3).shape_key() == a.shape_key()  # member fields
    assert cfg(n_bits=12).shape_key() != a.shape_key()
    assert cfg(n_bits=10, width=1000).run_id == a.run_id  # the filled default is stored


def test_an_epoch_is_a_step_online_and_a_pass_over_a_fixed_set():
    assert cfg().steps_per_epoch == 1
    assert cfg(samples="fixed", n_train=1000, batch_size=32).steps_per_epoch == 32  # ⌈1000/32⌉
    assert cfg(samples="fixed", n_train=64, batch_size=32).steps_per_epoch == 2
