"""The generalization criterion (SPEC S.3) and phase 1 (S.4.6) against hand-built models.

A model that learned the *flipped* shortcut 1 − s on a k = 2 task scores adv 100% and val 0%:
at r = 0.1 it fits 90% of the training set, so training rewards it. It must not count as
generalized (the old criterion, adv alone, counted it — these tests fail on that code), the
paper's adv-only reading must still see it, and phase 1 must find it (below chance).
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.analyses.phases import phase_table
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.summary import (
    MemberSummary,
    generalized_of,
    upgrade_summary,
)
from rulelab.studies.shortcut_saturation.summary_frames import upgrade_runs
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

SMALL = dict(seq_len=6, vocab=6, n_train=512, n_eval=256, layers=1, heads=1, d_model=16,
             d_mlp=16, eval_every=10, epochs=20)


class MapModel(torch.nn.Module):
    """The ensemble interface (``[E, B, n]`` tokens → ``[E, B, k]`` logits) computing a fixed
    map: ``"flip"`` predicts 1 − s (s = max(x) mod k), ``"shortcut"`` s, ``"rule"`` the true
    label sum(x) mod k, ``"const"`` always class 0 — no weights are learned."""

    def __init__(self, kind: str, k: int) -> None:
        super().__init__()
        self.kind, self.k = kind, k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.max(-1).values % self.k
        pred = {"flip": (1 - s) % self.k, "shortcut": s, "rule": x.sum(-1) % self.k,
                "const": torch.zeros_like(s)}[self.kind]
        return 4.0 * torch.nn.functional.one_hot(pred, self.k).float()


def _evaluate(cfg: MPSPRunConfig, schedule: list[tuple[int, str]]):
    """The real trainer's evaluation (real MPSP data, real ``evaluate``, real summary) with
    the model swapped for a hand-built one at each scheduled epoch."""
    trainer = MPSPTrainer([cfg], Settings())
    for epoch, kind in schedule:
        trainer.model = MapModel(kind, cfg.label_mod)
        trainer.epoch = epoch
        trainer.evaluate()
    rows = pd.DataFrame(trainer.rows[0], columns=["epoch", "split", "metric", "value"])
    return trainer.summaries[0], rows.assign(run_id="run")


def _runs(cfg: MPSPRunConfig) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": "run", "label_mod": cfg.label_mod, "ratio": cfg.ratio}])


def _value(rows: pd.DataFrame, split: str, metric: str, epoch: int) -> float:
    hit = rows[(rows.split == split) & (rows.metric == metric) & (rows.epoch == epoch)]
    return float(hit["value"].iloc[0])


def test_flipped_shortcut_is_adv_generalized_but_not_generalized():
    cfg = MPSPRunConfig(**SMALL, ratio=0.1, label_mod=2)
    summary, rows = _evaluate(cfg, [(0, "const"), (10, "flip"), (20, "flip")])
    assert _value(rows, "adv", "acc", 20) == 1.0 and _value(rows, "val", "acc", 20) == 0.0
    assert _value(rows, "train", "acc", 20) == pytest.approx(0.9, abs=1 / 512)  # r = 0.1 rewards it
    assert _value(rows, "train_anti", "acc", 20) == 1.0
    # the old criterion (adv alone) called this run generalized at epoch 10
    assert summary.generalized is False and summary.first_epoch_generalized is None
    assert summary.adv_generalized is True and summary.first_epoch_adv_100 == 10
    assert not summary.transient and summary.max_adv_acc == 1.0
    phases = phase_table(rows, runs=_runs(cfg)).iloc[0]
    assert phases.phase1_epoch == 10 and phases.phase1_map == "1-s"
    assert phases.phase1_basis == "shortcut_acc"
    assert not phases.generalized and pd.isna(phases.gen_epoch)
    assert phases.adv_generalized and phases.adv_gen_epoch == 10
    # an old lab (no shortcut_acc rows): for k = 2 phase 1 follows from the accuracies
    old = phase_table(rows[rows.metric != "shortcut_acc"], runs=_runs(cfg)).iloc[0]
    assert old.phase1_epoch == 10 and old.phase1_map == "1-s" and old.phase1_basis == "acc (k=2)"


def test_rule_model_generalizes_and_shortcut_model_is_phase_one():
    cfg = MPSPRunConfig(**SMALL, ratio=0.9, label_mod=2)
    summary, rows = _evaluate(cfg, [(0, "const"), (10, "shortcut"), (20, "rule")])
    assert summary.generalized and summary.first_epoch_generalized == 20
    assert summary.adv_generalized and summary.first_epoch_adv_100 == 20
    phases = phase_table(rows, runs=_runs(cfg)).iloc[0]
    assert phases.phase1_epoch == 10 and phases.phase1_map == "s" and phases.adv_at_phase1 == 0
    assert phases.generalized and phases.gen_epoch == 20


def test_k3_phase_one_needs_the_stored_shortcut_acc():
    cfg = MPSPRunConfig(**SMALL, ratio=0.9, label_mod=3)
    _, rows = _evaluate(cfg, [(0, "const"), (10, "shortcut"), (20, "shortcut")])
    assert _value(rows, "adv", "shortcut_acc", 10) == 1.0  # s itself, though adv label ≠ s
    phases = phase_table(rows, runs=_runs(cfg)).iloc[0]
    assert phases.phase1_epoch == 10 and phases.phase1_map == "s"
    # without shortcut_acc a k = 3 run cannot be read (adv acc does not say what was predicted)
    old = phase_table(rows[rows.metric != "shortcut_acc"], runs=_runs(cfg)).iloc[0]
    assert pd.isna(old.phase1_epoch) and old.phase1_basis.startswith("undefined")
    # k = 3 below 1/3: no shortcut map fits the training data, phase 1 is undefined
    low = MPSPRunConfig(**SMALL, ratio=0.2, label_mod=3)
    _, rows = _evaluate(low, [(0, "const"), (10, "shortcut")])
    row = phase_table(rows, runs=_runs(low)).iloc[0]
    assert pd.isna(row.phase1_epoch) and "r<1/3" in row.phase1_basis


def test_old_summaries_load_and_map():
    cfg = MPSPRunConfig(**SMALL)
    old = {"generalized": True, "first_epoch_100": 30, "max_adv_acc": 1.0, "final_adv_acc": 1.0,
           "final_val_acc": 0.1, "final_train_loss": 0.2, "final_epoch": 50, "transient": False,
           "failed_reason": None}
    s = MemberSummary.from_dict(old, cfg)
    assert s.adv_generalized and s.first_epoch_adv_100 == 30 and s.generalized is None
    assert generalized_of(old) is None
    never = dict(old, generalized=False, first_epoch_100=None, max_adv_acc=0.7)
    assert upgrade_summary(never)["generalized"] is False and generalized_of(never) is False
    new = MemberSummary(generalized=True).as_dict()
    assert MemberSummary.from_dict(new, cfg).as_dict() == new and generalized_of(new) is True


def test_old_runs_frames_are_recomputed_from_metrics():
    cfg = MPSPRunConfig(**SMALL, ratio=0.1)
    _, flipped = _evaluate(cfg, [(0, "const"), (10, "flip")])
    _, rule = _evaluate(cfg, [(0, "const"), (10, "rule")])
    metrics = pd.concat([flipped.assign(run_id="a"), rule.assign(run_id="b")])
    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "status": "done", "ratio": 0.1,
                         "generalized": [True, True, False],  # old meaning: adv alone
                         "first_epoch_100": [10, 10, None], "max_adv_acc": [1.0, 1.0, 0.4]})
    up = upgrade_runs(runs, metrics).set_index("run_id")
    assert "first_epoch_100" not in up.columns
    assert up.adv_generalized.tolist() == [True, True, False]
    assert up.first_epoch_adv_100.tolist()[:2] == [10, 10]
    assert up.generalized.tolist() == [False, True, False]
    assert up.first_epoch_generalized["b"] == 10 and up.attrs["generalized_unknown"] == 0
    blind = upgrade_runs(runs)  # no metrics: what cannot be known stays unknown
    assert blind.generalized.tolist() == [None, None, False]
    assert blind.attrs["generalized_unknown"] == 2


def test_resuming_an_old_checkpoint_recomputes_its_summary():
    cfg = MPSPRunConfig(**{**SMALL, "epochs": 20})
    trainer = MPSPTrainer([cfg], Settings())
    trainer.fit()
    state = trainer.member_state(0)
    fresh = state["summary"]
    # what a checkpoint of the old code held: adv-only ``generalized`` and ``first_epoch_100``
    legacy = {k: v for k, v in fresh.items() if k not in (
        "adv_generalized", "first_epoch_adv_100", "first_epoch_generalized")}
    legacy.update(generalized=True, first_epoch_100=0)
    resumed = MPSPTrainer([cfg], Settings())
    resumed.load_member_state(0, {**state, "summary": legacy})
    got = resumed.summaries[0].as_dict()
    assert got == pytest.approx(fresh, nan_ok=True)
