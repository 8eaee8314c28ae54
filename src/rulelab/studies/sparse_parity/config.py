"""Sparse-parity run config: task, model and training of one run (see the package docstring).

Choices made here, and why:

- ``support = "random"`` (default): the hidden support S is a uniformly random k-subset drawn
  from ``data_seed``, as in Barak et al. (2022), where S is unknown to the learner. Because the
  inputs are uniform and every first-layer weight is drawn i.i.d., the distribution of a run's
  trajectory does not depend on *which* S it is — a random S costs nothing and guards against
  code that privileges the first coordinates (a metric that always reads columns ``0..k-1``
  would pass every test with ``support = "first"``). ``"first"`` (S = {0, …, k−1}) is offered
  for readable hand-made examples.
- An *epoch* is one pass over the training set (the shared vocabulary, :mod:`rulelab.study`):
  with ``samples = fixed`` one pass over the ``n_train`` examples in per-member shuffled
  minibatches of ``batch_size`` (⌈N/B⌉ optimizer steps); with ``samples = fresh`` there is no
  training set — each step trains on a batch it alone ever sees — so an epoch is one step.
  Summaries count optimizer steps (the paper's iterations): ``steps = epoch ·
  steps_per_epoch``.
- ``momentum``/``beta*``/``eps`` are stored explicitly (0 for SGD by default, as the paper's
  plain SGD); Muon is not offered (no matrix structure in a k-parity worth orthogonalizing, and
  not in the paper).
- ``model = transformer`` reuses study S's ensemble transformer with the bits as tokens (0/1) and
  a CLS readout; its shape fields (``layers, heads, d_model, d_mlp``) are only for it, and
  ``width``/``bias`` only for the MLP (a field given for the other model is refused, so two
  run ids never name the same run).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from rulelab.config.base import RunConfig

# Fields that may differ between members of one ensemble (per-member data or [E] tensors).
SPARSE_PARITY_MEMBER_FIELDS = (
    "data_seed", "seed", "lr", "weight_decay", "momentum", "beta1", "beta2", "eps",
    "init_scale",
)
MLP_DEFAULTS = {"width": 1000, "bias": True}  # width: the paper's 1000
TRANSFORMER_DEFAULTS = {"layers": 2, "heads": 4, "d_model": 64, "d_mlp": 256}
MAX_BITS = 256


def epoch_steps(samples: str, n_train: int | None, batch_size: int) -> int:
    """Optimizer steps in one epoch: 1 for fresh samples, ⌈N/B⌉ for a fixed set of N."""
    return 1 if samples == "fresh" else -(-int(n_train) // int(batch_size))


class SparseParityRunConfig(RunConfig):
    """One run: y = ∏_{i∈S} x_i on x ∈ {±1}^n uniform, |S| = k, learned by SGD/Adam."""

    member_fields = SPARSE_PARITY_MEMBER_FIELDS

    task: Literal["sparse_parity"] = "sparse_parity"
    # --- task ---
    n_bits: int = Field(50, ge=1, le=MAX_BITS, description="n: input bits (paper: 50)")
    k: int = Field(3, ge=1, le=MAX_BITS, description="|S|: bits in the parity (paper: 3)")
    support: Literal["random", "first"] = Field(
        "random", description="S drawn from data_seed, or the first k coordinates")
    samples: Literal["fresh", "fixed"] = Field(
        "fresh", description="fresh examples every step (online) or a fixed training set")
    n_train: int | None = Field(None, ge=1, le=10_000_000, description="fixed only: N")
    n_eval: int = Field(4096, ge=16, le=1_000_000, description="fixed evaluation set size")
    data_seed: int = Field(0, ge=0, lt=2**31, description="S, the fixed train and eval sets")
    # --- model ---
    model: Literal["mlp", "transformer"] = Field("mlp", description="network")
    width: int | None = Field(None, ge=1, le=1_000_000, description="mlp: hidden ReLU units")
    bias: bool | None = Field(None, description="mlp: first- and second-layer biases")
    layers: int | None = Field(None, ge=1, le=12, description="transformer only")
    heads: int | None = Field(None, ge=1, le=16, description="transformer only")
    d_model: int | None = Field(None, ge=4, le=4096, description="transformer only")
    d_mlp: int | None = Field(None, ge=0, le=16384, description="transformer only")
    init_scale: float = Field(1.0, gt=0.0, le=100.0,
                              description="multiplies the default init (mlp: U(±1/√fan_in))")
    # --- training ---
    loss: Literal["hinge", "logistic"] = Field(
        "hinge", description="max(0, 1 − y f) (paper) or log(1 + e^{−y f})")
    optimizer: Literal["sgd", "adam", "adamw"] = Field("sgd", description="optimizer")
    lr: float = Field(0.1, gt=0.0, le=100.0, description="paper: 0.1 (SGD)")
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="sgd only")
    nesterov: bool = Field(False, description="sgd only")
    weight_decay: float = Field(0.01, ge=0.0, le=100.0,
                                description="L2 (sgd, adam) or decoupled (adamw)")
    beta1: float = Field(0.9, ge=0.0, lt=1.0, description="Adam β₁ (gradient average)")
    beta2: float = Field(0.999, ge=0.0, lt=1.0, description="Adam β₂ (squared-gradient average)")
    eps: float = Field(1e-8, gt=0.0, le=1.0, description="Adam ε (denominator floor)")
    batch_size: int = Field(32, ge=1, le=1_000_000, description="examples per step (paper 32)")
    seed: int = Field(0, ge=0, lt=2**31, description="init and the batch stream")
    epochs: int = Field(100_000, ge=1, le=100_000_000,
                        description="fresh: optimizer steps; fixed: passes over n_train")
    eval_every: int = Field(100, ge=1, le=100_000_000, description="epochs between evaluations")

    @model_validator(mode="before")
    @classmethod
    def _model_defaults(cls, data):
        """Fill the chosen model's shape fields; refuse the other model's."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        model = data.get("model", "mlp")
        if model not in ("mlp", "transformer"):
            return data  # the Literal check reports it
        mine, other = ((MLP_DEFAULTS, TRANSFORMER_DEFAULTS) if model == "mlp"
                       else (TRANSFORMER_DEFAULTS, MLP_DEFAULTS))
        for name in other:
            if data.get(name) is not None:
                raise ValueError(f"--{name.replace('_', '-')}: not allowed with --model {model}; "
                                 f"it is for --model {'transformer' if model == 'mlp' else 'mlp'}")
        for name, default in mine.items():
            if data.get(name) is None:
                data[name] = default
        return data

    @model_validator(mode="after")
    def _check_relations(self) -> SparseParityRunConfig:
        if self.k > self.n_bits:
            raise ValueError(f"--k: {self.k} is not allowed; it must be ≤ --n-bits "
                             f"({self.n_bits})")
        if self.samples == "fixed" and self.n_train is None:
            raise ValueError("--n-train: required with --samples fixed (the training set size)")
        if self.samples == "fixed" and self.batch_size > self.n_train:
            raise ValueError(f"--batch-size: {self.batch_size} is not allowed; it must be ≤ "
                             f"--n-train ({self.n_train})")
        if self.samples == "fresh" and self.n_train is not None:
            raise ValueError(f"--n-train: {self.n_train} is not allowed with --samples fresh; "
                             "fresh samples have no training set")
        if self.optimizer != "sgd" and (self.momentum or self.nesterov):
            raise ValueError(f"--momentum: not allowed with --optimizer {self.optimizer}; "
                             "it is for sgd (adam uses --beta1)")
        if self.nesterov and not self.momentum:
            raise ValueError("--nesterov: needs --momentum > 0")
        if self.model == "transformer" and self.d_model % self.heads:
            raise ValueError(f"--heads: {self.heads} is not allowed; --d-model ({self.d_model}) "
                             "must be divisible by --heads")
        return self

    # --- derived quantities ---------------------------------------------------------------
    @property
    def steps_per_epoch(self) -> int:
        return epoch_steps(self.samples, self.n_train, self.batch_size)

    @property
    def n_subsets(self) -> int:
        """C(n, k): how many k-parities the support could be."""
        return math.comb(self.n_bits, self.k)

    def label(self) -> str:
        """Short name of the ensemble's shape, for progress bars."""
        shape = (f"w={self.width}" if self.model == "mlp"
                 else f"{self.layers}L·{self.heads}H d={self.d_model}")
        return f"n={self.n_bits} k={self.k} {shape} {self.optimizer}"
