"""Digits / MNIST with label noise, for the learning-order check (SPEC M.4.7).

Sources (nothing is downloaded):

- ``sklearn`` (default): scikit-learn's bundled 8×8 digits (1,797 images, shipped inside the
  package; scikit-learn is a dependency of rulelab). Pixels 0..16 are scaled to [0, 1]. The data
  seed shuffles the images; the last ``round(test_frac·n)`` are the test set.
- ``mnist``: local IDX files in one folder — ``train-images-idx3-ubyte``,
  ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, each
  optionally gzipped (``.gz``). Pixels 0..255 are scaled to [0, 1]; the official test set is kept.

``n_train > 0`` keeps the first ``n_train`` training images. Label noise follows study M's
task (:mod:`rulelab.studies.coexistence.modular_task`): exactly ``⌊α·N + ½⌋`` training labels
are corrupted, the
examples of lowest priority under the data seed's noise stream (so noisy sets are nested in
α), to a uniformly random *wrong* label (``wrong``) or any label (``uniform``). Test labels stay
clean.
"""

from __future__ import annotations

import functools
import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

N_CLASSES = 10
MNIST_FILES = {
    "train_x": "train-images-idx3-ubyte", "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte", "test_y": "t10k-labels-idx1-ubyte",
}


@dataclass(frozen=True)
class DigitsData:
    """Flattened images ``x [N, D]`` float32 in [0, 1], labels int64, ``noisy`` bool."""

    x_train: np.ndarray  # [N, D]
    y_train: np.ndarray  # [N] labels trained on (corrupted where noisy)
    y_train_true: np.ndarray  # [N]
    noisy: np.ndarray  # [N] bool
    x_test: np.ndarray  # [T, D]
    y_test: np.ndarray  # [T]

    @property
    def n_features(self) -> int:
        return self.x_train.shape[1]


def load_sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits: ``x [1797, 64]`` in [0, 1], ``y [1797]`` (no download)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("scikit-learn is not installed; pip install 'scikit-learn>=1.3' "
                          "or pass --mnist-dir") from None
    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)


def read_idx(path: str | Path) -> np.ndarray:
    """One IDX file (optionally ``.gz``) as an unsigned-byte array of its stored shape."""
    path = Path(path)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(np.int64)
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: holds {data.size} values, header says {tuple(dims)}")
    return data.reshape(tuple(dims))


def _find(folder: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx")):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"{folder} has no {stem} (or {stem}.gz)")


def load_mnist(folder: str | Path) -> tuple[np.ndarray, ...]:
    """``x_train [60000, 784], y_train, x_test [10000, 784], y_test`` from local IDX files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    arrays = {k: read_idx(_find(folder, stem)) for k, stem in MNIST_FILES.items()}
    for split in ("train", "test"):
        x, y = arrays[f"{split}_x"], arrays[f"{split}_y"]
        if len(x) != len(y):
            raise ValueError(f"{folder}: {split} has {len(x)} images but {len(y)} labels")
    flat = {k: (v.reshape(len(v), -1) / 255.0).astype(np.float32) if k.endswith("_x")
            else v.astype(np.int64) for k, v in arrays.items()}
    return flat["train_x"], flat["train_y"], flat["test_x"], flat["test_y"]


def corrupt_labels(y: np.ndarray, noise: float, mode: str, data_seed: int,
                   n_classes: int = N_CLASSES) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, noisy mask)``: exactly ``⌊α·N + ½⌋`` labels replaced (module docstring)."""
    if mode not in ("wrong", "uniform"):
        raise ValueError(f"noise_mode must be wrong or uniform, got {mode!r}")
    rng = np.random.default_rng(np.random.SeedSequence([data_seed, 1]))
    n = len(y)
    prio, r = rng.random(n), rng.random(n)
    picked = np.argsort(prio, kind="stable")[: int(np.floor(noise * n + 0.5))]
    noisy = np.zeros(n, dtype=bool)
    noisy[picked] = True
    if mode == "wrong":
        wrong = (y + 1 + np.floor(r * (n_classes - 1)).astype(np.int64)) % n_classes
    else:
        wrong = np.floor(r * n_classes).astype(np.int64)
    return np.where(noisy, wrong, y), noisy


def make_digits(*, source: str = "sklearn", mnist_dir: str | None = None, n_train: int = 0,
                test_frac: float = 0.2, noise: float = 0.0, noise_mode: str = "wrong",
                data_seed: int = 0) -> DigitsData:
    """Train/test images with label noise (module docstring); deterministic."""
    if source == "sklearn":
        x, y = load_sklearn_digits()
        order = np.random.default_rng(np.random.SeedSequence([data_seed, 0])).permutation(len(y))
        n_test = int(round(test_frac * len(y)))
        tr, te = order[: len(y) - n_test], order[len(y) - n_test :]
        x_train, y_train, x_test, y_test = x[tr], y[tr], x[te], y[te]
    elif source == "mnist":
        if not mnist_dir:
            raise ValueError("source mnist needs a folder of IDX files")
        x_train, y_train, x_test, y_test = load_mnist(mnist_dir)
    else:
        raise ValueError(f"source must be sklearn or mnist, got {source!r}")
    if n_train:
        if n_train > len(y_train):
            raise ValueError(f"n_train {n_train} exceeds the {len(y_train)} training images")
        x_train, y_train = x_train[:n_train], y_train[:n_train]
    labels, noisy = corrupt_labels(y_train, noise, noise_mode, data_seed)
    return DigitsData(*(_frozen(a) for a in (x_train, labels, y_train, noisy, x_test, y_test)))


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


_FIELDS = ("source", "mnist_dir", "n_train", "test_frac", "noise", "noise_mode", "data_seed")


@functools.lru_cache(maxsize=16)
def _cached(key: tuple) -> DigitsData:
    return make_digits(**dict(zip(_FIELDS, key, strict=True)))


def digits_from_config(cfg) -> DigitsData:
    """Data for a digits run config (study M's ``DigitsRunConfig``), cached on its data
    fields."""
    return _cached(tuple(getattr(cfg, f) for f in _FIELDS))
