"""Cross-split activation patching: aligned twin (clean) → adversarial original (SPEC S.4.4).

The clean run is the aligned twin (:func:`.analyses.twins.aligned_twins`), the corrupted
run the adversarial original; positions line up because the twin differs in two elements only.
Each activation is patched from the twin's cache into the original's run, TransformerLens style
(``generic_activation_patch``), and scored by the logit difference

    LD = logit[y] − logit[s],   y = label, s = the original's shortcut class.

For k = 2 the shortcut class is the only other class; for k = 3 it is the class the shortcut
points to (not the runner-up logit). Normalised per member so the twin scores 1 and the
original 0, as a **ratio of batch means** (per-example ratios blow up where the twin barely
moves LD):

    score = (mean_b LD_patched − mean_b LD_orig) / (mean_b LD_twin − mean_b LD_orig)

and NaN where the twin barely moves LD *relative to its size*:
``|LD_twin − LD_orig| < rel_gap · (|LD_twin| + |LD_orig|)``, ``rel_gap`` = :data:`REL_GAP`
(0.05: the gap must be at least 5% of the two LDs' magnitudes; below that the denominator is
a small difference of large numbers and a patch moving LD by a rounding-level amount would
read as a large share of it). An absolute floor (the old 1e-6) ignores scale: with LDs near
10 a gap of 1e-3 passed it, and a patch moving LD by 0.01 read as a 10× restoration.

Patched copies are stacked along the batch axis (``c`` copies of the original per forward,
``c·B ≤ max_batch``), never looped over members: every forward runs all ``E`` members at once.
Summaries over runs are medians split by the run's outcome (``generalized``), since the
claims about these grids are conditional on it (:func:`.analyses.tables.
patching_summary`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch

from rulelab.studies.shortcut_saturation.task import shortcut_of

# (hook name, position or None for all positions, head or None for all heads). The hook's
# activation must be laid out [E, batch, pos, ...]: hook_resid_*, hook_mlp_out, hook_attn_out,
# attn.hook_z/q/k/v (head = the axis after pos).
Patch = tuple[str, int | None, int | None]


def logit_diff(logits: torch.Tensor, y: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``logits [..., k]``, ``y, s`` broadcastable to ``[...]`` → ``logit[y] − logit[s]``."""
    lead = logits.shape[:-1]  # gather does not broadcast: expand y, s to the logits' lead
    pick = torch.stack([y.expand(lead), s.expand(lead)], dim=-1).to(logits.device).long()
    both = logits.gather(-1, pick)
    return both[..., 0] - both[..., 1]


REL_GAP = 0.05


def normalise(
    ld: torch.Tensor, ld_orig: torch.Tensor, ld_twin: torch.Tensor, rel_gap: float = REL_GAP
) -> torch.Tensor:
    """Batch-mean LDs ``[..., E]`` → score with twin = 1, original = 0; NaN where
    ``|LD_twin − LD_orig| < rel_gap · (|LD_twin| + |LD_orig|)`` or the gap is 0 (module doc)."""
    gap = ld_twin - ld_orig
    score = (ld - ld_orig) / gap
    small = (gap.abs() < rel_gap * (ld_twin.abs() + ld_orig.abs())) | (gap == 0)
    return torch.where(small, torch.full_like(score, float("nan")), score)


def _index(pos: int | None, head: int | None) -> tuple:
    """Index of one copy's activation ``[E, B, pos, (head), ...]``."""
    idx: tuple = (slice(None), slice(None), slice(None) if pos is None else pos)
    return idx if head is None else (*idx, head)


