"""Study M run config: modular arithmetic with label noise (SPEC M.1) × two-layer MLP (M.2) ×
full-batch training (M.3).

Choices the SPEC leaves open, stated here:

- ``beta2 = 0.98`` (as study S and Power et al.'s grokking setup), ``eps = 1e-8``.
- ``momentum`` defaults by optimizer when not given: 0.9 for ``sgd``, 0.95 for ``muon`` (M.3);
  ``adam``/``adamw`` do not use it and store 0.0. ``nesterov`` defaults to on for ``muon`` (M.3),
  off otherwise. Both are resolved at construction, so the stored config is explicit.
- ``drop_zero`` is only for ``op = mul`` (M.1) and ``mul`` needs a prime ``P`` (a field).
- Evaluation (M.3 "log-spaced early"): see :func:`eval_steps`.
"""

from __future__ import annotations

import functools
from typing import Literal

from pydantic import Field, model_validator

from rulelab.config.base import RunConfig

# Fields that may differ between members of one ensemble.
MODULAR_MEMBER_FIELDS = (
    "data_seed",
    "noise",
    "seed",
    "lr",
    "weight_decay",
    "beta1",
    "beta2",
    "eps",
    "momentum",
)
# Must equal the keys of rulelab.studies.coexistence.mlp.ACTIVATIONS (kept literal: configs
# import no torch).
Activation = Literal["relu", "quadratic", "gelu", "leaky_relu", "reverse_relu", "abs"]
DEFAULT_MOMENTUM = {"sgd": 0.9, "muon": 0.95, "adam": 0.0, "adamw": 0.0}


def is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1))


class ModularRunConfig(RunConfig):
    """One study-M run: ``c = a ∘ b mod P`` with noisy train labels, learned by
    ``f(a, b) = W φ(U e_a + V e_b) + μ`` under full-batch training (SPEC M.1–M.3)."""

    member_fields = MODULAR_MEMBER_FIELDS

    task: Literal["modular"] = "modular"
    # --- task (M.1) ---
    op: Literal["add", "sub", "mul"] = Field("add", description="c = a ∘ b mod P")
    p: int = Field(97, ge=2, le=2048, description="P: the modulus (paper 97 or 113)")
    drop_zero: bool = Field(False, description="mul only: a, b ∈ [1, P)")
    train_frac: float = Field(0.5, gt=0.0, le=1.0, description="f: share of pairs in train")
    noise: float = Field(0.0, ge=0.0, le=1.0, description="α: share of train labels corrupted")
    noise_mode: Literal["wrong", "uniform", "symmetric"] = Field(
        "wrong", description="wrong: a uniformly random wrong label; uniform: any label; "
        "symmetric: (a,b) and (b,a) share their wrong label")
    data_seed: int = Field(0, ge=0, lt=2**31, description="pair order, split and noise")
    # --- model (M.2) ---
    width: int = Field(257, ge=1, le=1_000_000, description="M: hidden neurons (paper 2^j+1)")
    activation: Activation = Field("relu", description="φ: hidden activation")
    tied: bool = Field(False, description="U = V")
    bias: bool = Field(True, description="output bias μ")
    init: Literal["inv_sqrt", "doshi"] = Field(
        "inv_sqrt", description="init std 1/√M or Doshi et al.'s 0.5/(2M)^(1/3)")
    # --- training (M.3) ---
    loss: Literal["ce", "mse"] = Field("ce", description="cross-entropy or MSE on one-hot")
    optimizer: Literal["adamw", "adam", "sgd", "muon"] = Field("adamw", description="optimizer")
    lr: float = Field(1e-3, gt=0.0, le=100.0, description="learning rate")
    weight_decay: float = Field(0.1, ge=0.0, le=100.0, description="decoupled (adamw, muon) "
                                "or L2 (adam, sgd)")
    beta1: float = Field(0.9, ge=0.0, lt=1.0, description="Adam β₁ (gradient average)")
    beta2: float = Field(0.98, ge=0.0, lt=1.0, description="Adam β₂ (squared-gradient average)")
    eps: float = Field(1e-8, gt=0.0, le=1.0, description="Adam ε (denominator floor)")
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="sgd 0.9, muon 0.95 by default")
    nesterov: bool = Field(False, description="on by default for muon")
    ns_steps: int = Field(5, ge=1, le=20, description="Newton–Schulz steps (muon)")
    # float64 by default: torch's bf16 CPU matmuls round differently with the batch size, which
    # would break "a member equals the same run trained alone"; bfloat16 matches torch.optim.Muon.
    ns_dtype: Literal["float64", "float32", "bfloat16"] = Field(
        "float64", description="dtype of the Newton–Schulz iteration (muon)")
    seed: int = Field(0, ge=0, lt=2**31, description="model seed (init)")
    epochs: int = Field(20000, ge=1, le=10_000_000,
                        description="epochs; full batch: one epoch = one step")
    eval_every: int = Field(100, ge=1, le=10_000_000,
                            description="steps between evaluations after the dense start")
    log_eval_steps: int = Field(100, ge=0, le=10_000_000,
                                description="evaluate every step up to here, then log-spaced "
                                "until the spacing reaches --eval-every")

    @model_validator(mode="before")
    @classmethod
    def _optimizer_defaults(cls, data):
        """Fill ``momentum`` and ``nesterov`` from the optimizer when not given (or None)."""
        if isinstance(data, dict):
            data = dict(data)
            opt = data.get("optimizer", "adamw")
            if data.get("momentum") is None:
                data["momentum"] = DEFAULT_MOMENTUM.get(opt, 0.0)
            if data.get("nesterov") is None:
                data["nesterov"] = opt == "muon"
        return data

    @model_validator(mode="after")
    def _check_relations(self) -> ModularRunConfig:
        if self.op == "mul" and not is_prime(self.p):
            raise ValueError(f"--p: {self.p} is not allowed; op mul needs a prime P "
                             "(ℤ_P* is a group only then), e.g. 97 or 113")
        if self.drop_zero and self.op != "mul":
            raise ValueError(f"--drop-zero: not allowed with --op {self.op}; it is for mul only")
        return self

    # --- derived quantities ---------------------------------------------------------------
    @property
    def n_pairs(self) -> int:
        k = self.p - 1 if self.drop_zero else self.p
        return k * k

    def label(self) -> str:
        """Short name of the ensemble's shape, for progress bars."""
        return f"M={self.width} {self.activation} {self.optimizer}"


