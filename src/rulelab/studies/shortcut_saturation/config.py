"""Study S run config: MPSP task (SPEC S.1) × transformer (S.2) × AdamW training (S.3)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rulelab.config.base import RunConfig

# Fields that may differ between members of one ensemble.
MPSP_MEMBER_FIELDS = (
    "ratio",
    "data_seed",
    "seed",
    "lr",
    "weight_decay",
    "beta1",
    "beta2",
    "eps",
    "warmup",
)


class MPSPRunConfig(RunConfig):
    """One study-S run: MPSP task (SPEC S.1) × transformer (S.2) × AdamW training (S.3)."""

    member_fields = MPSP_MEMBER_FIELDS
    flags = {"act": "--activation"}  # one flag name across studies; the field keeps its name

    task: Literal["mpsp"] = "mpsp"
    # --- task (S.1) ---
    label_mod: Literal[2, 3] = Field(2, description="k: label = sum mod k")
    shortcut: Literal["max", "first"] = Field("max", description="shortcut = max(x) or x_1 mod k")
    ratio: float = Field(0.9, ge=0.0, le=1.0, description="r: share of consistent train examples")
    seq_len: int = Field(10, ge=2, le=64, description="n: integers per sequence")
    vocab: int = Field(64, ge=4, le=4096, description="V: integers are drawn from [0, V)")
    n_train: int = Field(16384, ge=16, le=1_000_000, description="N: training examples")
    n_eval: int = Field(4096, ge=16, le=1_000_000, description="size of val and of adv")
    data_seed: int = Field(0, ge=0, lt=2**31,
                           description="seed of the data (separate from the model seed)")
    # --- model (S.2) ---
    layers: int = Field(2, ge=1, le=12, description="transformer blocks")
    heads: int = Field(2, ge=1, le=16, description="attention heads per block")
    d_model: int = Field(64, ge=4, le=4096, description="residual stream width")
    d_mlp: int = Field(128, ge=0, le=16384, description="0 means attention-only")
    act: Literal["relu", "gelu"] = Field("relu", description="MLP activation")
    ln: bool = Field(True, description="pre-LayerNorm blocks and a final LayerNorm")
    # --- training (S.3) ---
    seed: int = Field(0, ge=0, lt=2**31, description="model seed (init, minibatch order)")
    epochs: int = Field(15000, ge=1, le=10_000_000,
                        description="passes over the training set (full batch: one step each)")
    lr: float = Field(1e-3, gt=0.0, le=10.0, description="AdamW learning rate")
    weight_decay: float = Field(0.1, ge=0.0, le=10.0, description="AdamW decoupled weight decay")
    beta1: float = Field(0.9, ge=0.0, lt=1.0, description="Adam β₁ (gradient average)")
    beta2: float = Field(0.98, ge=0.0, lt=1.0, description="Adam β₂ (squared-gradient average)")
    eps: float = Field(1e-8, gt=0.0, le=1.0, description="Adam ε (denominator floor)")
    warmup: int = Field(0, ge=0, le=10_000_000, description="linear warm-up steps")
    batch_size: int = Field(0, ge=0, le=1_000_000, description="0 means full batch")
    eval_every: int = Field(10, ge=1, le=10_000_000, description="epochs between evaluations")
    transient_threshold: float = Field(
        0.95, ge=0.0, le=1.0,
        description="a generalized run whose adv accuracy later falls below this is transient")

    @model_validator(mode="after")
    def _check_relations(self) -> MPSPRunConfig:
        if self.d_model % self.heads:
            raise ValueError(f"--heads: {self.heads} is not allowed; --d-model ({self.d_model}) "
                             "must be divisible by --heads")
        if self.batch_size > self.n_train:
            raise ValueError(f"--batch-size: {self.batch_size} is not allowed; it must be ≤ "
                             f"--n-train ({self.n_train}), or 0 for full batch")
        if self.vocab < self.label_mod:
            raise ValueError(f"--vocab: {self.vocab} is not allowed; it must be ≥ "
                             f"--label-mod ({self.label_mod})")
        return self

    # --- derived quantities ---------------------------------------------------------------
    @property
    def n_ctx(self) -> int:
        """Positions: the CLS token plus the sequence."""
        return self.seq_len + 1

    @property
    def d_vocab(self) -> int:
        """Input vocabulary: V integers plus the CLS token (id V)."""
        return self.vocab + 1

    @property
    def steps_per_epoch(self) -> int:
        if self.batch_size in (0, self.n_train):
            return 1
        return -(-self.n_train // self.batch_size)

    def label(self) -> str:
        """Short name of the ensemble's shape, for progress bars."""
        return f"{self.layers}L·{self.heads}H"
