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

    One row per (member, layer, head): ``qk_rho, first_mass, ov_parity_rho`` and, when the
    model has no LayerNorm, ``qk_rho_weights, ov_parity_rho_weights`` (module docstring).
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

    qk, first, ov = (torch.empty(E, L, H, dtype=torch.float64, device=x.device) for _ in "abc")
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

    grid = np.stack(np.meshgrid(np.arange(E), np.arange(L), np.arange(H), indexing="ij"), -1)
    df = pd.DataFrame(grid.reshape(-1, 3), columns=["member", "layer", "head"])
    flat = lambda t: t.reshape(-1).cpu().numpy()  # noqa: E731  [E, L, H] → rows
    df["qk_rho"], df["first_mass"], df["ov_parity_rho"] = flat(qk), flat(first), flat(ov)
    if not cfg.ln:
        qk_w, ov_w = (torch.full((E, L, H), math.nan, dtype=torch.float64) for _ in "ab")
        qk_w[:, 0], ov_w[:, 0] = (t.cpu() for t in _weight_fingerprints(model))
        df["qk_rho_weights"], df["ov_parity_rho_weights"] = flat(qk_w), flat(ov_w)
    return df
