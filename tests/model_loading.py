"""Shared checks for each study's tests: a stored run's model loads with no trainer and no
optimizer (:mod:`rulelab.analysis.loading`, issue 22), bitwise as its trainer held it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

import rulelab.optim.factory
from rulelab.analysis.loading import load_ensembles
from rulelab.api.run_model import run_model
from rulelab.engine.base import EnsembleTrainerBase
from rulelab.engine.runner import trainer_class
from rulelab.settings import Settings
from rulelab.store import Lab
from rulelab.sweep.driver import run_configs


def trained_lab(root: Path, configs, snapshots: int = 0) -> Lab:
    """``configs`` trained into a fresh lab under ``root`` (one ensemble where shapes agree)."""
    lab = Lab(root / "lab", create=True)
    run_configs(configs, lab, experiment="t", settings=Settings(snapshots=snapshots))
    assert set(lab.statuses([c.run_id for c in configs]).values()) == {"done"}
    return lab


def trainer_loaded(lab: Lab, configs, epoch: int | None = None) -> EnsembleTrainerBase:
    """The loader before issue 22: the task's whole trainer (optimizer included) as the
    container, each member's stored weights copied in, in eval mode."""
    trainer = trainer_class(configs[0].task)(configs, Settings())
    with torch.no_grad():
        for e, c in enumerate(configs):
            state = (lab.load_checkpoint(c.run_id) if epoch is None
                     else lab.load_snapshot(c.run_id, epoch))
            for name, p in trainer.model.named_parameters():
                p[e].copy_(state["params"][name])
            trainer.epoch = int(state["epoch"])
    trainer.model.eval()
    return trainer


def tensors(data) -> dict[str, torch.Tensor]:
    return {f.name: getattr(data, f.name) for f in dataclasses.fields(data)
            if isinstance(getattr(data, f.name), torch.Tensor)}


def assert_loads_like_trainer(lab: Lab, configs, inputs: str, epoch: int | None = None
                              ) -> None:
    """The loaded ensemble has bitwise the trainer's parameters, buffers and data, the same
    epoch and eval mode, and bitwise the same forward outputs on the data's ``inputs``."""
    (loaded,) = load_ensembles(lab, configs, epoch=epoch)
    old = trainer_loaded(lab, configs, epoch)
    assert [c.run_id for c in loaded.configs] == [c.run_id for c in configs]
    assert loaded.epoch == old.epoch and loaded.n_members == len(configs)
    assert type(loaded.model) is type(old.model)
    new_p, old_p = dict(loaded.model.named_parameters()), dict(old.model.named_parameters())
    assert list(new_p) == list(old_p)
    for name in old_p:
        assert torch.equal(new_p[name], old_p[name]), name
    new_b, old_b = dict(loaded.model.named_buffers()), dict(old.model.named_buffers())
    assert list(new_b) == list(old_b) and all(torch.equal(new_b[n], old_b[n]) for n in old_b)
    assert not any(m.training for m in loaded.model.modules())
    assert getattr(loaded.model, "engine", None) == getattr(old.model, "engine", None)
    new_d, old_d = tensors(loaded.data), tensors(old.data)
    assert list(new_d) == list(old_d) and all(torch.equal(new_d[k], old_d[k]) for k in old_d)
    x = getattr(loaded.data, inputs)
    with torch.no_grad():
        out = loaded.model(x)
        assert torch.equal(out, old.model(x))
    # a fresh, untrained model of the same configs gives the same outputs only at epoch 0
    # (the snapshot of the initialization): the stored weights were loaded
    fresh = trainer_class(configs[0].task)(configs, Settings()).model.eval()
    with torch.no_grad():
        assert torch.equal(fresh(x), out) == (loaded.epoch == 0)


def assert_loads_without_optimizer(lab: Lab, configs, monkeypatch) -> None:
    """With the optimizer builder and the trainer refusing to be built, the analyses' loader
    and ``lab.model`` still load every run (and the trainer really is refused)."""
    def refuse(*args, **kwargs):
        raise AssertionError("post-hoc loading built an optimizer")

    monkeypatch.setattr(rulelab.optim.factory, "make_optimizer", refuse)
    with pytest.raises(AssertionError, match="built an optimizer"):
        trainer_class(configs[0].task)(configs, Settings())
    monkeypatch.setattr(EnsembleTrainerBase, "__init__", refuse)
    (loaded,) = load_ensembles(lab, configs)
    assert loaded.n_members == len(configs)
    for e, c in enumerate(configs):
        model = run_model(lab, c.run_id)
        assert model.config.run_id == c.run_id and not model.training
        for (name, p), (_, q) in zip(model.ensemble.named_parameters(),
                                     loaded.model.named_parameters(), strict=True):
            assert torch.equal(p[0], q[e]), name
