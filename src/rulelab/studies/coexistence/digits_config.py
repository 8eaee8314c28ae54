"""Study M.4.7 run config: learning order on digits / MNIST with label noise.

A 3-layer MLP (two hidden layers of ``hidden`` units), full batch, AdamW. Choices the SPEC
leaves open, stated here: ``hidden = 256``, ``lr = 1e-3``, ``weight_decay = 0.01`` (torch's AdamW
default), betas (0.9, 0.999), default PyTorch ``nn.Linear`` init, 20% of scikit-learn's 1,797
digits held out as test (MNIST keeps its own 10,000-image test set).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rulelab.config.base import RunConfig

DIGITS_MEMBER_FIELDS = ("data_seed", "noise", "seed", "lr", "weight_decay", "beta1", "beta2",
                        "eps")


class DigitsRunConfig(RunConfig):
    """One digits run: images with a share ``α`` of wrong training labels, a 3-layer MLP."""

    member_fields = DIGITS_MEMBER_FIELDS

    task: Literal["digits"] = "digits"
    # --- data ---
    source: Literal["sklearn", "mnist"] = Field(
        "sklearn", description="scikit-learn's bundled 8×8 digits, or MNIST IDX files")
    mnist_dir: str | None = Field(None, description="folder with the MNIST IDX files")
    n_train: int = Field(0, ge=0, le=10_000_000, description="first N train images; 0 = all")
    test_frac: float = Field(0.2, gt=0.0, lt=1.0, description="sklearn: share held out")
    noise: float = Field(0.05, ge=0.0, le=1.0, description="α: share of train labels corrupted")
    noise_mode: Literal["wrong", "uniform"] = Field(
        "wrong", description="wrong: a uniformly random wrong label; uniform: any label")
    data_seed: int = Field(0, ge=0, lt=2**31, description="split (sklearn) and noise")
    # --- model ---
    hidden: int = Field(256, ge=1, le=100_000, description="units in each hidden layer")
    activation: Literal["relu", "gelu", "tanh"] = Field("relu", description="hidden activation")
    # --- training (full batch) ---
    optimizer: Literal["adamw"] = Field("adamw", description="optimizer")
    lr: float = Field(1e-3, gt=0.0, le=100.0, description="AdamW learning rate")
    weight_decay: float = Field(0.01, ge=0.0, le=100.0, description="AdamW decoupled weight decay")
    beta1: float = Field(0.9, ge=0.0, lt=1.0, description="Adam β₁ (gradient average)")
    beta2: float = Field(0.999, ge=0.0, lt=1.0, description="Adam β₂ (squared-gradient average)")
    eps: float = Field(1e-8, gt=0.0, le=1.0, description="Adam ε (denominator floor)")
    seed: int = Field(0, ge=0, lt=2**31, description="model seed (init)")
    epochs: int = Field(200, ge=1, le=10_000_000,
                        description="epochs; full batch: one epoch = one step")
    eval_every: int = Field(1, ge=1, le=10_000_000, description="epochs between evaluations")

    @model_validator(mode="after")
    def _check_source(self) -> DigitsRunConfig:
        if self.source == "mnist" and not self.mnist_dir:
            raise ValueError("--mnist-dir: required with source mnist (a folder of IDX files)")
        if self.source == "sklearn" and self.mnist_dir:
            raise ValueError("--mnist-dir: only with source mnist")
        return self

    def label(self) -> str:
        return f"digits[{self.source}] h={self.hidden} {self.activation}"
