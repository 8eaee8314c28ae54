"""Sparse-parity training data as tensors with a leading member axis ``E``.

- :func:`fresh_batch` — a new batch ``[E, B, n]`` drawn from each member's *own* torch
  generator, so a member's batches do not depend on the ensemble it sits in (SPEC
  "Cross-cutting": a member equals the same run trained alone);
- :func:`stack_parity` — every member's support and fixed sets (:mod:`.task`) on the member
  axis; members that share ``data_seed`` share one copy of the inputs (a broadcast view).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from rulelab.studies.sparse_parity.task import (
    EVAL_STREAM,
    TRAIN_STREAM,
    draw_support,
    fixed_bits,
)


def member_parity(x: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """``x [E, B, n]`` (±1) and per-member supports ``[E, k]`` → ``χ_{S_e}(x) [E, B]``."""
    idx = support.to(x.device).unsqueeze(1).expand(*x.shape[:-1], support.shape[1])
    return torch.gather(x, -1, idx).prod(-1)


def random_bits(generator: torch.Generator, batch: int, n_bits: int) -> torch.Tensor:
    """``[batch, n_bits]`` uniform ±1 (float32) from one member's torch generator."""
    bits = torch.randint(0, 2, (batch, n_bits), generator=generator, dtype=torch.int8)
    return (2 * bits - 1).float()


def fresh_batch(generators: Sequence[torch.Generator], support: torch.Tensor, batch: int,
                n_bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A new batch per member: ``x [E, B, n]`` from generator ``e``, ``y = χ_{S_e}(x) [E, B]``."""
    x = torch.stack([random_bits(g, batch, n_bits) for g in generators])
    return x, member_parity(x, support)


@dataclass
class ParityEnsembleData:
    """Member data: ``support [E, k]``, the evaluation set, and the fixed training set
    (``train_x, train_y``; ``None`` for fresh samples)."""

    support: torch.Tensor  # [E, k] int64
    eval_x: torch.Tensor  # [E, T, n] float32 ±1
    eval_y: torch.Tensor  # [E, T] float32 ±1
    train_x: torch.Tensor | None = None  # [E, N, n]
    train_y: torch.Tensor | None = None  # [E, N]

    def to(self, device) -> ParityEnsembleData:
        return ParityEnsembleData(**{k: None if v is None else v.to(device)
                                     for k, v in self.__dict__.items()})


def _stacked_bits(configs, count: int, stream: int) -> torch.Tensor:
    n = configs[0].n_bits
    seeds = [c.data_seed for c in configs]
    if len(set(seeds)) == 1:
        x = torch.from_numpy(fixed_bits(n, count, seeds[0], stream).copy())
        return x.unsqueeze(0).expand(len(configs), *x.shape)
    return torch.from_numpy(np.stack([fixed_bits(n, count, s, stream) for s in seeds]))


def stack_parity(configs) -> ParityEnsembleData:
    """Every member's support and fixed sets (configs share ``n_bits, k, n_eval, n_train``)."""
    c0 = configs[0]
    support = torch.tensor([draw_support(c.n_bits, c.k, c.data_seed, c.support)
                            for c in configs], dtype=torch.int64)
    eval_x = _stacked_bits(configs, c0.n_eval, EVAL_STREAM)
    data = ParityEnsembleData(support, eval_x, member_parity(eval_x, support))
    if c0.samples == "fixed":
        data.train_x = _stacked_bits(configs, c0.n_train, TRAIN_STREAM)
        data.train_y = member_parity(data.train_x, support)
    return data


def build_data(configs, device) -> ParityEnsembleData:
    """:func:`stack_parity` on ``device``: the trainer's data and the post-hoc loader's
    (issue 22)."""
    return stack_parity(configs).to(device)
