"""The planner's cost model of one toy run, from its shapes (as each study declares one; see
:mod:`rulelab.sweep.estimate`): 16 B a parameter (weights, gradients, Adam's two moments), the
activations of the larger of a training micro-batch and an evaluation, the data and the rows."""

from __future__ import annotations

import math

N_METRICS = 4  # rows per evaluation: train and eval loss and acc


def toy_cost(c, micro_batch: int, eval_chunk: int):
    """A :class:`rulelab.sweep.estimate.RunCost` for config ``c``."""
    from rulelab.sweep.estimate import ACTIVATION_SLACK, ROW_BYTES, RunCost

    fwd = 2 * c.width * (c.d + 2)  # FLOPs per example
    params = c.width * (c.d + 3) + 2
    batch = c.batch_size if c.batch_size else c.n_train
    steps = math.ceil(c.n_train / batch)
    act = 3 * c.width * 4 * max(min(batch, micro_batch), c.n_train + c.n_eval)
    data = (c.n_train + c.n_eval) * (c.d + 1) * 4
    rows = (c.epochs // c.eval_every + 2) * N_METRICS * ROW_BYTES
    member = 16 * params + ACTIVATION_SLACK * act + data + rows
    passes = steps * math.ceil(batch / micro_batch)
    return RunCost(int(member), 3 * fwd * c.n_train, fwd * (c.n_train + c.n_eval), passes, 2)
