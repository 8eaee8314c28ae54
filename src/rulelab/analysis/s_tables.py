"""Study S analyses as tidy tables over one loaded ensemble (SPEC S.4.4–S.4.5).

Glue between the tensor-level analyses and the store: choose the examples (adv sequences and
their aligned twins; held-out val sequences for fingerprints), run one batched call over all
members, and flatten the ``[E, …]`` grids to one row per member × cell.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from rulelab.analysis.circuits import fingerprints
from rulelab.analysis.patching import patch_grid
from rulelab.analysis.twins import aligned_twins


def twin_batch(trainer, n: int = 256, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """The first ``n`` adv sequences of each member that have an aligned twin: ``[E, n, seq]``.

    ``n`` shrinks to the smallest count of valid twins over members (they share shapes).
    """
    cfg, data = trainer.cfg, trainer.data
    origs, twins = [], []
    for e in range(trainer.n_members):
        x = data.adv_x[e].cpu().numpy()
        twin, ok = aligned_twins(x, cfg.label_mod, cfg.shortcut, cfg.vocab,
                                 np.random.default_rng(seed))
        origs.append(x[ok])
        twins.append(twin[ok])
    n = min(n, *(len(o) for o in origs))
    stack = lambda arrs: torch.from_numpy(np.stack([a[:n] for a in arrs])).to(trainer.device)  # noqa: E731
    x_orig, x_twin = stack(origs), stack(twins)
    y = (x_orig.sum(-1) % cfg.label_mod).long()
    return x_orig, x_twin, y


def patching_table(trainer, n: int = 256) -> pd.DataFrame:
    """Rows ``member, kind, layer, pos, head, value`` (``pos``/``head`` −1 where pooled)."""
    x_orig, x_twin, y = twin_batch(trainer, n)
    with torch.no_grad():
        grids = patch_grid(trainer.model, x_orig, x_twin, y)
    rows = []
    for kind, grid in grids.items():
        if kind.startswith("ld_"):
            continue
        g = grid.cpu().numpy()
        for idx in np.ndindex(*g.shape):
            member, layer, *rest = idx
            pos = rest[0] if kind in ("resid_pre", "z", "mlp_out") else -1
            head = rest[-1] if kind in ("z", "z_all") else -1
            rows.append((member, kind, layer, pos, head, float(g[idx])))
    return pd.DataFrame(rows, columns=["member", "kind", "layer", "pos", "head", "value"])


def fingerprint_table(trainer, n: int = 1024) -> pd.DataFrame:
    """Per head: QK ρ, attention on x₁, OV parity ρ — measured on held-out val sequences."""
    with torch.no_grad():
        return fingerprints(trainer.model, trainer.data.val_x[:, :n])
