"""Rebuild stored ensembles for analyses run post hoc (DESIGN §2–3), with no trainer and no
optimizer (issue 22).

Runs are regrouped by shape into ensembles exactly as for training. Each ensemble's data and
freshly initialized model come from its task's two builders (``Task.data_builder``,
``Task.model_builder`` in :mod:`rulelab.study`) — the functions its trainer calls, so both
build the same tensors — and each member's weights from its final checkpoint or a stored
snapshot epoch. What an analysis reads of the result (``model``, ``data``, ``configs``,
``cfg``, ``n_members``, ``epoch``, ``device``) is a :class:`LoadedEnsemble`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rulelab.engine.compiled import engines_for
from rulelab.engine.groups import plan_ensembles
from rulelab.store import Lab, StoreError
from rulelab.study_registry import config_from_flat
from rulelab.study_registry import task as declared_task


@dataclass
class LoadedEnsemble:
    """Shape-compatible stored runs as one ensemble, their weights loaded, in eval mode."""

    configs: list  # one per member, in member order
    data: Any  # the members' data stacked [E, …], rebuilt deterministically from the configs
    model: torch.nn.Module  # [E, B, …] → [E, B, k]
    epoch: int  # the epoch the weights were stored at
    device: torch.device

    @property
    def cfg(self):
        """The first member's config: its shape fields are every member's."""
        return self.configs[0]

    @property
    def n_members(self) -> int:
        return len(self.configs)


def build_ensemble(configs: Sequence, device: str | torch.device = "cpu"
                   ) -> tuple[Any, torch.nn.Module]:
    """``(data, model)`` of shape-compatible ``configs`` on ``device``, freshly initialized, as
    their trainer builds them: the task's builders, data first, the model moved to ``device``
    and told the engine version whose numerics it computes."""
    spec, device = declared_task(configs[0].task), torch.device(device)
    data = spec.build_data(list(configs), device)
    model = spec.build_model(list(configs), data).to(device)
    if hasattr(model, "engine"):
        # the eager numerics (a model may declare its own version; a CPU-only one gives way)
        model.engine = engines_for(configs[0], device)["eager"]
    return data, model


def load_ensemble(configs: Sequence, states: Sequence[dict], *, device: str = "cpu",
                  sources: Sequence[str] | None = None) -> LoadedEnsemble:
    """``configs`` with member ``e``'s weights from ``states[e]`` (a stored checkpoint or
    snapshot: ``params`` and ``epoch``), in eval mode. ``sources`` names each state's file
    for the error a state of another shape raises."""
    data, model = build_ensemble(configs, device)
    sources = sources or [f"the state of run {c.run_id}" for c in configs]
    with torch.no_grad():
        for e, (c, state, where) in enumerate(zip(configs, states, sources, strict=True)):
            _load_params(model, e, c.run_id, state["params"], where)
    return LoadedEnsemble(list(configs), data, model.eval(), int(states[0]["epoch"]),
                          torch.device(device))


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
) -> Iterator[LoadedEnsemble]:
    """Yield one :class:`LoadedEnsemble` per shape-compatible chunk of ``configs``.

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
        if chunk:
            yield load_ensemble(chunk, [states[c.run_id] for c in chunk], device=device,
                                sources=[_source(c.run_id, epoch) for c in chunk])


def _source(run_id: str, epoch: int | None) -> str:
    return (f"checkpoints/{run_id}.pt" if epoch is None
            else f"snapshots/{run_id}/{int(epoch):09d}.pt")


def _load_params(model: torch.nn.Module, e: int, run_id: str, params: dict, where: str) -> None:
    """Copy one member's stored weights; weights of another shape are one line naming the
    file (a checkpoint copied from another run or lab), not a KeyError."""
    for name, p in model.named_parameters():
        try:
            p[e].copy_(params[name])
        except (KeyError, RuntimeError) as err:
            raise StoreError(f"{where} does not hold the weights of run {run_id} ({name}: "
                             f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
                             "); move it away and re-train that run") from None


def require_runs(configs: Sequence, lab: Lab, task: str) -> None:
    if not configs:
        raise StoreError(f"lab {lab.root} has no finished {task} runs to analyze")
