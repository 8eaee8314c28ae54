"""Build the batched optimizer of an ensemble from its members' configs (SPEC M.3 Training).

``make_optimizer(configs, named_params, n_members)`` reads, per member:

- ``optimizer``: one of ``adamw, adam, sgd, muon`` (default ``adamw``), the same for every
  member — members of one ensemble share the update rule;
- ``lr, weight_decay`` and what the rule needs: ``beta1, beta2, eps`` (AdamW, Adam and the AdamW
  part of Muon), ``momentum, nesterov`` (SGD, Muon), ``ns_steps`` (Muon);
- optional (``getattr`` defaults): ``warmup`` (0), ``adjust_lr_fn`` (None = torch's "original",
  shared by all members), ``ns_eps`` (1e-7), ``ns_dtype`` ("bfloat16" as torch; "float32" or
  "float64", shared), ``aux_lr`` / ``aux_weight_decay`` (the AdamW part of Muon; default ``lr`` /
  ``weight_decay``).

Every value may differ per member and becomes an ``[E]`` tensor. For Muon, ``is_matrix(name, p)``
picks the Muon parameters; the default takes every ``[E, m, n]`` parameter (``p.dim() == 3``,
e.g. the MLP's U, V, W) and leaves the rest (μ ``[E, P]``, biases, 4-D attention weights) to AdamW.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from rulelab.optim.adam import BatchedAdam
from rulelab.optim.adamw import BatchedAdamW
from rulelab.optim.muon import BatchedMuon
from rulelab.optim.sgd import BatchedSGD

__all__ = ["NS_DTYPES", "OPTIMIZERS", "make_optimizer"]

NS_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
OPTIMIZERS = {"adamw": BatchedAdamW, "adam": BatchedAdam, "sgd": BatchedSGD, "muon": BatchedMuon}


def _is_matrix(name: str, p: torch.nn.Parameter) -> bool:
    return p.dim() == 3


def make_optimizer(
    configs: Sequence[Any],
    named_params: Sequence[tuple[str, torch.nn.Parameter]],
    n_members: int,
    is_matrix: Callable[[str, torch.nn.Parameter], bool] = _is_matrix,
) -> BatchedAdamW | BatchedAdam | BatchedSGD | BatchedMuon:
    """The batched optimizer for ``n_members`` members (``configs[e]`` is member ``e``'s)."""
    if len(configs) != n_members:
        raise ValueError(f"configs: expected {n_members} member configs, got {len(configs)}")
    kinds = sorted({str(getattr(c, "optimizer", "adamw")).lower() for c in configs})
    if len(kinds) != 1:
        raise ValueError(f"optimizer: members of one ensemble must share it, got {kinds}")
    kind = kinds[0]
    if kind not in OPTIMIZERS:
        raise ValueError(f"optimizer: {kind!r} is not one of {sorted(OPTIMIZERS)}")

    def each(field: str, default: Any = None) -> list:
        if default is None:
            return [getattr(c, field) for c in configs]
        return [getattr(c, field, default) for c in configs]

    def aux(field: str, fallback: str) -> list:
        own = (getattr(c, field, None) for c in configs)
        return [getattr(c, fallback) if v is None else v for c, v in zip(configs, own, strict=True)]

    named_params = list(named_params)  # may be a generator (model.named_parameters())
    params = [p for _, p in named_params]
    common = {"n_members": n_members, "lr": each("lr"), "weight_decay": each("weight_decay"),
              "warmup": each("warmup", 0)}
    adam_hyper = {"beta1": each("beta1"), "beta2": each("beta2"), "eps": each("eps")}
    if kind in ("adamw", "adam"):
        return OPTIMIZERS[kind](params, **common, **adam_hyper)
    momentum = {"momentum": each("momentum"), "nesterov": [bool(x) for x in each("nesterov")]}
    if kind == "sgd":
        return BatchedSGD(params, **common, **momentum)
    fns = {getattr(c, "adjust_lr_fn", None) for c in configs}
    if len(fns) != 1:
        raise ValueError(f"adjust_lr_fn: members of one ensemble must share it, got {fns}")
    dtypes = {str(getattr(c, "ns_dtype", "bfloat16")).removeprefix("torch.") for c in configs}
    if len(dtypes) != 1 or not dtypes <= set(NS_DTYPES):
        raise ValueError(f"ns_dtype: one of {sorted(NS_DTYPES)}, shared by all; got {dtypes}")
    matrices = [p for n, p in named_params if is_matrix(n, p)]
    others = [p for n, p in named_params if not is_matrix(n, p)]
    adamw = {**adam_hyper, "lr": aux("aux_lr", "lr"),
             "weight_decay": aux("aux_weight_decay", "weight_decay")}
    return BatchedMuon(matrices, others, **common, **momentum, ns_steps=each("ns_steps"),
                       eps=each("ns_eps", 1e-7), adjust_lr_fn=fns.pop(),
                       ns_dtype=NS_DTYPES[dtypes.pop()], adamw=adamw)
