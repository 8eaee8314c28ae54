"""QK/OV fingerprints of each attention head (SPEC S.4.5), vectorized over members.

Per (member, layer, head), from one batch ``x [E, B, n]`` (keys = the n content tokens; CLS is
position 0 and is never a key here):

- ``qk_rho``: Spearman ρ between a token's value ``v`` and the **mean** attention that keys
  holding ``v`` receive from the CLS query (attention averaged per value first, then ρ over
  the values present in the batch). High ρ = a max-finding (shortcut) head.
- ``first_mass``: mean attention from CLS to position 1 (``x_1``; the "first" shortcut).
- ``ov_parity_rho``: what the head writes into the logits when it attends to a token of value
  ``v``. Per key j the direct logit attribution at CLS is ``a_j · v_j W_O`` pushed through the
  final LayerNorm's linear part (centering, ``/ scale`` of the CLS residual, ``· w``) and
  ``W_U``; summed per value and divided by the attention those keys received, i.e. the
  attention-weighted mean per unit of attention, so a head's OV reading is not confounded with
  its QK (a max head would otherwise write ≈ 0 for every small value). Later-layer heads are
  read through the direct path only. With ``o_c(v) = logit_c − mean_{c'≠c} logit_c'``,
  ``ov_parity_rho = mean_c Spearman(1[v mod k = c], o_c(v))``; for k = 2 this equals
  ``Spearman(v mod 2, logit_1 − logit_0)``. Positive = the head writes the token's own residue.
  Note: against a binary indicator |ρ| reaches 1 only when ``o_c`` takes two levels (an exact
  residue writer); perfect separation with varying magnitudes gives ≈ √3/2 for balanced classes.
- ``ov_probe_acc``: how well ``v mod k`` is *linearly decodable* from what the head writes into
  the residual stream when it attends to a token of value ``v`` — per key j the head's result
  per unit attention, ``v_j W_O`` (``hook_v`` at j through ``W_O``; ``b_O`` is shared by all
  keys and absorbed by the intercept). Unlike ``ov_parity_rho`` this does not depend on the
  path to the logits, so it also scores heads whose output is read by a later MLP or head.
  A closed-form ridge probe (:func:`ov_probe_accuracy`) is fit with **token values held out**:
  the values are cut into groups of k consecutive values (one of each residue), the groups
  into ``min(#groups, 5)`` folds; each fold's values are predicted by a probe fit on the other
  folds' values only, and the score is the accuracy averaged over values (chance ≈ 1/k).
  Holding out values rather than examples matters at these sizes: with ``V ≤ d_head`` any
  head with a generic ``W_V`` makes *every* function of ``v`` — token identity — linearly
  decodable from seen values, so an example split would score ≈ 1 for almost any head; only a
  head that writes the residue along a shared direction generalises to unseen values.
  NaN when ``V < 2k`` (each fold must leave a full group, every residue, to train on).
- Without LayerNorm (``cfg.ln`` False) also the weight-based ``qk_rho_weights`` and
  ``ov_parity_rho_weights`` for layer-0 heads (NaN for later layers, whose inputs are not
  embeddings), with ``p̄`` the mean content-position embedding (research notes §6 items 5–6):
  ``score(v) = ((e_CLS + p_0) W_Q + b_Q)·((e_v + p̄) W_K + b_K) / √d_head`` and
  ``OV(v) = ((e_v + p̄) W_V + b_V) W_O W_U``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F


def _avg_ranks(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """1-based ranks along the last axis, ties averaged, among ``valid`` entries only."""
    x = x.masked_fill(~valid, math.inf).contiguous()  # invalid sort last, rank-neutral
    srt = x.sort(-1).values
    lo = torch.searchsorted(srt, x, right=False)  # entries strictly below
    hi = torch.searchsorted(srt, x, right=True)  # entries ≤
    return (lo + hi + 1).to(torch.float64) / 2  # mean of ranks lo+1 … hi


def spearman(x, y, dim: int = -1, mask=None) -> torch.Tensor:
    """Spearman ρ along ``dim``, vectorized over the other (broadcast) axes; ties averaged.

    NaNs (and entries where ``mask`` is False) are dropped pairwise; ρ is NaN when fewer than
    two pairs remain or one side is constant (as ``scipy.stats.spearmanr``). Returns float64.
    """
    x, y = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    m = torch.ones((), dtype=torch.bool) if mask is None else torch.as_tensor(mask, dtype=bool)
    x, y, m = torch.broadcast_tensors(x, y, m.to(x.device))
    x, y, m = (t.movedim(dim, -1) for t in (x, y, m))
    valid = m & ~x.isnan() & ~y.isnan()
    rx, ry = _avg_ranks(x, valid), _avg_ranks(y, valid)
    w = valid.to(torch.float64)
    n = w.sum(-1, keepdim=True)
    dx = (rx - (rx * w).sum(-1, keepdim=True) / n) * w
    dy = (ry - (ry * w).sum(-1, keepdim=True) / n) * w
    rho = (dx * dy).sum(-1) / ((dx * dx).sum(-1) * (dy * dy).sum(-1)).sqrt()
    return torch.where(n[..., 0] < 2, torch.full_like(rho, math.nan), rho).clamp(-1, 1)


def ov_parity_rho(logits: torch.Tensor, values: torch.Tensor, mask=None) -> torch.Tensor:
    """``logits [..., V', k]`` written per token value, ``values [V']`` → ρ ``[...]``.

    ``mean_c Spearman(1[v mod k = c], logit_c − mean of the other logits)`` (module docstring).
    """
    k = logits.shape[-1]
    own = (k * logits - logits.sum(-1, keepdim=True)) / (k - 1)  # [..., V', k] o_c(v)
    ind = (values[:, None] % k == torch.arange(k, device=values.device)).to(torch.float64)
    m = None if mask is None else mask[..., None]
    return spearman(ind, own, dim=-2, mask=m).mean(-1)  # mean over classes c


PROBE_FOLDS = 5
PROBE_RIDGE = 1e-3  # λ = PROBE_RIDGE · tr(XᵀX)/D on centred features: scale-free


def ov_probe_accuracy(v: torch.Tensor, W_O: torch.Tensor, vals: torch.Tensor, k: int, V: int,
                      ridge: float = PROBE_RIDGE, folds: int = PROBE_FOLDS) -> torch.Tensor:
    """Value-held-out ridge probe of ``v mod k`` from a head's per-key writes → ``[E, H]``.

    ``v [E, H, N, dh]`` the keys' value vectors (``hook_v``), ``W_O [E, H, dh, d]``,
    ``vals [E, N]`` the keys' token values. Features are ``x_j = v_j W_O`` (module docstring);
    the probe is least squares on one-hot targets with an unpenalised intercept and ridge
    ``λ = ridge · tr(X̃ᵀX̃)/d`` (X̃ centred on the training rows), solved in closed form for all
    members, heads and folds at once: ``A = W_Oᵀ (ṼᵀṼ) W_O + λI`` keeps the heavy products
    in ``d_head`` space. Score: accuracy on held-out keys, averaged over the token values.

    Cost (issue 13: it runs at every tracked epoch): the keys are read once per fold, for
    that fold's moments (:func:`_fold_moments`); each fold's training moments are the total
    minus its own, so there is no per-fold pass over the training keys. The scores equal those
    of that per-fold two-pass computation exactly (``test_tracking_speed_pins.py`` in
    ``tests/studies/shortcut_saturation/``).
    """
    E, H, N, dh = v.shape
    groups = -(-V // k)  # ceil(V/k) groups of k consecutive values, one of each residue
    if V // k < 2:  # a fold must leave a full group (every residue) to train on
        return torch.full((E, H), math.nan, dtype=torch.float64, device=v.device)
    n_folds = min(groups, folds)
    v, W_O = v.to(torch.float64), W_O.to(torch.float64)[:, :, None]  # W_O [E, H, 1, dh, d]
    vals = vals.long()
    fold = (vals // k) % n_folds  # [E, N]
    y = F.one_hot(vals % k, k).to(torch.float64)  # [E, N, k]
    v = v - v.mean(2, keepdim=True)  # centred once, so that moment differences cancel little
    held = _fold_moments(v, y, fold, n_folds)  # [E, H, F, D, D], D = dh + k + 1
    train = held.sum(2, keepdim=True) - held  # moments of every fold's training keys
    n = train[..., -1, -1].clamp(min=1)  # [E, H, F]
    mean = train[..., -1, :-1] / n[..., None]  # [E, H, F, dh + k]: (mean v, mean y)
    cov = train[..., :-1, :-1] - n[..., None, None] * mean[..., :, None] * mean[..., None, :]
    gram, cross = cov[..., :dh, :dh], cov[..., :dh, dh:]  # ṼᵀṼ, Ṽᵀ(Y − ȳ)
    A = W_O.transpose(-1, -2) @ gram @ W_O  # [E, H, F, d, d]
    lam = ridge * A.diagonal(dim1=-2, dim2=-1).sum(-1) / A.shape[-1]  # [E, H, F]
    eye = torch.eye(A.shape[-1], dtype=torch.float64, device=v.device)
    A = A + (lam.clamp(min=1e-12))[..., None, None] * eye
    beta = torch.linalg.solve(A, W_O.transpose(-1, -2) @ cross)  # [E, H, F, d, k]
    P = W_O @ beta  # [E, H, F, dh, k]: key value vector → prediction
    offset = mean[..., dh:] - (mean[..., None, :dh] @ P)[..., 0, :]  # [E, H, F, k]
    # Each key is predicted by the probe of the fold that holds it out.
    pred = v @ P.permute(0, 1, 3, 2, 4).reshape(E, H, dh, n_folds * k)  # [E, H, N, F·k]
    own = fold[:, None, :, None, None].expand(E, H, N, 1, k)
    pred = pred.view(E, H, N, n_folds, k).gather(3, own)[:, :, :, 0]  # [E, H, N, k]
    pred = pred + offset.gather(2, fold[:, None, :, None].expand(E, H, N, k))
    correct = (pred.argmax(-1) == vals[:, None] % k).to(torch.float64)  # [E, H, N]
    per_value = _per_value(correct, vals, V)  # [E, H, V]
    count = _per_value(torch.ones_like(correct[:, :1]), vals, V)[:, 0]  # [E, V]
    seen = (count > 0)[:, None].to(torch.float64)
    return (per_value / count.clamp(min=1)[:, None] * seen).sum(-1) / seen.sum(-1)


def _fold_moments(v: torch.Tensor, y: torch.Tensor, fold: torch.Tensor, n_folds: int
                  ) -> torch.Tensor:
    """Per fold, the raw moments ``Σ u uᵀ`` of ``u = (v, y, 1)`` over the fold's keys.

    ``v [E, H, N, dh]``, ``y [E, N, k]``, ``fold [E, N]`` → ``[E, H, F, D, D]`` with
    ``D = dh + k + 1``: blocks ``Σvvᵀ, Σvyᵀ, Σv`` / ``Σyyᵀ, Σy`` / count. One ``bmm`` per fold.
    """
    E, H, N, _ = v.shape
    ones = torch.ones(E, H, N, 1, dtype=v.dtype, device=v.device)
    u = torch.cat([v, y[:, None].expand(E, H, N, -1), ones], -1)  # [E, H, N, D]
    out = []
    for f in range(n_folds):
        in_f = (fold == f).to(v.dtype)[:, None, :, None]  # [E, 1, N, 1]
        out.append((u * in_f).transpose(-1, -2) @ u)  # [E, H, D, D]
    return torch.stack(out, 2)


def _per_value(a: torch.Tensor, vals: torch.Tensor, V: int) -> torch.Tensor:
    """Sum ``a [E, G, N, ...]`` into value bins by ``vals [E, N]`` → ``[E, G, V, ...]``."""
    E, G, N = a.shape[:3]
    idx = vals.view(E, 1, N, *([1] * (a.dim() - 3))).expand_as(a)
    return a.new_zeros(E, G, V, *a.shape[3:]).scatter_add_(2, idx, a)


def _weight_fingerprints(model) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer-0 weight-based QK ρ and OV parity ρ (no LayerNorm) → ``[E, H]`` each."""
    cfg, attn = model.cfg, model.blocks[0].attn
    V = cfg.vocab
    p_bar = model.W_pos[:, 1 : cfg.seq_len + 1].mean(1)  # [E, d] mean content position
    e_cls = model.W_E[:, model.cls_token] + model.W_pos[:, 0]  # [E, d]
    keys_in = model.W_E[:, :V] + p_bar[:, None]  # [E, V, d]
    q = torch.einsum("ed,ehdk->ehk", e_cls, attn.W_Q) + attn.b_Q  # [E, H, dh]
    k = torch.einsum("evd,ehdk->ehvk", keys_in, attn.W_K) + attn.b_K[:, :, None]  # [E,H,V,dh]
    score = torch.einsum("ehk,ehvk->ehv", q, k) / math.sqrt(attn.d_head)  # [E, H, V]
    vals = torch.arange(V, device=score.device)
    qk = spearman(vals.to(score), score)
    v = torch.einsum("evd,ehdk->ehvk", keys_in, attn.W_V) + attn.b_V[:, :, None]  # [E,H,V,dh]
    ov = torch.einsum("ehvk,ehkd,edc->ehvc", v, attn.W_O, model.W_U)  # [E, H, V, k]
    return qk, ov_parity_rho(ov, vals)


