"""Frequency filtering (FF) of Study M's two-layer network (SPEC M.4.3).

All functions act on every ensemble member at once: ``U, V [E, M, P]``, ``W [E, P, M]``,
``μ [E, P]`` or None. Neuron ``m`` owns three length-``P`` vectors over the token axis:
``u_m = U[:, m, :]``, ``v_m = V[:, m, :]`` and ``w_m = W[:, :, m]`` (its row over outputs ``q``).

Conventions
- DFT: ``torch.fft.rfft`` over the token axis, ``x̂_k = Σ_i x_i e^{−2πi k i/P}`` (numpy's sign).
  Bins ``k = 0..⌊P/2⌋``; for real vectors bin ``k`` already stands for ``k`` and ``P−k``
  (``|x̂_{P−k}| = |x̂_k|``), which is the folding of M.4.3.
- Dominant frequency ``ω_m = argmax_{k=1..⌊(P−1)/2⌋} |û_k|² + |v̂_k|² + |ŵ_k|²`` (DC and, for even
  ``P``, the Nyquist bin are never chosen; ties go to the lowest ``k``).
- Phase: ``arg x̂_ω``, so ``A cos(2πωi/P + φ)`` has phase ``φ`` (its coefficient is
  ``(AP/2) e^{iφ}``). Gromov's ``w_m(q) = A cos(−2πσq/P − φ¹ − φ²) = A cos(2πσq/P + φ¹ + φ²)``
  therefore has phase ``φ_c = φ¹ + φ²``, and the add residual ``φ_a + φ_b − φ_c`` is 0 for it.
- G part = orthogonal projection onto ``span{cos, sin}(2πω_m i/P)`` (the two rfft bins ±ω_m,
  DC dropped); R part = original − G. With ``keep_dc`` G also keeps each neuron's DC term (the
  k = 0 bin, the mean of ``u_m``, ``v_m``, ``w_m`` over tokens): a constant shift of a neuron's
  pre-activation matters to a ReLU, and the paper does not say whether FF drops it.
- Phase error: ``phase_sum_error`` averages ``|φ_a ± φ_b − φ_c|`` over neurons, every neuron
  alike; ``phase_sum_error(weighted=True)`` weights neuron ``m`` by its power at its frequency,
  ``|û_ω|² + |v̂_ω|² + |ŵ_ω|²``, so a dead neuron (whose phases are noise) counts zero.
- Accuracy subsets are boolean masks ``[E, N]`` over the rows of ``x [E, N, 2]`` / ``y [E, N]``
  (e.g. ``{"train_clean": …, "train_noisy": …, "test": …}``; ``y`` holds the labels each subset
  is scored against, i.e. the corrupted labels on noisy-train). An empty subset scores NaN.
"""

from __future__ import annotations

import math

import torch

from rulelab.studies.coexistence.mlp import mlp_logits

Weights = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]  # U, V, W, μ

_CHUNK_ELEMS = 1 << 24  # E·B·M pre-activation elements per forward chunk (~64 MB in float32)


