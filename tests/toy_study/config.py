"""The toy task's run config: the sign of a random linear function of ``d`` Gaussian inputs,
learned by a two-layer ReLU network, with a share ``noise`` of the training labels flipped."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rulelab.config.base import RunConfig


class ToyRunConfig(RunConfig):
    """One toy run; the defaults train in a few milliseconds an epoch."""

    member_fields = ("data_seed", "seed", "noise", "lr", "weight_decay", "beta1", "beta2", "eps",
                     "momentum", "broken")

    task: Literal["toy"] = "toy"
    # --- task ---
    d: int = Field(4, ge=1, le=64, description="input dimension")
    n_train: int = Field(64, ge=2, le=100_000, description="training examples")
    n_eval: int = Field(32, ge=2, le=100_000, description="evaluation examples")
    noise: float = Field(0.0, ge=0.0, le=0.5, description="share of training labels flipped")
    data_seed: int = Field(0, ge=0, lt=2**31, description="the direction and the examples")
    broken: bool = Field(False, description="building this member's data raises ValueError, as "
                         "a generator that cannot fill its set does (how tests make one fail)")
    # --- model ---
    width: int = Field(8, ge=1, le=4096, description="hidden ReLU units")
    # --- training ---
    optimizer: Literal["adamw", "adam", "sgd"] = Field("adamw", description="optimizer")
    lr: float = Field(0.01, gt=0.0, le=10.0, description="learning rate")
    weight_decay: float = Field(0.0, ge=0.0, le=10.0, description="weight decay")
    beta1: float = Field(0.9, ge=0.0, lt=1.0, description="Adam β₁")
    beta2: float = Field(0.999, ge=0.0, lt=1.0, description="Adam β₂")
    eps: float = Field(1e-8, gt=0.0, le=1.0, description="Adam ε")
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="sgd only")
    nesterov: bool = Field(False, description="sgd only")
    batch_size: int = Field(0, ge=0, le=100_000, description="0: full batch")
    seed: int = Field(0, ge=0, lt=2**31, description="init and the batch order")
    epochs: int = Field(50, ge=1, le=1_000_000, description="passes over the training set")
    eval_every: int = Field(5, ge=1, le=1_000_000, description="epochs between evaluations")

    def label(self) -> str:
        """Short name of the ensemble's shape, for progress bars and plans."""
        return f"d{self.d}·w{self.width}"