def eval_steps(cfg) -> list[int]:
    """Sorted steps at which a run is evaluated (SPEC M.3: log-spaced early, then regular).

    Step 0, every step ``1..log_eval_steps``, then ``s → max(s + 1, ⌊1.1 s + ½⌋)`` while that
    spacing is below ``eval_every``, then every multiple of ``eval_every``, and the last step.
    With the defaults (100, 100): 0..100, 110, 121, 133, …, 993, 1092, then 1100, 1200, ….
    ``log_eval_steps = 0`` turns the early phase off: 0, every ``eval_every`` and the last.
    """
    return list(_eval_steps(cfg.epochs, cfg.eval_every, cfg.log_eval_steps))


@functools.lru_cache(maxsize=256)
def _eval_steps(epochs: int, every: int, dense: int) -> tuple[int, ...]:
    steps = set(range(0, min(dense, epochs) + 1))
    s = min(dense, epochs)
    if dense > 0:
        while True:
            nxt = max(s + 1, int(1.1 * s + 0.5))  # round half up
            if nxt - s >= every or nxt > epochs:
                break
            steps.add(nxt)
            s = nxt
    steps.update(range((s // every + 1) * every, epochs + 1, every))
    steps.add(epochs)
    return tuple(sorted(steps))


@functools.lru_cache(maxsize=256)
def _eval_set(epochs: int, every: int, dense: int) -> frozenset[int]:
    return frozenset(_eval_steps(epochs, every, dense))


def is_eval_step(cfg, step: int) -> bool:
    """Whether ``step`` is in :func:`eval_steps` (O(1) after the first call)."""
    return step in _eval_set(cfg.epochs, cfg.eval_every, cfg.log_eval_steps)
