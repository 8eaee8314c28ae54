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

**Near saturation (issues 8, 21)** ``g = r·g+ + (1−r)·g−`` pins amplification to r/(1−r)
and conflict to −1 whenever ``ε = ‖g‖/(r‖g+‖)`` is small (:mod:`.analyses.identity`: the
tight bound cos ≤ −√(1 − ε²)), so every reading carries ``eps`` and, per run,
``identity_dominated = eps < EPS_IDENTITY`` — ``<NA>`` in the frame where ε is NaN
(undefined, an empty group), not False.

**Saturated loss (issue 11)** Each reading also carries ``loss_plus/minus``, the groups'
mean cross-entropy, and ``saturated`` where either is below ``LOSS_SATURATED``
(:mod:`.analyses.saturation`): the training set is fit past float32's resolution and the
gradients are rounding residue, so cos, amplification and ε mean nothing there.

Beside the group-mean gradients, ``example_norm_plus/minus`` are each group's mean
*per-example* gradient norm, ``mean_i ‖∇ℓ_i‖`` over a sample of up to ``max_examples`` (256)
examples per group and member — the first ones in the member's training order, which is a
seeded shuffle. ``‖g±‖ ≤ example_norm±`` (triangle inequality); their ratio says how much the
examples' gradients cancel inside a group, which the group means alone cannot show.
"""

from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from rulelab.engine.per_example import cross_entropy
from rulelab.studies.shortcut_saturation.analyses.identity import (  # noqa: F401 (re-export)
    EPS_IDENTITY,
    identity_bounds,
    identity_flags,
)
from rulelab.studies.shortcut_saturation.analyses.saturation import SATURATED, is_saturated

ALL = "all"
MAX_EXAMPLES = 256  # per group and member, for the per-example gradient norms


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
    return group_gradients_and_loss(model, x, y, mask, chunk)[0]


def group_gradients_and_loss(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    chunk: int = 2048,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """:func:`group_gradients` and, from the same forward passes, each member's mean loss over
    its group: ``[E]`` float64 (sums of the float32 per-example losses it differentiates, so a
    saturated loss reads as it rounds there), NaN for an empty group."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    mask = mask.to(torch.bool)
    count = mask.sum(1)  # [E]
    denom = count.clamp(min=1).to(params[0].dtype)  # [E]
    x, y, mask = _group_first(x, y, mask)
    grads = [torch.zeros_like(p) for p in params]
    total = torch.zeros(x.shape[0], dtype=torch.float64, device=x.device)  # [E]
    for s in range(0, x.shape[1], chunk):
        with torch.enable_grad():  # callers may sit inside an evaluation's no_grad
            logits = model(x[:, s : s + chunk])  # [E, b, k]
            ce = cross_entropy(logits, y[:, s : s + chunk])
            ce = torch.where(mask[:, s : s + chunk], ce, torch.zeros_like(ce))
            loss = (ce.sum(1) / denom).sum()  # Σ_e (chunk's share of member e's mean loss)
            parts = torch.autograd.grad(loss, params, allow_unused=True)
        total += ce.detach().double().sum(1)
        for acc, g in zip(grads, parts, strict=True):
            if g is not None:
                acc += g
    out: dict[str, list[torch.Tensor]] = {ALL: []}
    for (name, _), g in zip(named, grads, strict=True):
        flat = g.reshape(g.shape[0], -1)  # [E, P_param]
        out.setdefault(module_of(name), []).append(flat)
        out.setdefault(ALL, []).append(flat)
    empty = (count == 0).unsqueeze(1)  # [E, 1]
    mean_loss = torch.where(count > 0, total / count.clamp(min=1).double(), torch.nan)
    return ({m: torch.cat(fs, 1).masked_fill(empty, float("nan")) for m, fs in out.items()},
            mean_loss)


