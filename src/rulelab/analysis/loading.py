"""Rebuild trained ensembles from a lab, for analyses run post hoc (DESIGN §2–3).

Runs are regrouped by shape into ensembles exactly as for training; each member's weights come
from its final checkpoint or from a stored snapshot epoch. The trainer object is reused as the
container: it rebuilds each member's data deterministically from its config.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from rulelab.settings import Settings
from rulelab.store import Lab, StoreError
from rulelab.study_registry import config_from_flat
from rulelab.train.base import EnsembleTrainerBase
from rulelab.train.groups import plan_ensembles
from rulelab.train.runner import trainer_class


def stored_configs(lab: Lab, *, task: str, run_ids: Sequence[str] | None = None,
                   statuses: Sequence[str] = ("done",)) -> list:
    """Configs of the stored runs of ``task`` whose status is in ``statuses``."""
    wanted = set(run_ids) if run_ids is not None else None
    configs = []
    for row in lab.runs_json():
        if row["config"].get("task") != task or row["status"] not in statuses:
            continue
        if wanted is None or row["run_id"] in wanted:
            configs.append(config_from_flat(row["config"]))
    return configs


def load_ensembles(
    lab: Lab,
    configs: Sequence,
    *,
    epoch: int | None = None,
    max_members: int = 64,
    device: str = "cpu",
) -> Iterator[EnsembleTrainerBase]:
    """Yield one trainer per shape-compatible chunk with every member's weights loaded.

    ``epoch=None`` loads the final checkpoint; an integer loads that snapshot epoch (members
    without it are skipped).
    """
    for chunk in plan_ensembles(configs, {}, max_members):
        states = {}
        for c in chunk:
            state = (lab.load_checkpoint(c.run_id) if epoch is None
                     else lab.load_snapshot(c.run_id, epoch))
            if state is not None:
                states[c.run_id] = state
        chunk = [c for c in chunk if c.run_id in states]
        if not chunk:
            continue
        trainer = trainer_class(chunk[0].task)(chunk, Settings(device=device))
        with torch.no_grad():
            for e, c in enumerate(chunk):
                _load_params(trainer, e, c.run_id, states[c.run_id]["params"], epoch)
        trainer.epoch = int(states[chunk[0].run_id]["epoch"])
        trainer.model.eval()
        yield trainer


def _load_params(trainer, e: int, run_id: str, params: dict, epoch: int | None) -> None:
    """Copy one member's stored weights; weights of another shape are one line naming the
    file (a checkpoint copied from another run or lab), not a KeyError."""
    for name, p in trainer.model.named_parameters():
        try:
            p[e].copy_(params[name])
        except (KeyError, RuntimeError) as err:
            where = (f"checkpoints/{run_id}.pt" if epoch is None
                     else f"snapshots/{run_id}/{int(epoch):09d}.pt")
            raise StoreError(f"{where} does not hold the weights of run {run_id} ({name}: "
                             f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
                             "); move it away and re-train that run") from None


def require_runs(configs: Sequence, lab: Lab, task: str) -> None:
    if not configs:
        raise StoreError(f"lab {lab.root} has no finished {task} runs to analyze")
