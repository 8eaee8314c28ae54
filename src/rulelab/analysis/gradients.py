"""Group gradients, gradient conflict and amplification, every member at once (SPEC S.4.1–2).

``g+`` / ``g−`` are the gradients of the *mean* cross-entropy over a member's train-consistent
(S+) / train-anti (S−) examples (paper1_shortcuts.md §6.1–2). Weight decay is not part of
them: they are plain ``torch.autograd.grad`` of the data loss, so an optimizer never enters.

One backward pass per group serves all ``E`` members: the objective is the sum over members
of each member's masked-mean loss, and member ``e``'s loss depends only on parameter slice
``[e]``, so that slice receives exactly member ``e``'s group gradient (DESIGN §1). Members may
have different group sizes; each divides by its own count. ``model.grad`` and the parameters
are never touched.

Modules (S.4.1): ``embed`` (W_E, W_pos), ``attn{l}`` (blocks.{l}.attn.*, blocks.{l}.ln1.*),
``mlp{l}`` (blocks.{l}.mlp.*, blocks.{l}.ln2.*), ``unembed`` (W_U, b_U, ln_final.*), and
``all`` (every parameter).
"""

from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F

ALL = "all"


def module_of(name: str) -> str:
    """The S.4.1 module a parameter belongs to: ``blocks.1.ln2.w`` → ``mlp1``."""
    parts = name.split(".")
    if parts[0] in ("W_E", "W_pos"):
        return "embed"
    if parts[0] in ("W_U", "b_U", "ln_final"):
        return "unembed"
    if parts[0] == "blocks":
        layer, sub = parts[1], parts[2]
        if sub in ("attn", "ln1"):
            return f"attn{layer}"
        if sub in ("mlp", "ln2"):
            return f"mlp{layer}"
    raise ValueError(f"parameter {name!r} belongs to no S.4.1 module")


def _group_first(x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor):
    """Reorder each member's examples so its group comes first; drop columns no member needs.

    ``x [E, N, n], y [E, N], mask [E, N]`` → the same, ``N`` cut to the largest group size.
    Work then scales with the group, not the training set (S− is 10% of it at r = 0.9).
    """
    order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # [E, N], group first
    n_max = int(mask.sum(1).max())
    order = order[:, :n_max]
    member = torch.arange(x.shape[0], device=x.device).unsqueeze(1)  # [E, 1]
    return x[member, order], y[member, order], mask[member, order]


def group_gradients(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    chunk: int = 2048,
) -> dict[str, torch.Tensor]:
    """``∇θ mean_{i ∈ mask_e} ℓ_i`` for every member ``e``, flattened per module (S.4.1).

    ``x [E, N, n]`` integers, ``y [E, N]`` labels, ``mask [E, N]`` bool (the group).
    Returns ``{module: [E, P_module]}`` float32 plus ``"all"`` (every parameter), in
    ``named_parameters()`` order. A member with an empty group gets a NaN row.
    ``chunk`` = examples per member per forward; gradients accumulate over chunks.
    """
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    mask = mask.to(torch.bool)
    count = mask.sum(1)  # [E]
    denom = count.clamp(min=1).to(params[0].dtype)  # [E]
    x, y, mask = _group_first(x, y, mask)
    grads = [torch.zeros_like(p) for p in params]
    for s in range(0, x.shape[1], chunk):
        with torch.enable_grad():  # callers may sit inside an evaluation's no_grad
            logits = model(x[:, s : s + chunk])  # [E, b, k]
            E, b, k = logits.shape
            ce = F.cross_entropy(logits.reshape(E * b, k), y[:, s : s + chunk].reshape(-1),
                                 reduction="none").view(E, b)
            ce = torch.where(mask[:, s : s + chunk], ce, torch.zeros_like(ce))
            loss = (ce.sum(1) / denom).sum()  # Σ_e (chunk's share of member e's mean loss)
            parts = torch.autograd.grad(loss, params, allow_unused=True)
        for acc, g in zip(grads, parts, strict=True):
            if g is not None:
                acc += g
    out: dict[str, list[torch.Tensor]] = {ALL: []}
    for (name, _), g in zip(named, grads, strict=True):
        flat = g.reshape(g.shape[0], -1)  # [E, P_param]
        out.setdefault(module_of(name), []).append(flat)
        out.setdefault(ALL, []).append(flat)
    empty = (count == 0).unsqueeze(1)  # [E, 1]
    return {m: torch.cat(fs, 1).masked_fill(empty, float("nan")) for m, fs in out.items()}


def conflict_metrics(
    g_plus: dict[str, torch.Tensor], g_minus: dict[str, torch.Tensor], r: torch.Tensor
) -> dict[str, dict[str, torch.Tensor]]:
    """Per module, ``[E]`` float64 tensors (S.4.1–2):

    ``cos`` = cos(g+, g−); ``norm_plus`` ‖g+‖, ``norm_minus`` ‖g−‖; ``amplification``
    ‖g−‖/‖g+‖; ``r``; ``odds`` r/(1−r) (what amplification is compared to: at
    ``amplification == odds`` the groups pull equally); ``share_plus`` r‖g+‖ and
    ``share_minus`` (1−r)‖g−‖, the groups' shares of the full mean-loss gradient
    ``g = r·g+ + (1−r)·g−``. NaN propagates from empty groups.
    """
    r = r.double()
    out: dict[str, dict[str, torch.Tensor]] = {}
    for m in g_plus:
        gp, gm = g_plus[m].double(), g_minus[m].double()  # [E, P]
        n_p, n_m = gp.norm(dim=1), gm.norm(dim=1)  # [E]
        out[m] = {
            "cos": (gp * gm).sum(1) / (n_p * n_m),
            "norm_plus": n_p,
            "norm_minus": n_m,
            "amplification": n_m / n_p,
            "r": r,
            "odds": r / (1 - r),
            "share_plus": r * n_p,
            "share_minus": (1 - r) * n_m,
        }
    return out


def gradient_conflict(model: torch.nn.Module, data, chunk: int = 2048) -> pd.DataFrame:
    """Gradient conflict and amplification of every member on its own training set (S.4.1–2).

    ``data`` has ``train_x [E, N, n]``, ``train_y [E, N]``, ``train_consistent [E, N]``
    (e.g. :class:`rulelab.train.data.EnsembleData`). ``r`` is each member's exact share of
    consistent examples. Returns a tidy frame, one row per (member, module), with the columns
    of :func:`conflict_metrics`; members with an empty group (r = 0 or 1) have NaN there.
    """
    cons = data.train_consistent.to(torch.bool)
    g_plus = group_gradients(model, data.train_x, data.train_y, cons, chunk)
    g_minus = group_gradients(model, data.train_x, data.train_y, ~cons, chunk)
    r = cons.double().mean(1)  # [E]
    metrics = conflict_metrics(g_plus, g_minus, r)
    frames = []
    for module, stats in metrics.items():
        cols = {k: v.cpu().numpy() for k, v in stats.items()}
        frames.append(pd.DataFrame({"member": range(len(r)), "module": module, **cols}))
    return pd.concat(frames, ignore_index=True)
