"""The runner end to end in-process, on the toy study: store, skip, snapshots, and reloading
for analyses."""

import torch

from rulelab.analysis.loading import load_ensembles, stored_configs
from rulelab.engine.runner import log_spaced_epochs
from rulelab.settings import Settings
from rulelab.store import Lab
from rulelab.sweep.driver import run_configs
from toy_study import ToyRunConfig
from toy_study.trainer import evaluate

TINY = dict(n_train=128, n_eval=64, width=16, epochs=30, eval_every=5)


def test_reloaded_members_reproduce_their_stored_metrics(tmp_path, toy):
    lab = Lab(tmp_path / "lab", create=True)
    configs = [ToyRunConfig(**TINY, noise=n, seed=s) for n in (0.0, 0.2) for s in (0, 1)]
    opts = Settings(micro_batch=64, snapshots=4)
    run_configs(configs, lab, experiment="t", settings=opts)
    assert set(lab.statuses([c.run_id for c in configs]).values()) == {"done"}
    snaps = lab.snapshot_epochs(configs[0].run_id)
    assert snaps == sorted(log_spaced_epochs(30, 4)) and snaps[0] == 0 and snaps[-1] == 30

    stored = stored_configs(lab, task="toy")
    assert {c.run_id for c in stored} == {c.run_id for c in configs}
    runs = lab.runs().set_index("run_id")
    (loaded,) = list(load_ensembles(lab, stored))  # no trainer: the study's evaluation
    acc = evaluate(loaded.model, loaded.data)["eval", "acc"]
    for e, c in enumerate(loaded.configs):
        assert float(acc[e]) == runs.loc[c.run_id, "final_eval_acc"]
    # the epoch-0 snapshot is the initialisation: it reproduces the first evaluation
    (at_init,) = list(load_ensembles(lab, stored, epoch=0))
    metrics = lab.read_metrics()
    first = metrics[(metrics.epoch == 0) & (metrics.split == "eval") & (metrics.metric == "acc")]
    acc0 = evaluate(at_init.model, at_init.data)["eval", "acc"]
    for e, c in enumerate(at_init.configs):
        assert float(acc0[e]) == float(first[first.run_id == c.run_id].value.iloc[0])
    assert not torch.equal(at_init.model.W1, loaded.model.W1)


def test_second_run_skips_finished_runs(tmp_path, toy):
    lab = Lab(tmp_path / "lab", create=True)
    configs = [ToyRunConfig(**TINY, seed=s) for s in (0, 1)]
    opts = Settings(micro_batch=64)
    run_configs(configs, lab, experiment="t", settings=opts)
    before = {p.name: p.stat().st_mtime_ns for p in (lab.root / "metrics").iterdir()}
    trained = []
    run_configs(configs, lab, experiment="t", settings=opts,
                on_start=lambda plan: trained.extend(plan.chunks))  # chunks to train
    assert trained == []
    after = {p.name: p.stat().st_mtime_ns for p in (lab.root / "metrics").iterdir()}
    assert before == after
