"""Activation ablation of heads and MLPs, every member and component at once (SPEC S.4.3).

A component is one head's slice of ``blocks.{l}.attn.hook_z`` (``head{h}``) or a block's
``blocks.{l}.hook_mlp_out`` (``mlp``). It is replaced by zero (``zero``) or by its training-set
mean (``mean``: per member and per position, over that member's whole training set), at the
CLS position only (``cls``, position 0) or at every position (``all``), and the change in val
and adv accuracy is recorded (paper1_shortcuts.md §6.3: a shortcut component hurts val more
than adv; a rule component hurts both). Over checkpoints this is "circuit evolution".

Batching: the evaluation batch is replicated once per ablation along the batch axis,
``[E, C·b, n]``, and each hook rewrites only its own copy ``c``; all members and all ``C``
ablations run in one forward per chunk of ``b`` examples. The loop over ablations inside a
hook is over components, never over members. Method ``none`` is a control that rewrites
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch

METHODS = ("zero", "mean", "none")
WHERE = ("cls", "all")


@dataclass(frozen=True)
class Ablation:
    """One ablation: ``component`` is ``head{h}`` or ``mlp`` of block ``layer``."""

    layer: int
    component: str
    method: str = "zero"
    where: str = "cls"

    @property
    def hook_name(self) -> str:
        if self.component == "mlp":
            return f"blocks.{self.layer}.hook_mlp_out"
        return f"blocks.{self.layer}.attn.hook_z"

    @property
    def head(self) -> int | None:
        return None if self.component == "mlp" else int(self.component.removeprefix("head"))


def components(model) -> list[tuple[int, str]]:
    """``(layer, component)`` for every head and MLP of the model, in forward order."""
    out = []
    for layer, block in enumerate(model.blocks):
        out += [(layer, f"head{h}") for h in range(block.attn.n_heads)]
        if block.mlp is not None:
            out.append((layer, "mlp"))
    return out


def ablated_hook_names(model) -> list[str]:
    """The hook points S.4.3 ablates: every ``hook_z`` and ``hook_mlp_out``."""
    return [n for n in model.hook_names if n.endswith(("attn.hook_z", "hook_mlp_out"))]


@torch.no_grad()
def activation_means(
    model, x: torch.Tensor, names: Sequence[str] | None = None, chunk: int = 2048
) -> dict[str, torch.Tensor]:
    """Per-member, per-position means over ``x [E, N, n]`` in one cached pass per chunk.

    ``{hook: [E, pos, …]}``: ``hook_z`` → ``[E, T, H, d_head]``, ``hook_mlp_out`` → ``[E, T, d]``.
    """
    names = list(names if names is not None else ablated_hook_names(model))
    sums: dict[str, torch.Tensor] = {}
    for s in range(0, x.shape[1], chunk):
        _, cache = model.run_with_cache(x[:, s : s + chunk], names_filter=names)
        for n in names:
            part = cache[n].double().sum(1)  # [E, T, …]
            sums[n] = sums[n] + part if n in sums else part
    return {n: (v / x.shape[1]).float() for n, v in sums.items()}


def _hook_for(ablations: list[tuple[int, Ablation]], C: int, means):
    """A hook rewriting copy ``c`` of the replicated batch for each ``(c, ablation)``.

    It writes in place: it only runs under ``no_grad`` and the activation feeds nothing but
    the hook's output, so a copy would only cost memory.
    """

    def hook(act: torch.Tensor, hook) -> torch.Tensor:
        out = act.unflatten(1, (C, -1))  # [E, C, b, T, …], a view: splitting one axis
        for c, ab in ablations:
            pos = slice(0, 1) if ab.where == "cls" else slice(None)
            idx = (slice(None), c, slice(None), pos) + (() if ab.head is None else (ab.head,))
            if ab.method == "zero":
                out[idx] = 0.0
            elif ab.method == "mean":
                m = means[ab.hook_name][(slice(None), pos)]  # [E, T', …]
                if ab.head is not None:
                    m = m[:, :, ab.head]  # [E, T', d_head]
                out[idx] = m.unsqueeze(1).to(out.dtype)  # broadcast over the b examples
        return out.flatten(1, 2)  # [E, C·b, T, …]

    return hook


@torch.no_grad()
def ablated_logits(
    model, x: torch.Tensor, ablations: Sequence[Ablation], means=None
) -> torch.Tensor:
    """``x [E, b, n]`` → logits ``[E, C, b, k]`` under each of the ``C`` ablations."""
    for ab in ablations:
        if ab.method not in METHODS or ab.where not in WHERE:
            raise ValueError(f"ablation {ab}: method must be one of {METHODS}, "
                             f"where one of {WHERE}")
        if ab.method == "mean" and (means is None or ab.hook_name not in means):
            raise ValueError(f"ablation {ab}: mean ablation needs activation_means()")
    C, (E, b, n) = len(ablations), x.shape
    by_hook: dict[str, list[tuple[int, Ablation]]] = {}
    for c, ab in enumerate(ablations):
        if ab.method != "none":
            by_hook.setdefault(ab.hook_name, []).append((c, ab))
    hooks = [(name, _hook_for(abl, C, means)) for name, abl in by_hook.items()]
    x_rep = x.unsqueeze(1).expand(E, C, b, n).reshape(E, C * b, n)  # [E, C·b, n]
    with model.hooks(hooks):
        logits = model(x_rep)  # [E, C·b, k]
    return logits.unflatten(1, (C, b))


@torch.no_grad()
def ablated_accuracy(
    model, x: torch.Tensor, y: torch.Tensor, ablations: Sequence[Ablation], means=None,
    max_batch: int = 4096,
) -> torch.Tensor:
    """Accuracy ``[E, C]`` of every member under each ablation on ``x [E, N, n], y [E, N]``.

    ``max_batch`` bounds the examples per member per forward (``C·b``): memory, not results.
    """
    C = len(ablations)
    if C == 0:
        return torch.zeros(x.shape[0], 0, dtype=torch.float64, device=x.device)
    b = max(1, max_batch // C)
    correct = torch.zeros(x.shape[0], C, dtype=torch.float64, device=x.device)
    for s in range(0, x.shape[1], b):
        logits = ablated_logits(model, x[:, s : s + b], ablations, means)  # [E, C, b, k]
        correct += (logits.argmax(-1) == y[:, None, s : s + b]).sum(-1).double()
    return correct / x.shape[1]


@torch.no_grad()
def _accuracy(model, x: torch.Tensor, y: torch.Tensor, chunk: int) -> torch.Tensor:
    hits = [(model(x[:, s : s + chunk]).argmax(-1) == y[:, s : s + chunk]).double().sum(1)
            for s in range(0, x.shape[1], chunk)]
    return torch.stack(hits).sum(0) / x.shape[1]  # [E]


def ablation_table(
    model, data, methods: Sequence[str] = ("zero", "mean"), where: Sequence[str] = WHERE,
    max_batch: int = 4096,
) -> pd.DataFrame:
    """Δ val and Δ adv accuracy for every (member, layer, component, method, where) (S.4.3).

    ``data`` has ``train_x`` (for the means), ``val_x/val_y`` and ``adv_x/adv_y``, all
    ``[E, N, …]``. Columns: member, layer, component, method, where, val_acc, adv_acc,
    base_val_acc, base_adv_acc, d_val_acc, d_adv_acc (ablated − base, so a drop is < 0).
    """
    was_training = model.training
    model.eval()
    try:
        means = activation_means(model, data.train_x) if "mean" in methods else None
        abl = [Ablation(layer, comp, m, w)
               for layer, comp in components(model) for m in methods for w in where]
        rows = []
        for split, x, y in (("val", data.val_x, data.val_y), ("adv", data.adv_x, data.adv_y)):
            base = _accuracy(model, x, y, max_batch).cpu()  # [E]
            acc = ablated_accuracy(model, x, y, abl, means, max_batch).cpu()  # [E, C]
            rows.append((split, base, acc))
    finally:
        model.train(was_training)
    E = rows[0][1].shape[0]
    frame = pd.DataFrame(
        [dict(member=e, layer=ab.layer, component=ab.component, method=ab.method, where=ab.where)
         for e in range(E) for ab in abl]
    )
    for split, base, acc in rows:
        frame[f"{split}_acc"] = acc.numpy().reshape(-1)  # member-major, as the rows above
        frame[f"base_{split}_acc"] = base.repeat_interleave(len(abl)).numpy()
        frame[f"d_{split}_acc"] = frame[f"{split}_acc"] - frame[f"base_{split}_acc"]
    return frame
