"""Digits / MNIST learning order (SPEC M.4.7): data, IDX reading, noise, the 3-layer MLP
ensemble (a member equals the same run trained alone) and ``rulelab train digits``."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from cli_inproc import run_main
from rulelab.config import ConfigError, make_config
from rulelab.settings import Settings
from rulelab.store.lab import Lab
from rulelab.studies.coexistence.digits_config import DigitsRunConfig
from rulelab.studies.coexistence.digits_task import (
    corrupt_labels,
    load_mnist,
    make_digits,
    read_idx,
)
from rulelab.studies.coexistence.digits_trainer import DigitsTrainer


def _idx(path, array, gz=False):
    kind = 0x08  # unsigned byte
    header = bytes([0, 0, kind, array.ndim]) + np.array(array.shape, dtype=">u4").tobytes()
    raw = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(raw) if gz else raw)


@pytest.fixture
def mnist_dir(tmp_path):
    """A fake MNIST folder: 40 train and 12 test 28×28 images, some files gzipped."""
    rng = np.random.default_rng(0)
    _idx(tmp_path / "train-images-idx3-ubyte.gz", rng.integers(0, 256, (40, 28, 28)), gz=True)
    _idx(tmp_path / "train-labels-idx1-ubyte", np.arange(40) % 10)
    _idx(tmp_path / "t10k-images-idx3-ubyte", rng.integers(0, 256, (12, 28, 28)))
    _idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.arange(12) % 10, gz=True)
    return tmp_path


def test_idx_files_are_read_plain_or_gzipped(mnist_dir):
    assert read_idx(mnist_dir / "train-labels-idx1-ubyte").tolist() == [i % 10 for i in range(40)]
    x_train, y_train, x_test, y_test = load_mnist(mnist_dir)
    assert x_train.shape == (40, 784) and x_test.shape == (12, 784)
    assert x_train.dtype == np.float32 and x_train.min() >= 0.0 and x_train.max() <= 1.0
    assert y_test.tolist() == [i % 10 for i in range(12)]
    (mnist_dir / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError, match="t10k-labels"):
        load_mnist(mnist_dir)


def test_label_noise_is_exact_wrong_and_nested():
    y = np.arange(200) % 10
    small, noisy_small = corrupt_labels(y, 0.05, "wrong", data_seed=3)
    big, noisy_big = corrupt_labels(y, 0.2, "wrong", data_seed=3)
    assert noisy_small.sum() == 10 and noisy_big.sum() == 40
    assert (big[noisy_big] != y[noisy_big]).all() and (big[~noisy_big] == y[~noisy_big]).all()
    assert (noisy_small <= noisy_big).all()  # nested in α, same wrong labels
    assert (small[noisy_small] == big[noisy_small]).all()


def test_mnist_source_with_n_train(mnist_dir):
    d = make_digits(source="mnist", mnist_dir=str(mnist_dir), n_train=30, noise=0.2)
    assert d.x_train.shape == (30, 784) and d.noisy.sum() == 6 and len(d.y_test) == 12
    with pytest.raises(ValueError, match="n_train"):
        make_digits(source="mnist", mnist_dir=str(mnist_dir), n_train=41)


def test_sklearn_digits_split_and_noise():
    pytest.importorskip("sklearn")
    d = make_digits(noise=0.2, data_seed=1)
    assert d.x_train.shape == (1438, 64) and d.x_test.shape == (359, 64)
    assert d.noisy.sum() == round(0.2 * 1438) and (d.y_train[d.noisy] != d.y_train_true[
        d.noisy]).all()
    again = make_digits(noise=0.2, data_seed=1)
    np.testing.assert_array_equal(d.x_test, again.x_test)
    assert not np.array_equal(make_digits(data_seed=2).y_test, d.y_test)


def test_config_checks_the_source():
    with pytest.raises(ConfigError, match="--mnist-dir"):
        make_config(DigitsRunConfig, source="mnist")
    with pytest.raises(ConfigError, match="--noise"):
        make_config(DigitsRunConfig, noise=1.5)


def test_member_equals_the_same_run_trained_alone(mnist_dir):
    base = dict(source="mnist", mnist_dir=str(mnist_dir), hidden=16, epochs=6, eval_every=2)
    members = [DigitsRunConfig(**base, noise=a, seed=s, lr=lr)
               for a, s, lr in ((0.05, 0, 1e-3), (0.2, 1, 3e-3))]
    opts = Settings(micro_batch=16)
    ens = DigitsTrainer(members, opts)
    ens.fit()
    for e, cfg in enumerate(members):
        alone = DigitsTrainer([cfg], opts)
        alone.fit()
        for (n, p), (_, q) in zip(ens.model.named_parameters(), alone.model.named_parameters(),
                                  strict=True):
            torch.testing.assert_close(p[e], q[0], rtol=1e-6, atol=1e-7, msg=n)
    splits = {s for (_, s, _, _) in ens.rows[1]}
    assert splits == {"train", "train_clean", "train_noisy", "train_noisy_true", "test"}
    assert [r[0] for r in ens.rows[0] if r[1:3] == ("test", "acc")] == [0, 2, 4, 6]


def _main(argv, capsys, monkeypatch) -> tuple[int, str, str]:
    p = run_main(argv, capsys, monkeypatch)
    return p.returncode, p.stdout, p.stderr


def test_train_digits_cli_stores_runs_and_order(tmp_path, capsys, monkeypatch):
    pytest.importorskip("sklearn")
    monkeypatch.chdir(tmp_path)
    lab = tmp_path / "lab"
    rc, _, err = _main(["train", "digits", "--noise", "0.05", "0.2", "--epochs", "3",
                        "--hidden", "16", "--lab", lab, "--quiet"], capsys, monkeypatch)
    assert rc == 0, err
    assert "2 runs" in err
    rc, out, err = _main(["analyze", "order", "--lab", lab, "--window", "2"], capsys,
                         monkeypatch)
    assert rc == 0, err
    assert "early lead over the first 2 steps" in out and "old reading" in out
    assert (lab / "analyses" / "order").is_dir()
    table = Lab(lab).read_table("order")  # both α > 0 runs have a lead reading over 2 steps
    assert table["lead_area"].notna().sum() == 2 and set(table["window"]) == {2.0}
    rc, _, err = _main(["train", "digits", "--mnist-dir", tmp_path / "nowhere", "--lab",
                        tmp_path / "x"], capsys, monkeypatch)
    assert rc == 2 and err.startswith("error: --mnist-dir") and len(err.splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_the_study_declares_its_path_flag():
    """``--mnist-dir`` is study M's declaration (``Task.path_fields``), not a generic list: the
    command line refuses it empty, as ``--lab``, and no other task's flag."""
    from rulelab.cli.options import check_path_flags, path_flags
    from rulelab.errors import UserError

    assert path_flags().count("--mnist-dir") == 1 and path_flags()[:2] == ("--lab", "--out")
    for argv in (["train", "digits", "--mnist-dir="], ["train", "digits", "--mnist-dir", ""]):
        with pytest.raises(UserError, match="^--mnist-dir must be a path"):
            check_path_flags(argv)
    check_path_flags(["train", "digits", "--mnist-dir", "data/mnist", "--experiment", ""])
