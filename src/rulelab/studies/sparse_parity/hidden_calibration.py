"""Hidden progress against its null at a preset's or lab's setting (``rulelab calibrate
sparse-parity``; issue 21; the band: :mod:`.hidden_null`).

The null is the one the issue measured: random k-subsets *off* the support, in runs trained at
the setting (each (n, k) of the configs, the configs' width, optimizer, learning rate, batch,
loss and evaluation schedule; fresh seeds and supports no run uses). Each held-out off-support
subset ``H`` is read exactly as the support is — its share's rise before visible progress,
against the band of the other off-support subsets of its run (the family without ``H``) — and
the false-positive rate is the share of them called. A subset sharing a coordinate with S is
not a null (it shares S's real rise), so the held-out subsets, like the family, are disjoint
from S. The power is the share of the runs' true supports called, before visible progress.
Beside it, the reading before issue 21 (support mass +10% before visible progress) on the same
held-out subsets.

The runs stop once every member shows visible progress (eval acc ≥ 60%) or at the config's
last epoch: the call reads nothing after it. Training, not a simulation, because the null is
the dynamics of SGD on the weights; a few members per (n, k) keep it near a minute on a CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from rulelab.analysis.calibration import NullCheck
from rulelab.studies.sparse_parity.hidden_null import (
    MIN_NULL_SUBSETS,
    conformal_band,
    hidden_reading,
    null_subsets,
    subset_shares,
)
from rulelab.studies.sparse_parity.metrics import coordinate_mass
from rulelab.studies.sparse_parity.summary import VISIBLE_ACC

MEMBERS = 2  # runs per (n, k) of the configs
SEED0 = 10_000  # model and data seeds of the simulated runs: no recipe uses them


def record(cfg, members: int = MEMBERS, seed: int = 0) -> dict:
    """Train ``members`` runs of ``cfg``'s setting (fresh seeds) to visible progress; return
    ``steps [T]``, per-coordinate mass ``[T, E, n]``, eval accuracy ``[T, E]`` and the
    supports ``[E, k]``."""
    from rulelab.studies.sparse_parity.trainer import SparseParityTrainer

    base = cfg.flat()
    configs = [type(cfg)(**{**base, "seed": SEED0 + seed * members + i,
                            "data_seed": SEED0 + seed * members + i}) for i in range(members)]
    tr = SparseParityTrainer(configs)
    steps, mass, acc = [], [], []

    def take(metrics) -> None:
        steps.append(tr.epoch * cfg.steps_per_epoch)
        mass.append(coordinate_mass(tr.model.first_layer()).cpu())
        acc.append(metrics["eval", "acc"].double())

    take(tr.evaluate())
    while tr.epoch < tr.total_epochs:
        tr.train_epoch()
        if tr.is_eval_epoch():
            take(tr.evaluate())
            if bool((torch.stack(acc).amax(0) >= VISIBLE_ACC).all()):
                break
    return {"steps": steps, "mass": torch.stack(mass), "acc": torch.stack(acc),
            "support": tr.data.support.cpu(), "configs": configs}


def held_out_readings(rec: dict, per_member: int, seed: int = 0) -> tuple[list, list, list]:
    """``(null calls, old-rule calls, support calls)`` of one recorded setting: per member,
    ``per_member`` off-support subsets read against the rest of their family, and the
    support against the whole family."""
    steps, acc = rec["steps"], rec["acc"].numpy()
    null, old, hit = [], [], []
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    for e, cfg in enumerate(rec["configs"]):
        family = torch.from_numpy(null_subsets(cfg.n_bits, cfg.k, rec["support"][e].tolist(),
                                               cfg.data_seed))
        if len(family) < MIN_NULL_SUBSETS + 1:
            continue
        mass = rec["mass"][:, e]  # [T, n]
        shares = subset_shares(mass, family)  # [T, N]
        rise = torch.cummax(shares / shares[0] - 1.0, 0).values
        s_share = subset_shares(mass, rec["support"][e].unsqueeze(0))[:, 0]
        visible = acc[:, e]
        r = hidden_reading(steps, s_share.tolist(), conformal_band(rise).tolist(),
                           visible.tolist())
        hit.append(r["called"])
        for h in rng.choice(len(family), size=min(per_member, len(family)), replace=False):
            others = torch.cat([rise[:, :h], rise[:, h + 1:]], 1)
            r = hidden_reading(steps, shares[:, h].tolist(), conformal_band(others).tolist(),
                               visible.tolist())
            null.append(r["called"])
            before = r["mass_rise_step"] is not None and not any(
                a >= VISIBLE_ACC for s, a in zip(steps, visible, strict=True)
                if s <= r["mass_rise_step"])
            old.append(before)
    return null, old, hit


def _settings(configs: Sequence) -> list:
    """One config per (n, k) among the MLP configs, in order."""
    seen: dict[tuple[int, int], object] = {}
    for c in configs:
        if getattr(c, "task", None) == "sparse_parity" and c.model == "mlp":
            seen.setdefault((c.n_bits, c.k), c)
    return [seen[key] for key in sorted(seen)]


def hidden_check(configs: Sequence, n_sims: int = 400, seed: int = 0,
                 members: int = MEMBERS) -> NullCheck | None:
    """The hidden-progress call's false-positive rate on held-out off-support subsets and its
    power on the supports, at every (n, k) of ``configs`` (module docstring)."""
    settings = _settings(configs)
    if not settings:
        return None
    callable_ = [c for c in settings if len(null_subsets(c.n_bits, c.k, range(c.k)))
                 >= MIN_NULL_SUBSETS + 1]
    too_few = [c for c in settings if c not in callable_]
    per_member = max(1, -(-n_sims // max(1, len(callable_) * members)))
    null, old, hit = [], [], []
    for i, c in enumerate(callable_):
        a, b, h = held_out_readings(record(c, members, seed + i), per_member, seed + i)
        null, old, hit = null + a, old + b, hit + h
    if not null:
        return None
    grid = ", ".join(f"n={c.n_bits} k={c.k}" for c in callable_)
    c0 = callable_[0]
    few = ("; too few off-support subsets to call (< 20 disjoint k-subsets) at "
           + ", ".join(f"n={c.n_bits} k={c.k}" for c in too_few)) if too_few else ""
    return NullCheck(
        null="held-out k-subsets disjoint from the support, in runs trained at the setting, "
             "each read against the band of the other off-support subsets of its run",
        setting=f"{grid}; width {c0.width}, {c0.optimizer} lr {c0.lr:g}, batch "
                f"{c0.batch_size}, {c0.loss} loss; {members} fresh runs each, read up to "
                "visible progress (eval acc ≥ 60%)",
        n_null=len(null), false_positives=int(sum(null)),
        effect="the planted support of the same runs", n_effect=len(hit),
        detected=int(sum(hit)),
        note=f"the rule before issue 21 (support mass +10% before visible progress) called "
             f"{np.mean(old):.0%} of the same off-support subsets{few}")