def example_gradient_norms(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    max_examples: int = MAX_EXAMPLES,
    chunk: int | None = None,
) -> dict[str, torch.Tensor]:
    """``mean_i ‖∇θ ℓ_i‖`` over the first ``max_examples`` examples of each member's group.

    ``x [E, N, n], y [E, N], mask [E, N]`` as in :func:`group_gradients`. Returns
    ``{module: [E]}`` float64 plus ``"all"``; NaN for an empty group. Per-example gradients
    come from ``torch.func`` — ``vmap`` over examples of ``grad`` of ``Σ_e ℓ_e`` (one example
    per member; member e's slice receives ``∇ℓ_e`` alone) — ``chunk`` examples per member at a
    time, and are reduced to norms at once, so memory stays ``chunk · E · P`` floats (default:
    at most 32 examples and about 50M floats per chunk).
    """
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    params = {n: p.detach() for n, p in named}
    if chunk is None:
        chunk = max(1, min(32, 50_000_000 // max(1, sum(p.numel() for _, p in named))))
    modules = [module_of(n) for n, _ in named]
    mask = mask.to(torch.bool)
    x, y, mask = _group_first(x, y, mask)
    x, y, mask = x[:, :max_examples], y[:, :max_examples], mask[:, :max_examples]
    if x.shape[1] == 0:  # every member's group is empty
        nan = torch.full((x.shape[0],), torch.nan, dtype=torch.float64, device=x.device)
        return {m: nan.clone() for m in [ALL, *modules]}

    def loss(p, xs, ys):  # xs [E, n], ys [E]: one example per member
        logits = functional_call(model, p, (xs[:, None],))[:, 0]  # [E, k]
        return F.cross_entropy(logits, ys, reduction="sum")

    def norms(p, xs, ys):
        g = grad(loss)(p, xs, ys)
        sq: dict[str, torch.Tensor] = {}
        for (name, _), module in zip(named, modules, strict=True):
            gn = g[name]  # [E, …]: a norm over the non-member axes, no reshaping copy
            part = torch.linalg.vector_norm(gn, dim=tuple(range(1, gn.dim()))).double() ** 2
            sq[module] = sq[module] + part if module in sq else part
        sq[ALL] = sum(sq.values())
        return {m: v.sqrt() for m, v in sq.items()}

    with torch.enable_grad():
        per = vmap(norms, in_dims=(None, 1, 1), chunk_size=chunk)(params, x, y)  # {m: [S, E]}
    w = mask.T.double()  # [S, E]
    count = w.sum(0)  # [E]
    return {m: torch.where(count > 0, (v * w).sum(0) / count.clamp(min=1), torch.nan)
            for m, v in per.items()}


def conflict_metrics(
    g_plus: dict[str, torch.Tensor], g_minus: dict[str, torch.Tensor], r: torch.Tensor
) -> dict[str, dict[str, torch.Tensor]]:
    """Per module, ``[E]`` float64 tensors (S.4.1–2):

    ``cos`` = cos(g+, g−); ``norm_plus`` ‖g+‖, ``norm_minus`` ‖g−‖; ``amplification``
    ‖g−‖/‖g+‖; ``r``; ``odds`` r/(1−r) (what amplification is compared to: at
    ``amplification == odds`` the groups pull equally); ``share_plus`` r‖g+‖ and
    ``share_minus`` (1−r)‖g−‖, the groups' shares of the full mean-loss gradient
    ``g = r·g+ + (1−r)·g−``; ``norm_full`` ‖g‖ (computed from that identity, ``r`` being the
    member's actual consistent share); ``eps`` = ‖g‖/(r‖g+‖) and ``identity_dominated`` =
    ``eps < EPS_IDENTITY`` (module docstring). NaN propagates from empty groups; a bool tensor
    cannot hold "undefined", so the flag is False there and :func:`gradient_conflict`'s frame
    makes it ``<NA>``.
    """
    r = r.double()
    out: dict[str, dict[str, torch.Tensor]] = {}
    for m in g_plus:
        gp, gm = g_plus[m].double(), g_minus[m].double()  # [E, P]
        n_p, n_m = gp.norm(dim=1), gm.norm(dim=1)  # [E]
        n_full = (r[:, None] * gp + (1 - r[:, None]) * gm).norm(dim=1)  # [E] ‖g‖
        eps = n_full / (r * n_p)
        out[m] = {
            "cos": (gp * gm).sum(1) / (n_p * n_m),
            "norm_plus": n_p,
            "norm_minus": n_m,
            "amplification": n_m / n_p,
            "r": r,
            "odds": r / (1 - r),
            "share_plus": r * n_p,
            "share_minus": (1 - r) * n_m,
            "norm_full": n_full,
            "eps": eps,
            "identity_dominated": eps < EPS_IDENTITY,
        }
    return out


def gradient_conflict(
    model: torch.nn.Module, data, chunk: int = 2048, max_examples: int = MAX_EXAMPLES
) -> pd.DataFrame:
    """Gradient conflict and amplification of every member on its own training set (S.4.1–2).

    ``data`` has ``train_x [E, N, n]``, ``train_y [E, N]``, ``train_consistent [E, N]``
    (e.g. :class:`.data.EnsembleData`). ``r`` is each member's exact share of
    consistent examples. Returns a tidy frame, one row per (member, module), with the columns
    of :func:`conflict_metrics` plus ``example_norm_plus/minus`` (:func:`example_gradient_norms`
    on up to ``max_examples`` per group; 0 skips them: NaN), ``loss_plus/minus`` (each group's
    mean loss, from the forward passes of :func:`group_gradients_and_loss`) and ``saturated``
    (either below ``LOSS_SATURATED``, the same for every module of a member); members with an
    empty group (r = 0 or 1) have NaN there.
    """
    cons = data.train_consistent.to(torch.bool)
    x, y = data.train_x, data.train_y
    g_plus, loss_plus = group_gradients_and_loss(model, x, y, cons, chunk)  # …, [E]
    g_minus, loss_minus = group_gradients_and_loss(model, x, y, ~cons, chunk)
    r = cons.double().mean(1)  # [E]
    metrics = conflict_metrics(g_plus, g_minus, r)
    for stats in metrics.values():
        stats.update(loss_plus=loss_plus, loss_minus=loss_minus,
                     **{SATURATED: is_saturated(loss_plus, loss_minus)})
    for key, group in (("example_norm_plus", cons), ("example_norm_minus", ~cons)):
        norms = (example_gradient_norms(model, x, y, group, max_examples) if max_examples > 0
                 else {m: torch.full_like(r, torch.nan) for m in metrics})
        for m, stats in metrics.items():
            stats[key] = norms[m]
    frames = []
    for module, stats in metrics.items():
        cols = {k: v.cpu().numpy() for k, v in stats.items()}
        cols["identity_dominated"] = identity_flags(cols["eps"]).array  # NaN ε: <NA>
        frames.append(pd.DataFrame({"member": range(len(r)), "module": module, **cols}))
    return pd.concat(frames, ignore_index=True)
