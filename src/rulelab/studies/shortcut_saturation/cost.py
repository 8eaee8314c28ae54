"""Study S's cost model: memory and FLOPs of one MPSP transformer run, from its shapes alone
(the planner's estimate, :mod:`rulelab.sweep.estimate`, which says how the terms were fitted).

The last layer runs attention and MLP for the CLS row only, as
:class:`rulelab.models.transformer.EnsembleTransformer` does.
"""

from __future__ import annotations

import math

from rulelab.models.passes import activation_bytes
from rulelab.sweep.estimate import ACTIVATION_SLACK, ROW_BYTES, RunCost


def mpsp_cost(c, micro_batch: int, eval_chunk: int) -> RunCost:
    T, d, f, h, L = c.seq_len + 1, c.d_model, c.d_mlp, c.heads, c.layers
    qkv, rest = 3 * d * d, d * d + 2 * d * f + 2 * T * d  # MACs per token (attn: QKᵀ, AV)
    macs = (L - 1) * T * (qkv + rest) + T * qkv + rest + d * c.label_mod  # last layer: CLS row
    fwd = 2 * macs
    params = (c.vocab + 1 + T) * d + L * (4 * d * d + 2 * d * f + 6 * d + f) + d * c.label_mod
    # per token and layer: LN in/out, q, k, v, z, attn out, resid (≈ 10 d), MLP pre/post (2 f),
    # scores and pattern (2 h T) — what engine 10 sizes its passes by; evaluation keeps no
    # graph but holds a layer's temporaries.
    # a pass holds at most a step's examples, an evaluation chunk at most a split's (a
    # micro-batch above the step, as a GPU's full-batch default, is the step)
    step = min(c.batch_size or c.n_train, c.n_train)  # examples per step
    train_act = min(micro_batch, step) * activation_bytes(c)
    eval_act = min(eval_chunk, max(c.n_train, c.n_eval)) * T * (2 * d * (1 + L) + f +
                                                                2 * h * T * L) * 4
    n_examples = c.n_train + 2 * c.n_eval
    data = n_examples * (c.seq_len * 8 + 9) * 2
    rows = (c.epochs // c.eval_every + 2) * 10 * ROW_BYTES
    member = 16 * params + ACTIVATION_SLACK * max(train_act, eval_act) + data + rows
    passes = c.steps_per_epoch * math.ceil(step / micro_batch)
    evals = math.ceil(c.n_train / eval_chunk) + 2 * math.ceil(c.n_eval / eval_chunk)
    return RunCost(int(member), 3 * fwd * c.n_train, fwd * n_examples, passes, evals,
                   step_examples=step)
