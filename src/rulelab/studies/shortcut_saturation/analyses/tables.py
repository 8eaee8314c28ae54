"""Study S analyses as tidy tables over one loaded ensemble (SPEC S.4.4–S.4.5).

Glue between the tensor-level analyses and the store, over one ensemble ``ens`` (a
:class:`rulelab.analysis.loading.LoadedEnsemble`, or the live trainer when tracked: ``model``,
``data``, ``cfg``, ``n_members``, ``device``): choose the examples (adv sequences and
their aligned twins; held-out val sequences for fingerprints), run one batched call over all
members, and flatten the ``[E, …]`` grids to one row per member × cell.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from rulelab.studies.shortcut_saturation.analyses.circuits import fingerprints
from rulelab.studies.shortcut_saturation.analyses.identity import identity_count, identity_flags
from rulelab.studies.shortcut_saturation.analyses.outcome import outcome_of
from rulelab.studies.shortcut_saturation.analyses.patching import patch_grid
from rulelab.studies.shortcut_saturation.analyses.saturation import known, saturated_rows
from rulelab.studies.shortcut_saturation.analyses.twins import aligned_twins


def twin_batch(ens, n: int = 256, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """The first ``n`` adv sequences of each member that have an aligned twin: ``[E, n, seq]``.

    ``n`` shrinks to the smallest count of valid twins over members (they share shapes).
    """
    cfg, data = ens.cfg, ens.data
    origs, twins = [], []
    for e in range(ens.n_members):
        x = data.adv_x[e].cpu().numpy()
        twin, ok = aligned_twins(x, cfg.label_mod, cfg.shortcut, cfg.vocab,
                                 np.random.default_rng(seed))
        origs.append(x[ok])
        twins.append(twin[ok])
    n = min(n, *(len(o) for o in origs))
    stack = lambda arrs: torch.from_numpy(np.stack([a[:n] for a in arrs])).to(ens.device)  # noqa: E731
    x_orig, x_twin = stack(origs), stack(twins)
    y = (x_orig.sum(-1) % cfg.label_mod).long()
    return x_orig, x_twin, y


def patching_table(ens, n: int = 256) -> pd.DataFrame:
    """Rows ``member, kind, layer, pos, head, value`` (``pos``/``head`` −1 where pooled)."""
    x_orig, x_twin, y = twin_batch(ens, n)
    with torch.no_grad():
        grids = patch_grid(ens.model, x_orig, x_twin, y, kind=ens.cfg.shortcut)
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


def patching_summary(frame: pd.DataFrame, runs: pd.DataFrame | None,
                     kinds=("z_all", "mlp_out_all"), by=("layers", "ratio", "epoch")
                     ) -> pd.DataFrame:
    """Patching cells (S.4.4) summarised over runs, **split by outcome** and as **medians**:
    the claims read from these grids are conditional on whether the run generalized, and a
    mean over runs is dragged by the few runs with a small twin–original gap.

    Columns: ``by``, ``outcome`` (:func:`outcome_of`), kind, layer, pos, head, ``n`` runs,
    ``n_nan`` runs without a score (gap below ``REL_GAP``), ``median`` over the others.
    """
    t = frame[frame["kind"].isin(kinds)].copy()
    t["outcome"] = outcome_of(runs, t["run_id"])
    keys = [c for c in by if c in t.columns] + ["outcome", "kind", "layer", "pos", "head"]
    grouped = t.groupby(keys, sort=True, dropna=False)["value"]
    out = grouped.agg(n="size", n_nan=lambda v: int(v.isna().sum()), median="median")
    return out.reset_index()


def fingerprint_table(ens, n: int = 1024) -> pd.DataFrame:
    """Per head: QK ρ, attention on x₁, OV parity ρ — measured on held-out val sequences."""
    with torch.no_grad():
        return fingerprints(ens.model, ens.data.val_x[:, :n])


GRADIENT_COLUMNS = ("cos", "amplification", "odds", "eps", "example_norm_plus",
                    "example_norm_minus", "norm_plus", "norm_minus")
ALL_SATURATED = "all_saturated"  # summary column: every run of the group has a saturated loss
MOSTLY_PINNED = "mostly_identity"  # summary column: ≥ half its runs identity-dominated (†)


def gradient_summary(frame: pd.DataFrame, by=("layers", "ratio", "epoch"),
                     module: str = "all") -> pd.DataFrame:
    """Gradient readings (S.4.1–2) per group of ``by``: ``n`` runs, the **median** over runs of
    each of :data:`GRADIENT_COLUMNS` present, ``saturated`` and ``identity_dominated`` as
    ``"k/n"``, :data:`ALL_SATURATED` and :data:`MOSTLY_PINNED` (bools).

    ``saturated`` counts runs whose training loss is saturated (:mod:`.analyses.saturation`:
    their gradients are rounding noise). They are left out of the medians — which are over
    all runs only where every run is saturated (then :data:`ALL_SATURATED`: the medians are
    noise too) — and out of ``identity_dominated``, which counts the other runs flagged *each
    on its own ε* (:mod:`.analyses.identity`, issue 21: ``eps < EPS_IDENTITY``, where
    ``g = r·g+ + (1−r)·g−`` alone forces amplification ≈ r/(1−r) and cos ≤ −0.9), with
    ``" (u undefined)"`` for runs whose ε is NaN (an empty group): those are neither flagged
    nor "not identity-dominated". Each run is in at most one count. :data:`MOSTLY_PINNED`: at
    least half of the runs the medians are over have a defined ε and are flagged — the mark
    (†) a printed median gets; set from the runs' flags, not from the median ε.

    Tables stored before issue 8 have no ``eps``: ``identity_dominated`` is then ``"?"``;
    tables stored before issue 11 have no flag: ``saturated`` is ``"?"`` and no run is left
    out.
    """
    t = frame[frame["module"] == module] if "module" in frame.columns else frame
    t = t.reset_index(drop=True)  # tables concatenated as stored repeat index labels
    keys = [c for c in by if c in t.columns]
    cols = [c for c in GRADIENT_COLUMNS if c in t.columns]
    if t.empty:
        return pd.DataFrame(columns=[*keys, "n", *cols, "saturated", "identity_dominated",
                                     ALL_SATURATED, MOSTLY_PINNED])
    noise = saturated_rows(t)
    grouped = t.groupby(keys, sort=True, dropna=False)
    rows = []
    for _, g in grouped:
        sat = noise[g.index]
        kept = g if sat.all() else g[~sat]  # medians over the runs whose gradients mean something
        has_eps = "eps" in t.columns
        flags = identity_flags(g.loc[~sat, "eps"]) if has_eps else pd.Series(dtype="boolean")
        rows.append({**kept[cols].median().to_dict(),
                     "saturated": f"{int(sat.sum())}/{len(g)}" if known(t) else "?",
                     "identity_dominated": (identity_count(g["eps"], keep=~sat.to_numpy())
                                            if has_eps else "?"),
                     ALL_SATURATED: bool(sat.all()),
                     # half or more of the runs behind the medians: the median is theirs
                     MOSTLY_PINNED: bool(len(flags) and 2 * flags.fillna(False).sum()
                                         >= len(flags))})
    out = pd.DataFrame(rows, index=grouped.size().index)
    out.insert(0, "n", grouped.size())
    return out.reset_index()