@torch.no_grad()
def run_patched(
    model,
    x_orig: torch.Tensor,
    twin_cache: dict[str, torch.Tensor],
    patch_sets: Sequence[Sequence[Patch]],
    y: torch.Tensor,
    s: torch.Tensor,
    *,
    max_batch: int = 4096,
) -> torch.Tensor:
    """Per-example LD of the original with each patch set applied → ``[S, E, B]``.

    All patches of one set are applied together in one copy of the batch; an empty set is the
    unpatched original. ``twin_cache`` holds the twin's activations ``[E, B, ...]``.
    """
    E, B, _ = x_orig.shape
    per = max(1, max_batch // B)  # copies of the batch per forward
    out = []
    for start in range(0, len(patch_sets), per):
        chunk = patch_sets[start : start + per]
        c = len(chunk)
        by_name: dict[str, list[tuple[int, int | None, int | None]]] = defaultdict(list)
        for i, patches in enumerate(chunk):
            for name, pos, head in patches:
                by_name[name].append((i, pos, head))

        def patch_hook(act, hook, by_name=by_name, c=c):
            act = act.clone().unflatten(1, (c, B))  # [E, c, B, pos, ...]
            clean = twin_cache[hook.name]  # [E, B, pos, ...]
            for i, pos, head in by_name[hook.name]:
                idx = _index(pos, head)
                act[:, i][idx] = clean[idx]
            return act.flatten(1, 2)  # [E, c·B, pos, ...]

        xs = x_orig.repeat(1, c, 1)  # [E, c·B, n], copy-major
        with model.hooks([(list(by_name), patch_hook)]):
            logits = model(xs).unflatten(1, (c, B))  # [E, c, B, k]
        out.append(logit_diff(logits, y[:, None], s[:, None]).transpose(0, 1))  # [c, E, B]
    return torch.cat(out) if out else x_orig.new_zeros((0, E, B), dtype=torch.float)


def _shortcut(kind: str | None, x_orig: torch.Tensor, k: int) -> torch.Tensor:
    if kind is None:
        raise ValueError("pass shortcut= (the classes) or kind= (the rule: max or first)")
    s = shortcut_of(x_orig.cpu().numpy(), k, kind)
    return torch.as_tensor(np.asarray(s), device=x_orig.device)


@torch.no_grad()
def patch_grid(
    model,
    x_orig: torch.Tensor,
    x_twin: torch.Tensor,
    y: torch.Tensor,
    shortcut: torch.Tensor | None = None,
    *,
    max_batch: int = 4096,
    rel_gap: float = REL_GAP,
    kind: str | None = None,
) -> dict[str, torch.Tensor]:
    """Twin → original patching grids, normalised (twin 1, original 0) per member (S.4.4).

    ``x_orig, x_twin [E, B, n]`` (no CLS), ``y [E, B]`` labels; ``shortcut [E, B]`` the
    original's shortcut class (default: the rule ``kind``, the run's ``shortcut``, applied to
``x_orig``).
    Positions count the CLS token (pos 0 = CLS, pos j = x_j). Returns:

    - ``resid_pre [E, L, T]``: ``blocks.l.hook_resid_pre`` at one position;
    - ``z [E, L, T, H]``: ``blocks.l.attn.hook_z`` of one head at one (query) position;
    - ``z_all [E, L, H]``: one head's output at all positions;
    - ``mlp_out [E, L, T]`` and ``mlp_out_all [E, L]`` (only when the model has MLPs);
    - ``ld_orig, ld_twin [E]``: batch-mean logit differences of the two unpatched runs.

    A member whose twin–original gap is below ``rel_gap`` of their size gets NaN scores.
    """
    if x_orig.shape != x_twin.shape or x_orig.dim() != 3 or y.shape != x_orig.shape[:2]:
        raise ValueError("need x_orig, x_twin [E, B, n] and y [E, B]")
    cfg = model.cfg
    L, H, T, k = cfg.layers, cfg.heads, x_orig.shape[-1] + 1, cfg.label_mod
    s = _shortcut(kind, x_orig, k) if shortcut is None else shortcut.to(x_orig.device)
    if torch.any(s == y):
        raise ValueError("patching needs adversarial originals (shortcut ≠ label)")
    has_mlp = bool(cfg.d_mlp)

    resid = [f"blocks.{l}.hook_resid_pre" for l in range(L)]
    z = [f"blocks.{l}.attn.hook_z" for l in range(L)]
    mlp = [f"blocks.{l}.hook_mlp_out" for l in range(L)] if has_mlp else []
    twin_logits, cache = model.run_with_cache(x_twin, names_filter=resid + z + mlp)
    ld_twin = logit_diff(twin_logits, y, s).mean(1)  # [E]
    ld_orig = logit_diff(model(x_orig), y, s).mean(1)  # [E]

    # One flat list of patch sets; each grid is a reshape of a contiguous slice of it.
    layout: list[tuple[str, tuple[int, ...]]] = []
    sets: list[list[Patch]] = []

    def add(key: str, shape: tuple[int, ...], patches: list[list[Patch]]) -> None:
        layout.append((key, shape))
        sets.extend(patches)

    add("resid_pre", (L, T), [[(resid[l], p, None)] for l in range(L) for p in range(T)])
    add("z", (L, T, H), [[(z[l], p, h)] for l in range(L) for p in range(T) for h in range(H)])
    add("z_all", (L, H), [[(z[l], None, h)] for l in range(L) for h in range(H)])
    if has_mlp:
        add("mlp_out", (L, T), [[(mlp[l], p, None)] for l in range(L) for p in range(T)])
        add("mlp_out_all", (L,), [[(mlp[l], None, None)] for l in range(L)])

    ld = run_patched(model, x_orig, cache, sets, y, s, max_batch=max_batch).mean(-1)  # [S, E]
    score = normalise(ld, ld_orig, ld_twin, rel_gap).T  # [E, S]
    out, start = {}, 0
    for key, shape in layout:
        size = int(np.prod(shape))
        out[key] = score[:, start : start + size].reshape(-1, *shape)  # [E, *shape]
        start += size
    out["ld_orig"], out["ld_twin"] = ld_orig, ld_twin
    return out