# --- DFT helpers ---------------------------------------------------------------------------------
def neuron_vectors(U: torch.Tensor, V: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Stack each neuron's ``u_m, v_m, w_m``: ``[3, E, M, P]`` (``W [E, P, M]`` → ``[E, M, P]``)."""
    return torch.stack((U, V, W.transpose(1, 2)))


def spectrum(x: torch.Tensor) -> torch.Tensor:
    """rfft over the last (token) axis: ``[..., P]`` → complex ``[..., ⌊P/2⌋ + 1]``."""
    return torch.fft.rfft(x if x.is_floating_point() else x.float(), dim=-1)


def n_frequencies(p: int) -> int:
    """Number of non-trivial folded frequencies ``⌊(P−1)/2⌋`` (k = 1..that)."""
    return (p - 1) // 2


def dominant_frequency(U: torch.Tensor, V: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """``ω_m`` per neuron, ``[E, M]`` int64 in ``1..⌊(P−1)/2⌋`` (SPEC M.4.3)."""
    P = U.shape[-1]
    K = n_frequencies(P)
    if K < 1:
        raise ValueError(f"dominant_frequency: P = {P} has no non-trivial frequency")
    power = spectrum(neuron_vectors(U, V, W)).abs().square().sum(0)  # [E, M, ⌊P/2⌋+1]
    return power[..., 1 : K + 1].argmax(-1) + 1  # [E, M]


def phases(x: torch.Tensor, freq: torch.Tensor) -> torch.Tensor:
    """``arg x̂_ω`` for ``x [E, M, P]`` at ``freq [E, M]`` → ``[E, M]`` radians in (−π, π]."""
    coef = spectrum(x).gather(-1, freq.unsqueeze(-1)).squeeze(-1)  # [E, M]
    return torch.angle(coef)


def project_onto_frequency(Wt: torch.Tensor, freq: torch.Tensor,
                           keep_dc: bool = False) -> torch.Tensor:
    """Project each row of ``Wt [E, M, P]`` onto ``span{cos, sin}(2π freq_m i/P)`` (G part),
    plus the constant vector when ``keep_dc``.

    Keeps rfft bin ``freq [E, M]`` (with ``1 ≤ freq < P/2``; and bin 0 with ``keep_dc``) and
    zeroes the rest; the inverse rfft of those bins is exactly the projection, since the
    constant, cos and sin of that frequency are orthogonal.
    """
    P = Wt.shape[-1]
    X = spectrum(Wt)  # [E, M, ⌊P/2⌋+1]
    keep = torch.zeros(X.shape, dtype=torch.bool, device=X.device)
    keep.scatter_(-1, freq.unsqueeze(-1), True)
    if keep_dc:
        keep[..., 0] = True
    return torch.fft.irfft(X * keep, n=P, dim=-1).to(Wt.dtype)


def filter_network(U, V, W, mu, freq: torch.Tensor | None = None,
                   keep_dc: bool = False) -> tuple[Weights, Weights]:
    """FF split (SPEC M.4.3): ``(G, R)`` weights, each ``(U, V, W, μ)``.

    G keeps each neuron's dominant frequency (``freq [E, M]``, default :func:`dominant_frequency`)
    in ``u_m, v_m, w_m`` — and its DC term with ``keep_dc`` — and carries μ; R = original − G
    and carries no μ (μ is not a neuron weight; :func:`evaluate_ff` also scores G without μ and
    R with μ).
    """
    freq = dominant_frequency(U, V, W) if freq is None else freq
    UG = project_onto_frequency(U, freq, keep_dc)
    VG = project_onto_frequency(V, freq, keep_dc)
    WG = project_onto_frequency(W.transpose(1, 2), freq, keep_dc).transpose(1, 2)  # [E, P, M]
    return (UG, VG, WG, mu), (U - UG, V - VG, W - WG, None)


# --- accuracy ------------------------------------------------------------------------------------
def _expand(x: torch.Tensor, y: torch.Tensor, E: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Allow a shared dataset: ``x [N, 2]``, ``y [N]`` → ``[E, N, 2]``, ``[E, N]``."""
    if x.dim() == 2:
        x = x.unsqueeze(0).expand(E, -1, -1)
    if y.dim() == 1:
        y = y.unsqueeze(0).expand(E, -1)
    return x, y


@torch.no_grad()
def predictions(U, V, W, mu, x: torch.Tensor, act: str) -> torch.Tensor:
    """Argmax class of ``mlp_logits`` for ``x [E, N, 2]`` → ``[E, N]``, chunked over ``N``."""
    E, M, _ = U.shape
    N = x.shape[1]
    step = max(1, _CHUNK_ELEMS // max(1, E * M))
    parts = [mlp_logits(U, V, W, mu, x[:, i : i + step], act).argmax(-1) for i in range(0, N, step)]
    return torch.cat(parts, dim=1) if parts else x.new_zeros((E, 0))


def masked_accuracy(correct: torch.Tensor, masks: dict[str, torch.Tensor] | None):
    """``correct [E, N]`` bool → ``{subset: [E] float}``; masks are ``[E, N]`` or shared ``[N]``;
    ``masks=None`` scores all rows as ``"all"``.
    """
    if masks is None:
        return {"all": correct.float().mean(1)}
    out = {}
    for name, mask in masks.items():
        mask = mask.to(correct.device).expand_as(correct)  # a shared [N] mask is allowed
        n = mask.sum(1)  # [E]
        hits = (correct & mask).sum(1)
        acc = hits.float() / n.clamp(min=1)
        out[name] = torch.where(n > 0, acc, torch.full_like(acc, math.nan))
    return out


def network_accuracy(U, V, W, mu, x, y, masks=None, act: str = "relu"):
    """Accuracy of the network on each subset: ``{subset: [E]}`` (see module conventions)."""
    x, y = _expand(x, y, U.shape[0])
    return masked_accuracy(predictions(U, V, W, mu, x, act) == y, masks)


def evaluate_ff(U, V, W, mu, x, y, masks=None, act: str = "relu", freq=None,
                keep_dc: bool = False):
    """FF evaluation (SPEC M.4.3): ``{network: {subset: [E] accuracy}}``.

    Networks: ``original``; ``G`` (dominant-frequency part with μ, plus each neuron's DC term
    with ``keep_dc``); ``G_no_mu``; ``R`` (residual, no μ); ``R_mu`` (residual with μ). Subsets
    are ``masks`` (module conventions).
    """
    (UG, VG, WG, _), (UR, VR, WR, _) = filter_network(U, V, W, mu, freq, keep_dc)
    nets = {
        "original": (U, V, W, mu),
        "G": (UG, VG, WG, mu),
        "G_no_mu": (UG, VG, WG, None),
        "R": (UR, VR, WR, None),
        "R_mu": (UR, VR, WR, mu),
    }
    return {name: network_accuracy(*w, x, y, masks, act) for name, w in nets.items()}


# --- phase check ---------------------------------------------------------------------------------
def phase_sum_residual(U, V, W, freq: torch.Tensor | None = None, op: str = "add") -> torch.Tensor:
    """Wrapped phase residual ``[E, M]`` in (−π, π] (SPEC M.4.3).

    ``φ_a + φ_b − φ_c`` for add, ``φ_a − φ_b − φ_c`` for sub.

    Phases are ``arg`` of the rfft coefficient at ``ω_m`` of ``u_m``, ``v_m`` and ``w_m`` (the row
    over outputs ``q``); see the module conventions for why the analytic solution gives 0.
    """
    if op not in ("add", "sub"):
        raise ValueError(f"phase_sum_residual: op must be 'add' or 'sub', got {op!r}")
    freq = dominant_frequency(U, V, W) if freq is None else freq
    pa, pb, pc = (phases(t, freq) for t in neuron_vectors(U, V, W))
    r = pa + pb - pc if op == "add" else pa - pb - pc
    return torch.atan2(torch.sin(r), torch.cos(r))


def frequency_power(U, V, W, freq: torch.Tensor | None = None) -> torch.Tensor:
    """Each neuron's power at its frequency, ``|û_ω|² + |v̂_ω|² + |ŵ_ω|²`` → ``[E, M]``."""
    freq = dominant_frequency(U, V, W) if freq is None else freq
    coef = spectrum(neuron_vectors(U, V, W)).gather(-1, freq[None, ..., None].expand(3, -1, -1, 1))
    return coef.squeeze(-1).abs().square().sum(0)


def phase_sum_error(U, V, W, freq: torch.Tensor | None = None, op: str = "add",
                    weighted: bool = False) -> torch.Tensor:
    """Mean over neurons of ``|phase_sum_residual|`` → ``[E]`` radians in [0, π] (SPEC M.4.3).

    Unweighted (default): every neuron counts, however small, so dead neurons — whose phases are
    noise — pull it towards π/2. ``weighted=True``: the mean weighted by
    :func:`frequency_power`, so a neuron counts by how much of its frequency it carries and a dead
    one counts zero (NaN for a member whose neurons are all zero). Random phases give ≈ π/2; the
    analytic solution gives 0. For a phase MSE use ``phase_sum_residual(...).square().mean(-1)``.
    """
    freq = dominant_frequency(U, V, W) if freq is None else freq
    err = phase_sum_residual(U, V, W, freq, op).abs()
    if not weighted:
        return err.mean(-1)
    power = frequency_power(U, V, W, freq).to(err.dtype)
    total = power.sum(-1)
    return torch.where(total > 0, (power * err).sum(-1) / total.clamp(min=torch.finfo(
        err.dtype).tiny), torch.full_like(total, math.nan))
