"""Batched Adam (optional L2) over stacked ``[E, ...]`` parameters (SPEC M.3 "Adam (optional L2)").

Each member ``e`` follows exactly ``torch.optim.Adam`` (Kingma & Ba 2015) with its own
``lr[e], weight_decay[e], beta1[e], beta2[e], eps[e]`` and linear warm-up ``warmup[e]``. Weight
decay is the classic *coupled* L2 penalty: ``g ← g + weight_decay · p`` before the moments, unlike
AdamW's decoupled decay (Loshchilov & Hutter 2019). The update itself is shared with
:class:`~rulelab.optim.adamw.BatchedAdamW` (``decoupled = False``), so checkpoints, the
``active`` mask and the per-member state API are identical.
"""

from __future__ import annotations

from rulelab.optim.adamw import BatchedAdamW

__all__ = ["BatchedAdam"]


class BatchedAdam(BatchedAdamW):
    """Adam with L2 weight decay; every hyperparameter is an ``[E]`` vector.

    Same constructor as :class:`BatchedAdamW` (``params, n_members, lr, weight_decay, beta1,
    beta2, eps, warmup``). ``weight_decay`` defaults to 0 as in ``torch.optim.Adam``.
    """

    decoupled = False

    def __init__(self, params, *, n_members: int, weight_decay=0.0, **hyper) -> None:
        super().__init__(params, n_members=n_members, weight_decay=weight_decay, **hyper)
