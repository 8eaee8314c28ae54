"""Batched AdamW over stacked ``[E, ...]`` parameters with per-member hyperparameters.

Each member ``e`` follows exactly ``torch.optim.AdamW`` (Loshchilov & Hutter 2019, decoupled
weight decay) with its own ``lr[e], weight_decay[e], beta1[e], beta2[e], eps[e]`` and linear
warm-up length ``warmup[e]`` — the oracle test checks this member by member. Nothing reduces
across the member axis; a member marked inactive (e.g. it went NaN) is frozen in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from rulelab.optim.state import BatchedOptimizer, per_member


class BatchedAdamW(BatchedOptimizer):
    """AdamW where every hyperparameter is an ``[E]`` vector (one value per member).

    ``decoupled = False`` (see :class:`rulelab.optim.adam.BatchedAdam`) turns the decoupled decay
    into ``torch.optim.Adam``'s L2 penalty added to the gradient. An inactive member is frozen:
    its parameters *and* its moments stay exactly as they were.
    """

    buffer_names = ("exp_avg", "exp_avg_sq")  # checkpointed per member (BatchedOptimizer)
    decoupled: bool = True  # AdamW: decay the weights; False: Adam, add wd * p to the gradient

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        *,
        n_members: int,
        lr: Sequence[float] | float = 1e-3,
        weight_decay: Sequence[float] | float = 0.01,
        beta1: Sequence[float] | float = 0.9,
        beta2: Sequence[float] | float = 0.999,
        eps: Sequence[float] | float = 1e-8,
        warmup: Sequence[int] | int = 0,
    ) -> None:
        self._setup(params, n_members, lr=lr, weight_decay=weight_decay, warmup=warmup)
        E = n_members
        self.beta1 = per_member(beta1, E, "beta1")
        self.beta2 = per_member(beta2, E, "beta2")
        self.eps = per_member(eps, E, "eps")
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self) -> None:
        lr = self.lr_now() * self.active  # before counting this step: warm-up starts at 1/w
        self.step_count += 1
        t = self.step_count
        dev = self.params[0].device
        # Hyperparameter algebra in float64 on [E], as torch.optim does with Python floats.
        b1, b2 = self.beta1, self.beta2
        step_size = (lr / (1 - b1**t)).to(dev)
        bias2_sqrt = (1 - b2**t).sqrt().to(dev)
        wd = self.weight_decay
        decay = (1 - lr * wd).to(dev) if self.decoupled else None
        l2 = None if self.decoupled or not bool((wd != 0).any()) else wd.to(dev)
        # An inactive member gets zero moment weights: its exp_avg / exp_avg_sq stay unchanged.
        on = self.active.to(torch.float64)
        factors = {  # each [E], float64
            "step_size": step_size, "bias2_sqrt": bias2_sqrt, "decay": decay, "l2": l2,
            "one_minus_b1": ((1 - b1) * on).to(dev),
            "b2": torch.where(self.active, b2, 1.0).to(dev),
            "one_minus_b2": ((1 - b2) * on).to(dev), "eps": self.eps.to(dev),
        }
        # Each factor cast to the parameters' dtype and shaped [E, 1, …] once per step, not once
        # per parameter: a step of a small ensemble is dozens of tiny casts otherwise (the same
        # values either way). Keyed by (dtype, ndim).
        shaped: dict[tuple[torch.dtype, int], dict[str, torch.Tensor | None]] = {}
        frozen = not bool(self.active.all())
        active = self.active.to(dev)
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            if p.grad is None:
                continue
            key = (p.dtype, p.dim())
            if key not in shaped:
                shape = (-1,) + (1,) * (p.dim() - 1)
                shaped[key] = {k: None if f is None else f.view(shape).to(p.dtype)
                               for k, f in factors.items()} | {"active": active.view(shape)}
            f = shaped[key]
            g = p.grad
            if f["l2"] is not None:  # Adam (torch.optim.Adam): g + wd * p
                g = g.add(p * f["l2"])
            if frozen:  # a frozen member's NaN gradient must not reach its state
                g = torch.where(f["active"], g, 0.0)
            if f["decay"] is not None:
                p.mul_(f["decay"])
            m.lerp_(g, f["one_minus_b1"])
            v.mul_(f["b2"]).addcmul_(g, g * f["one_minus_b2"])
            denom = v.sqrt().div_(f["bias2_sqrt"])
            denom.add_(f["eps"])
            p.addcdiv_(m * f["step_size"], denom, value=-1.0)
