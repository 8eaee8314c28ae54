"""Sparse-parity measures as pure functions over tensors with a leading member axis ``E``.

Losses on the real output ``f`` and labels ``y ∈ {±1}`` (per example, ``[E, B]``):
``hinge = max(0, 1 − y f)`` (Barak et al. 2022's loss) and ``logistic = log(1 + e^{−y f})``.
Accuracy counts ``sign f = y``; ``f = 0`` is wrong (no credit for a tie).

Hidden-progress measures (the paper's point: SGD makes steady progress while loss and accuracy
sit at chance):

- :func:`support_mass` — the share of the first layer's squared weight mass on the support,
  ``Σ_j Σ_{i∈S} W₁[j, i]² / Σ_j Σ_i W₁[j, i]²``: ≈ k/n at init (i.i.d. weights), → 1 when every
  neuron reads only the support bits.
- :func:`correlations` — the normalized Fourier coefficient of the output on S,
  ``corr_S = E[f χ_S] / √E[f²]`` over the evaluation set, and the *Fourier gap*
  ``|corr_S| − max_{T ≠ S, |T| = k} |corr_T|`` over the other k-subsets (all of them when
  C(n, k) − 1 ≤ 2,048, else a fixed random sample of that many: :func:`.task.other_subsets`).
  At init the parity is just one of C(n, k) noise-level coefficients (gap < 0); the gap turns
  positive when the output singles out χ_S.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

LOSSES = ("hinge", "logistic")
ROW_BLOCK = 64  # elements: a multiple of every CPU kernel's vector block (AVX-512: 2 × 16 floats)


def per_example_loss(kind: str, f: torch.Tensor, y: torch.Tensor, *,
                     aligned: bool = False) -> torch.Tensor:
    """``f, y [E, B]`` → ``[E, B]`` hinge or logistic loss of the margin ``y f``; ``aligned``
    (engine 6, the MLP's: :mod:`.model`) computes the logistic loss on :func:`aligned_rows`.
    The hinge needs no alignment: ``1 − m`` and ReLU round alike on every kernel path."""
    margin = y * f
    if kind == "hinge":
        return F.relu(1.0 - margin)
    if kind == "logistic":
        return aligned_rows(F.softplus, -margin) if aligned else F.softplus(-margin)
    raise ValueError(f"unknown loss {kind!r}; use one of {LOSSES}")


def aligned_rows(fn, t: torch.Tensor) -> torch.Tensor:
    """``fn(t)`` for an elementwise ``fn`` of ``t [E, B]``, computed with each member's row
    padded to a multiple of :data:`ROW_BLOCK` elements, so a member's values do not depend on
    E. PyTorch's CPU kernels sweep a contiguous tensor in vector blocks from its start and do
    its last few elements one at a time, and a transcendental function (softplus: exp, log1p)
    rounds otherwise there: unpadded, a lone member's last ``B mod 16`` losses took the scalar
    path and the same member's in an ensemble of three the vector one (off by ~6e-8). Padded,
    every element is on the vector path, as is a split between 2 threads (at E·B'/2)."""
    pad = -t.shape[-1] % ROW_BLOCK
    return fn(F.pad(t, (0, pad)))[..., : t.shape[-1]] if pad else fn(t.contiguous())


def correct(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``[E, B]`` bool: the sign of ``f`` is the label (``f = 0`` counts as wrong)."""
    return torch.sign(f) == y


def support_mask(support: torch.Tensor, n_bits: int) -> torch.Tensor:
    """``support [E, k]`` indices → ``[E, n]`` bool mask."""
    mask = torch.zeros(support.shape[0], n_bits, dtype=torch.bool, device=support.device)
    return mask.scatter_(1, support, True)


def coordinate_mass(W1: torch.Tensor) -> torch.Tensor:
    """``W₁ [E, M, n]`` → ``Σ_j W₁[j, i]²`` per input coordinate, ``[E, n]`` float64."""
    return W1.detach().double().square().sum(1)


def support_mass(W1: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """``W₁ [E, M, n]`` (rows = neurons), ``support [E, k]`` → ``[E]`` float64 share of
    ``Σ W₁²`` on the support columns (NaN for an all-zero layer)."""
    col = coordinate_mass(W1)  # [E, n]
    mask = support_mask(support.to(W1.device), W1.shape[-1])
    total = col.sum(1)
    on = torch.where(mask, col, 0.0).sum(1)
    return torch.where(total > 0, on / total.clamp(min=1e-300), float("nan"))


def relative_change(W: torch.Tensor, W0: torch.Tensor) -> torch.Tensor:
    """``‖W − W₀‖_F / ‖W₀‖_F`` per member (``[E, …]`` → ``[E]`` float64)."""
    d = (W.detach().double() - W0.double()).flatten(1).norm(dim=1)
    return d / W0.double().flatten(1).norm(dim=1).clamp(min=1e-300)


def characters(x: torch.Tensor, subsets: np.ndarray) -> torch.Tensor:
    """``x [T, n]`` (±1), ``subsets [C, k]`` → ``χ_T(x)`` as ``[T, C]``."""
    idx = torch.as_tensor(subsets, device=x.device)
    return x[:, idx].prod(-1)


def correlations(f: torch.Tensor, chi_s: torch.Tensor, chi_others: list[torch.Tensor]
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """``f, χ_S [E, T]`` and per member ``χ_others [T, C]`` → ``(corr_S, gap)``, ``[E]`` each.

    ``corr = E[f χ] / √E[f²]`` (0 for a constant-zero output); ``gap = |corr_S| − max |corr_T|``
    over the other subsets (``|corr_S|`` when there are none)."""
    f64 = f.double()
    T = f.shape[1]
    rms = f64.square().mean(1).sqrt()
    scale = torch.where(rms > 0, 1.0 / rms.clamp(min=1e-300), 0.0)
    corr_s = (f64 * chi_s.double()).mean(1) * scale
    best = torch.zeros_like(corr_s)
    for e, chi in enumerate(chi_others):
        if chi.shape[1]:  # float32 matmul: T ≤ 10⁶ terms of ±|f|, far inside float32's range
            best[e] = (f[e].float() @ chi.float()).abs().max().double() / T * scale[e]
    return corr_s, corr_s.abs() - best
