"""Study M's cost models: memory and FLOPs of one modular MLP run and of one digits MLP run,
from their shapes alone (the planner's estimate, :mod:`rulelab.sweep.estimate`)."""

from __future__ import annotations

import math

from rulelab.studies.coexistence.config import eval_steps
from rulelab.sweep.estimate import ACTIVATION_SLACK, ROW_BYTES, RunCost


def modular_cost(c, micro_batch: int, eval_chunk: int) -> RunCost:
    """``f(a, b) = W φ(U e_a + V e_b) + μ`` (SPEC M.2), evaluated on the log-spaced schedule."""
    M, P = c.width, c.p
    n = c.n_pairs
    fwd = 2 * M * P  # h @ Wᵀ; the U, V "matmuls" are gathers
    params = (2 if not c.tied else 1) * M * P + P * M + P
    n_train = round(n * c.train_frac)
    # a pass holds at most the (full-batch) step's examples, an evaluation chunk all pairs
    train_act = min(micro_batch, n_train) * (4 * M + 3 * P) * 4
    eval_act = min(eval_chunk, n) * (2 * M + 3 * P) * 4
    data = n * (2 * 8 + 2 * 8 + 1) * 2
    schedule = tuple(eval_steps(c))
    rows = len(schedule) * 10 * ROW_BYTES
    member = 16 * params + ACTIVATION_SLACK * max(train_act, eval_act) + data + rows
    passes = math.ceil(n_train / micro_batch)
    evals = math.ceil(n_train / eval_chunk) + math.ceil((n - n_train) / eval_chunk)
    return RunCost(int(member), 3 * fwd * n_train, fwd * n, passes, evals, schedule)


def digits_cost(c, micro_batch: int, eval_chunk: int) -> RunCost:
    """The 3-layer MLP of SPEC M.4.7 on 8×8 digits (sklearn) or 28×28 MNIST."""
    d_in = 64 if c.source == "sklearn" else 784
    n = c.n_train or (1797 if c.source == "sklearn" else 60000)
    n_train = n if c.n_train else round(n * (1 - getattr(c, "test_frac", 0.2)))
    h = c.hidden
    params = d_in * h + h * h + h * 10 + 2 * h + 10
    fwd = 2 * (d_in * h + h * h + h * 10)
    act = min(micro_batch, n_train) * (4 * h + d_in + 10) * 4  # a pass: at most the step
    member = 16 * params + ACTIVATION_SLACK * act + n * (d_in * 4 + 16) * 2
    passes = math.ceil(n_train / micro_batch)
    return RunCost(int(member), 3 * fwd * n_train, fwd * n, passes,
                   math.ceil(n / eval_chunk) + 1)
