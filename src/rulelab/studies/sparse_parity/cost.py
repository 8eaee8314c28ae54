"""The planner's cost model of one sparse-parity run, from its shapes alone (see
:mod:`rulelab.sweep.estimate` for how the generic terms were fitted on this machine).

Per member: parameters, gradients and optimizer state (16 B a parameter, Adam's two moments
counted); the larger working set of one training micro-batch or one evaluation chunk; the
evaluation set, the fixed training set and the characters χ_T of the evaluation set used by the
Fourier gap (``n_eval × min(C(n,k) − 1, 2048)`` floats, shared by members with one data seed
but counted per member); the metric rows. FLOPs: 3 × forward per training example, plus the
forward passes and the Fourier-gap matmul of every evaluation.
"""

from __future__ import annotations

import math

from rulelab.studies.sparse_parity.task import MAX_OTHER_SUBSETS

N_METRICS = 8  # rows per evaluation: eval loss/acc/corr_s/fourier_gap, 2 weights, 2 train


def _mlp(c) -> tuple[float, int, int]:
    """Forward FLOPs per example, parameters, activation floats per example."""
    M, n = c.width, c.n_bits
    return 2 * M * (n + 1), M * (n + 2) + 1, 3 * M


def _transformer(c) -> tuple[float, int, int]:
    T, d, f, h, L = c.n_bits + 1, c.d_model, c.d_mlp, c.heads, c.layers
    qkv, rest = 3 * d * d, d * d + 2 * d * f + 2 * T * d  # MACs per token (attn: QKᵀ, AV)
    macs = (L - 1) * T * (qkv + rest) + T * qkv + rest + 2 * d  # last layer: the CLS row
    params = (3 + T) * d + L * (4 * d * d + 2 * d * f + 6 * d + f) + 2 * d
    return 2 * macs, params, L * T * (10 * d + 2 * f + 2 * h * T)


def sparse_parity_cost(c, micro_batch: int, eval_chunk: int):
    """A :class:`rulelab.sweep.estimate.RunCost` for config ``c``."""
    from rulelab.sweep.estimate import ACTIVATION_SLACK, ROW_BYTES, RunCost

    fwd, params, act = (_mlp if c.model == "mlp" else _transformer)(c)
    n_train = c.n_train if c.samples == "fixed" else 0
    per_epoch = c.batch_size * c.steps_per_epoch if n_train else c.batch_size
    others = min(math.comb(c.n_bits, c.k) - 1, MAX_OTHER_SUBSETS)
    train_act = min(c.batch_size, micro_batch) * act * 4
    eval_act = min(c.n_eval + n_train, eval_chunk) * act * 4
    data = (c.n_eval + n_train) * (c.n_bits + 1) * 4 + c.n_eval * others * 4
    rows = (c.epochs // c.eval_every + 2) * N_METRICS * ROW_BYTES
    member = 16 * params + ACTIVATION_SLACK * max(train_act, eval_act) + data + rows
    eval_flops = fwd * (c.n_eval + n_train) + 2 * c.n_eval * others
    passes = c.steps_per_epoch * math.ceil(c.batch_size / micro_batch)
    evals = math.ceil(c.n_eval / eval_chunk) + math.ceil(n_train / eval_chunk) + 1
    return RunCost(int(member), 3 * fwd * per_epoch, eval_flops, passes, evals)
