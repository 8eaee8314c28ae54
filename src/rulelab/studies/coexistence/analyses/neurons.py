"""Neuron scores, partition and pruning curves for Study M (SPEC M.4.5).

Shapes as in :mod:`.analyses.fourier`: ``U, V [E, M, P]``, ``W [E, P, M]``, ``μ [E, P]``
or None; neuron ``m`` owns ``u_m = U[:, m]``, ``v_m = V[:, m]``, ``w_m = W[:, :, m]``.

Conventions
- IPR (Doshi et al. 2024, r = 2): ``IPR(x) = Σ_k (|x̂_k| / ‖x̂‖₂)⁴`` on the one-sided ``|rfft(x)|``
  (bins ``k = 0..⌊P/2⌋``), averaged over ``u_m, v_m, w_m``. The DC bin is included by default
  (Doshi's code; ``include_dc=False`` drops it). A pure cosine of frequency ``1 ≤ ω < P/2`` has a
  single non-zero bin and scores exactly 1 either way; white noise scores ≈ 2/(P/2) ≪ 1.
  An all-zero vector scores 0.
- Strength ``Str_m = ‖w_m‖_∞ · φ(‖u_m‖_∞ + ‖v_m‖_∞)`` with ``φ = relu`` by default (its argument
  is ≥ 0, so relu leaves it unchanged: an upper bound on the logit neuron ``m`` can add); any name
  in ``ACTIVATIONS`` may be passed instead.
- Higher score = more "generalizing": the top-k neurons form the generalization subnetwork,
  the bottom-k′ the memorization subnetwork. Ties go to the lower neuron index.
- Pruning keeps ``round(f·M)`` neurons for each fraction ``f``; a removed neuron has its
  ``u_m, v_m, w_m`` zeroed (μ is kept), so ``f = 0`` leaves the bias-only network.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rulelab.studies.coexistence.analyses.fourier import (
    evaluate_ff,
    network_accuracy,
    neuron_vectors,
    spectrum,
)
from rulelab.studies.coexistence.mlp import ACTIVATIONS


def ipr(U: torch.Tensor, V: torch.Tensor, W: torch.Tensor, *, include_dc: bool = True):
    """Inverse participation ratio per neuron, ``[E, M]`` in (0, 1] (module conventions)."""
    mag = spectrum(neuron_vectors(U, V, W)).abs()  # [3, E, M, ⌊P/2⌋+1]
    if not include_dc:
        mag = mag[..., 1:]
    norm = mag.square().sum(-1, keepdim=True).sqrt()  # [3, E, M, 1]
    r = mag / norm.clamp(min=torch.finfo(mag.dtype).tiny)  # zero vector → all zeros → IPR 0
    return r.pow(4).sum(-1).mean(0)  # [E, M]


def strength(U: torch.Tensor, V: torch.Tensor, W: torch.Tensor, act: str = "relu"):
    """``Str_m = ‖w_m‖_∞ · φ(‖u_m‖_∞ + ‖v_m‖_∞)`` per neuron, ``[E, M]`` (SPEC M.4.5)."""
    u_inf = U.abs().amax(-1)  # [E, M]
    v_inf = V.abs().amax(-1)  # [E, M]
    w_inf = W.abs().amax(-2)  # [E, M]: max over outputs q
    return w_inf * ACTIVATIONS[act](u_inf + v_inf)


def rank_order(scores: torch.Tensor, descending: bool = True) -> torch.Tensor:
    """Neuron indices ``[E, M]`` sorted by score (stable: ties keep index order)."""
    return torch.sort(scores, dim=-1, descending=descending, stable=True).indices


def keep_first(order: torch.Tensor, n: int) -> torch.Tensor:
    """Mask ``[E, M]`` that keeps the first ``n`` neurons of each row of ``order [E, M]``."""
    mask = torch.zeros(order.shape, dtype=torch.bool, device=order.device)
    return mask.scatter_(-1, order[:, :n], True)


def partition(scores: torch.Tensor, k: int, k_prime: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(top [E, M], bottom [E, M])`` bool masks: the ``k`` highest- and ``k′`` lowest-scored
    neurons per member (generalization and memorization subnetworks, SPEC M.4.5). The two overlap
    only when ``k + k′ > M``.
    """
    M = scores.shape[-1]
    if not (0 <= k <= M and 0 <= k_prime <= M):
        raise ValueError(f"partition: need 0 ≤ k, k_prime ≤ M = {M} (got {k}, {k_prime})")
    top = keep_first(rank_order(scores, descending=True), k)
    bottom = keep_first(rank_order(scores, descending=False), k_prime)
    return top, bottom


def subnetwork(U, V, W, neuron_mask: torch.Tensor):
    """Zero every neuron outside ``neuron_mask [E, M]``: returns ``(U, V, W)`` copies."""
    keep = neuron_mask.to(U.dtype)
    return U * keep[..., None], V * keep[..., None], W * keep[:, None, :]


def ff_subnetwork(U, V, W, mu, x, y, neuron_mask, masks=None, act: str = "relu"):
    """FF (:func:`.analyses.fourier.evaluate_ff`) on the subnetwork ``neuron_mask``."""
    return evaluate_ff(*subnetwork(U, V, W, neuron_mask), mu, x, y, masks, act)


def pruning_curve(
    U,
    V,
    W,
    mu,
    x,
    y,
    mask_sets,
    order_scores: torch.Tensor,
    fractions: Sequence[float] = tuple(i / 10 for i in range(11)),
    act: str = "relu",
    descending: bool = True,
    seed: int = 0,
) -> dict[str, dict[str, torch.Tensor]]:
    """Accuracy vs fraction of neurons kept (SPEC M.4.5): ``{order: {subset: [F, E]}}``.

    Orders: ``"top"`` keeps the most important neurons first, ``"bottom"`` the least important
    first, ``"random"`` a uniformly random order per member (a CPU generator seeded with ``seed``)
    as the control. Importance is ``order_scores [E, M]``, higher = more important when
    ``descending`` (IPR, strength), lower when not. Row ``i`` of each result is ``fractions[i]``;
    subsets are the masks ``mask_sets`` (``{name: [E, N] bool}`` or None for all rows).
    """
    E, M, _ = U.shape
    gen = torch.Generator().manual_seed(int(seed))
    orders = {
        "top": rank_order(order_scores, descending=descending),
        "bottom": rank_order(order_scores, descending=not descending),
        "random": torch.rand(E, M, generator=gen).argsort(-1).to(order_scores.device),
    }
    out: dict[str, dict[str, torch.Tensor]] = {}
    for name, order in orders.items():
        rows = []
        for f in fractions:
            if not 0.0 <= f <= 1.0:
                raise ValueError(f"pruning_curve: fractions must lie in [0, 1], got {f}")
            keep = keep_first(order, round(f * M))
            rows.append(network_accuracy(*subnetwork(U, V, W, keep), mu, x, y, mask_sets, act))
        out[name] = {s: torch.stack([r[s] for r in rows]) for s in rows[0]}  # [F, E]
    return out


def curve_frame(curves: dict[str, dict[str, torch.Tensor]], fractions: Sequence[float]):
    """Long ``pandas.DataFrame`` of :func:`pruning_curve`: order, fraction, subset, member, acc."""
    import pandas as pd

    rows = [
        (order, float(fractions[i]), subset, e, float(acc[i, e]))
        for order, by_subset in curves.items()
        for subset, acc in by_subset.items()
        for i in range(acc.shape[0])
        for e in range(acc.shape[1])
    ]
    return pd.DataFrame(rows, columns=["order", "fraction", "subset", "member", "acc"])