@torch.no_grad()
def fingerprints(model, x: torch.Tensor) -> pd.DataFrame:
    """QK/OV fingerprints of every head on a batch ``x [E, B, n]`` (SPEC S.4.5).

    One row per (member, layer, head): ``qk_rho, first_mass, ov_parity_rho, ov_probe_acc``
    and, when the model has no LayerNorm, ``qk_rho_weights, ov_parity_rho_weights`` (module
    docstring).
    """
    cfg = model.cfg
    E, B, n = x.shape
    V, L, H, k = cfg.vocab, cfg.layers, cfg.heads, cfg.label_mod
    names = [f"blocks.{l}.attn.hook_{a}" for l in range(L) for a in ("pattern", "v")]
    if model.ln_final is not None:
        names.append("ln_final.hook_scale")
    _, cache = model.run_with_cache(x, names_filter=names)
    vals = x.reshape(E, B * n).long()  # [E, B·n] value of each content key
    values = torch.arange(V, device=x.device)
    # Final LayerNorm's linear part, folded into the unembedding: centre, scale by w.
    W_U = model.W_U.to(torch.float64)  # [E, d, k]
    if model.ln_final is not None:
        w = model.ln_final.w.to(torch.float64)  # [E, d]
        W_U = (W_U * w[..., None]) - (W_U * w[..., None]).mean(1, keepdim=True)  # centring
        inv_scale = 1 / cache["ln_final.hook_scale"][:, :, 0, 0].to(torch.float64)  # [E, B]
    else:
        inv_scale = torch.ones(E, B, dtype=torch.float64, device=x.device)

    qk, first, ov, probe = (torch.empty(E, L, H, dtype=torch.float64, device=x.device)
                            for _ in "abcd")
    for l in range(L):
        pat = cache[f"blocks.{l}.attn.hook_pattern"][:, :, :, 0, 1:].to(torch.float64)  # [E,B,H,n]
        first[:, l] = pat[..., 0].mean(1)
        att = pat.permute(0, 2, 1, 3).reshape(E, H, B * n)  # [E, H, B·n]
        att_v = _per_value(att, vals, V)  # [E, H, V] attention received per value
        count = _per_value(torch.ones_like(att[:, :1]), vals, V)[:, 0]  # [E, V]
        seen = count > 0
        qk[:, l] = spearman(values.to(att), att_v / count.clamp(min=1)[:, None], mask=seen[:, None])
        # Direct logit attribution of each content key at CLS: a_j · (v_j W_O W_U) / scale.
        v = cache[f"blocks.{l}.attn.hook_v"][:, :, 1:].to(torch.float64)  # [E, B, n, H, dh]
        W_OU = torch.einsum("ehkd,edc->ehkc", model.blocks[l].attn.W_O.to(torch.float64), W_U)
        dla = torch.einsum("ebjhk,ehkc->ehbjc", v, W_OU)  # [E, H, B, n, k]
        dla = dla * (pat.permute(0, 2, 1, 3) * inv_scale[:, None, :, None])[..., None]
        dla_v = _per_value(dla.reshape(E, H, B * n, k), vals, V)  # [E, H, V, k]
        per_unit = dla_v / att_v.clamp(min=1e-30)[..., None]  # per unit attention
        ov[:, l] = ov_parity_rho(per_unit, values, mask=(seen[:, None] & (att_v > 0)))
        keys = v.permute(0, 3, 1, 2, 4).reshape(E, H, B * n, -1)  # [E, H, B·n, dh]
        probe[:, l] = ov_probe_accuracy(keys, model.blocks[l].attn.W_O, vals, k, V)

    grid = np.stack(np.meshgrid(np.arange(E), np.arange(L), np.arange(H), indexing="ij"), -1)
    df = pd.DataFrame(grid.reshape(-1, 3), columns=["member", "layer", "head"])
    flat = lambda t: t.reshape(-1).cpu().numpy()  # noqa: E731  [E, L, H] → rows
    df["qk_rho"], df["first_mass"], df["ov_parity_rho"] = flat(qk), flat(first), flat(ov)
    df["ov_probe_acc"] = flat(probe)
    if not cfg.ln:
        qk_w, ov_w = (torch.full((E, L, H), math.nan, dtype=torch.float64) for _ in "ab")
        qk_w[:, 0], ov_w[:, 0] = (t.cpu() for t in _weight_fingerprints(model))
        df["qk_rho_weights"], df["ov_parity_rho_weights"] = flat(qk_w), flat(ov_w)
    return df
