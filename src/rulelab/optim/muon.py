"""Batched Muon over stacked ``[E, m, n]`` weights, AdamW for the rest (SPEC M.3).

Muon (Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural networks",
https://kellerjordan.github.io/posts/muon/) orthogonalizes the (Nesterov) momentum of each weight
matrix with a quintic Newton–Schulz iteration. Each member ``e`` follows exactly
``torch.optim.Muon`` (torch ≥ 2.9; checked against torch 2.13's ``torch/optim/_muon.py``) on its
own matrix ``p[e]`` ([m, n]) with its own ``lr[e], weight_decay[e], momentum[e], nesterov[e],
eps[e], ns_steps[e]`` and linear warm-up ``warmup[e]``:

    buf ← lerp(buf, g, 1 − μ)                        (EMA momentum, as torch)
    u   ← lerp(g, buf, μ) if nesterov else buf
    O   ← NS(u): bf16; transpose if m > n; X ← X / max(‖X‖_F, eps);
          k × { A = X Xᵀ;  B = b·A + c·A A;  X = a·X + B X },  (a, b, c) = (3.4445, −4.775, 2.0315)
    p   ← p · (1 − lr · wd) − lr · ratio · O         (decoupled decay uses the unadjusted lr)

with ``ratio = √max(1, m/n)`` ("original", Keller Jordan, the default) or ``0.2 · √max(m, n)``
("match_rms_adamw", Liu et al. 2025, "Muon is Scalable for LLM Training"). Rows are dim −2 of each
member's matrix as stored (our weights are ``[out, in]`` like ``nn.Linear``). The iteration is
batched over members with ``bmm``; the Frobenius norm is taken per member, never across members.

Rounding: in bfloat16, CPU ``baddbmm`` and torch's 2-D ``addmm`` choose kernels by shape and batch
size, so on rare elements a member's NS output can differ from torch's (and from the same member
in a batch of one) by one bf16 rounding (~0.4 %). Everything else is exact. ``ns_dtype=float32``
or ``float64`` shrinks that to float rounding, e.g. for member-equals-alone checks.

Parameters that are not matrices per member (biases, μ ``[E, P]``) go to an internal
:class:`~rulelab.optim.adamw.BatchedAdamW` ("AdamW for μ"), stepped together with Muon.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import torch

from rulelab.optim.adamw import BatchedAdamW
from rulelab.optim.sgd import BatchedMomentum, member_mask, member_view
from rulelab.optim.state import per_member

__all__ = ["NS_COEFFICIENTS", "BatchedMuon", "newton_schulz"]

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # torch.optim.Muon / Keller Jordan's defaults
ADJUST_LR_FNS = (None, "original", "match_rms_adamw")


def newton_schulz(
    G: torch.Tensor,
    steps: torch.Tensor | int = 5,
    eps: torch.Tensor | float = 1e-7,
    coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
    dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """Orthogonalize each member's matrix: ``G`` ``[E, m, n]`` → ``[E, m, n]`` in ``dtype``.

    ``steps`` and ``eps`` may be ``[E]`` tensors (per-member iteration counts and norm floors).
    With ``dtype=bfloat16`` every member's result is bit-identical to torch's 2-D routine.
    """
    a, b, c = coefficients
    E = G.shape[0]
    X = G.to(dtype)  # [E, m, n]
    tall = G.size(-2) > G.size(-1)
    if tall:
        X = X.mT  # [E, n, m]: the Gram matrix X Xᵀ is the smaller one
    norm = torch.linalg.vector_norm(X, dim=(-2, -1), keepdim=True)  # [E, 1, 1], per member
    floor = torch.as_tensor(eps, dtype=torch.float64).expand(E).to(X.device, dtype)
    X = X / torch.maximum(norm, floor.view(E, 1, 1))  # torch: norm.clamp(min=eps)
    steps = torch.as_tensor(steps).expand(E)
    n_max, uniform = int(steps.max()), bool((steps == steps[0]).all())
    run = steps.to(X.device).view(E, 1, 1)
    for k in range(n_max):
        A = X @ X.mT  # [E, r, r]
        B = torch.baddbmm(A, A, A, beta=b, alpha=c)  # b·A + c·A²
        X_next = torch.baddbmm(X, B, X, beta=a)  # a·X + B X
        X = X_next if uniform else torch.where(k < run, X_next, X)
    return X.mT if tall else X


class BatchedMuon(BatchedMomentum):
    """Muon on ``[E, m, n]`` matrices plus AdamW on the other ``[E, ...]`` parameters.

    ``BatchedMuon(matrix_params, other_params, n_members=E, lr=..., ...)``: hyperparameters are
    scalars or ``[E]`` sequences (defaults are torch's). ``adamw`` holds keyword hyperparameters of
    the AdamW part (``lr, weight_decay, beta1, beta2, eps, warmup``); its lr, weight decay and
    warm-up default to Muon's. ``ns_dtype`` is the Newton–Schulz precision (bfloat16 = torch).
    """

    def __init__(
        self,
        matrix_params: Iterable[torch.nn.Parameter],
        other_params: Iterable[torch.nn.Parameter] = (),
        *,
        n_members: int,
        lr: Sequence[float] | float = 1e-3,
        weight_decay: Sequence[float] | float = 0.1,
        momentum: Sequence[float] | float = 0.95,
        nesterov: Sequence[bool] | bool = True,
        eps: Sequence[float] | float = 1e-7,
        ns_steps: Sequence[int] | int = 5,
        warmup: Sequence[int] | int = 0,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
        adjust_lr_fn: str | None = None,
        ns_dtype: torch.dtype = torch.bfloat16,
        adamw: Mapping | None = None,
    ) -> None:
        super().__init__(matrix_params, n_members=n_members, lr=lr, weight_decay=weight_decay,
                         momentum=momentum, nesterov=nesterov, warmup=warmup)
        for p in self.params:
            if p.dim() != 3:
                raise ValueError(f"Muon needs [E, m, n] matrices, got shape {tuple(p.shape)}")
        if adjust_lr_fn not in ADJUST_LR_FNS:
            raise ValueError(f"adjust_lr_fn: {adjust_lr_fn!r} is not one of {ADJUST_LR_FNS}")
        self.eps = per_member(eps, n_members, "eps")
        self.ns_steps = per_member(ns_steps, n_members, "ns_steps").long()
        if bool((self.ns_steps >= 100).any()) or bool((self.ns_steps < 0).any()):
            raise ValueError("ns_steps: must be in 0..99 (as torch.optim.Muon)")
        self.ns_coefficients = tuple(float(x) for x in ns_coefficients)
        self.adjust_lr_fn = adjust_lr_fn
        self.ns_dtype = ns_dtype
        others = list(other_params)
        hyper = {"lr": lr, "weight_decay": weight_decay, "warmup": warmup, **(adamw or {})}
        self.adamw = BatchedAdamW(others, n_members=n_members, **hyper) if others else None

    def lr_ratio(self, shape: torch.Size) -> float:
        """torch's ``_adjust_lr`` factor for one member's ``[A, B]`` matrix."""
        A, B = shape[-2], shape[-1]
        if self.adjust_lr_fn == "match_rms_adamw":
            return 0.2 * math.sqrt(max(A, B))
        return math.sqrt(max(1, A / B))

    def zero_grad(self) -> None:
        super().zero_grad()
        if self.adamw is not None:
            self.adamw.zero_grad()

    def deactivate(self, members: torch.Tensor) -> None:
        super().deactivate(members)
        if self.adamw is not None:
            self.adamw.deactivate(members)

    @torch.no_grad()
    def step(self) -> None:
        lr = self.lr_now() * self.active  # before counting this step: warm-up starts at 1/w
        self.step_count += 1
        decay = 1 - lr * self.weight_decay  # [E] float64, unadjusted lr (as torch)
        lerp_w = (1 - self.momentum) * self.active  # a frozen member keeps its buffer
        frozen = not bool(self.active.all())
        all_nesterov, any_nesterov = bool(self.nesterov.all()), bool(self.nesterov.any())
        for p, buf in zip(self.params, self.momentum_buffer, strict=True):
            if p.grad is None:
                continue
            g = self._masked_grad(p)  # [E, m, n]
            buf.lerp_(g, member_view(lerp_w, p))
            if any_nesterov:
                nest = g.lerp(buf, member_view(self.momentum, p))
                u = nest if all_nesterov else torch.where(member_mask(self.nesterov, p), nest, buf)
            else:
                u = buf
            O = newton_schulz(u, self.ns_steps, self.eps, self.ns_coefficients, self.ns_dtype)
            if frozen:
                O = torch.where(member_mask(self.active, p), O, 0.0)
            p.mul_(member_view(decay, p))
            p.sub_(O.to(p.dtype) * member_view(lr * self.lr_ratio(p.shape), p))
        if self.adamw is not None:
            self.adamw.step()

    # --- checkpointing (Muon buffers + the AdamW part) ---------------------------------------
    def state_dict(self) -> dict:
        state = super().state_dict()
        state["adamw"] = None if self.adamw is None else self.adamw.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.adamw is not None:
            self.adamw.load_state_dict(state["adamw"])

    def member_state(self, e: int) -> dict:
        state = super().member_state(e)
        state["adamw"] = None if self.adamw is None else self.adamw.member_state(e)
        return state

    def load_member_state(self, e: int, state: dict) -> None:
        super().load_member_state(e, state)
        if self.adamw is not None:
            self.adamw.load_member_state(e, state["adamw"])
