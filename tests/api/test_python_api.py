"""The Python API (issue 10): ``rulelab.load`` → runs, metrics, stored analyses with their
config columns, one run's model, and declared analyses that write only when asked."""

from __future__ import annotations

import hashlib
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

import rulelab
from labs import loaded_copy, sweep, write
from rulelab.analysis.loading import load_ensembles, stored_configs
from rulelab.errors import UserError
from rulelab.report.stored_analyses import tidy_analysis
from rulelab.report.views import upgrade_by_task
from rulelab.store import Lab

RECIPE = """experiment: api
task: mpsp
base: {layers: 1, heads: 2, d_model: 16, d_mlp: 16, seq_len: 5, vocab: 12, n_train: 96,
       n_eval: 32, eval_every: 5, epochs: 20}
seeds: 2
execution: {snapshots: 3}
"""


@pytest.fixture(scope="module")
def lab_path(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("api")
    sweep(write(base, "r", RECIPE), base / "lab")
    return base / "lab"


@pytest.fixture
def lab(lab_path, tmp_path):
    return loaded_copy(lab_path, tmp_path)


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_load_still_unpacks_and_reads_like_before(lab):
    runs, metrics = lab
    assert runs is lab.runs and metrics is lab.metrics and lab[0] is lab.runs
    assert len(runs) == 2 and set(runs["status"]) == {"done"}
    assert {"run_id", "epoch", "split", "metric", "value"} <= set(metrics.columns)
    assert "2 runs (mpsp)" in repr(lab) and "analyses: none" in repr(lab)


def test_analyze_returns_a_table_and_writes_only_with_save(lab):
    before = digest(lab.path)
    table = lab.analyze("gradients")
    assert set(table["run_id"]) == set(lab.runs["run_id"]) and set(table["epoch"]) == {20}
    assert digest(lab.path) == before and list(lab.analyses) == []
    one = lab.runs["run_id"].iloc[1]
    snap = lab.analyze("gradients", runs=[one], epochs=[0, 20], save=True)
    assert set(snap["run_id"]) == {one} and sorted(set(snap["epoch"])) == [0, 20]
    assert list(lab.analyses) == ["gradients"] and "gradients" in lab.analyses
    stored = lab.analyses["gradients"]
    assert len(stored) == len(snap)
    # config columns joined on run_id: the stored table has layers..seed, the join adds the rest
    assert {"d_model", "n_train", "lr", "vocab"} <= set(stored.columns)
    assert set(stored["d_model"]) == {16} and set(stored["seq_len"]) == {5}
    phases = lab.analyze("phases")  # reads curves, not weights
    assert set(phases["run_id"]) == set(lab.runs["run_id"])


def test_bad_requests_are_one_line_naming_what_is_there(lab):
    with pytest.raises(KeyError, match="stored: none yet"):
        lab.analyses["gradients"]
    with pytest.raises(UserError, match="no analysis 'nope'; use one of .*gradients"):
        lab.analyze("nope")
    with pytest.raises(UserError, match="n: 0 is not allowed"):
        lab.analyze("patching", n=0)
    with pytest.raises(UserError, match="k_frac: not an option of patching"):
        lab.analyze("patching", k_frac=0.5)
    with pytest.raises(UserError, match="epochs: phases reads stored curves"):
        lab.analyze("phases", epochs="all")
    with pytest.raises(UserError, match="epochs: 'last' is not allowed"):
        lab.analyze("gradients", epochs="last")
    with pytest.raises(Exception, match="^epochs: 7 is not allowed.*stored: 0, 1, 4, 20"):
        lab.analyze("gradients", epochs=7)
    with pytest.raises(UserError, match="runs: 'zzz' is not a run of"):
        lab.analyze("gradients", runs=["zzz"])
    with pytest.raises(UserError, match="run_id: 'zzz' is not a run"):
        lab.model("zzz")
    with pytest.raises(UserError, match="epoch: 7 is not allowed .*stored: 0, 1, 4, 20"):
        lab.model(lab.runs["run_id"].iloc[0], epoch=7)


def test_model_is_that_member_of_the_trained_ensemble(lab):
    configs = stored_configs(lab.lab, task="mpsp")
    (loaded,) = load_ensembles(lab.lab, configs)
    for e, cfg in enumerate(loaded.configs):
        model = lab.model(cfg.run_id)
        assert model.config.run_id == cfg.run_id and model.epoch == 20
        x = loaded.data.val_x[e]
        torch.testing.assert_close(model.data.val_x, x)
        with torch.no_grad():
            want = loaded.model(loaded.data.val_x)[e]
            logits, cache = model.run_with_cache(x)
        torch.testing.assert_close(model(x), want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(logits, want, rtol=1e-5, atol=1e-5)
        assert cache["blocks.0.attn.hook_pattern"].shape == (32, 2, 6, 6)  # no member axis
    first = lab.runs["run_id"].iloc[0]
    x = lab.model(first).data.val_x
    assert not torch.allclose(lab.model(first, epoch=0)(x), lab.model(first)(x))


def test_partial_epoch_coverage_is_a_warning_not_a_silent_drop(lab):
    gone = lab.runs["run_id"].iloc[0]
    (lab.path / "snapshots" / gone / f"{4:09d}.pt").unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = lab.analyze("gradients", epochs="1,4")
    assert set(table.loc[table["epoch"] == 4, "run_id"]) == set(lab.runs["run_id"]) - {gone}
    assert len(set(table.loc[table["epoch"] == 1, "run_id"])) == 2
    lines = [str(w.message) for w in caught]
    assert any("left out" in m and gone in m and "4 (1 of 2" in m for m in lines), lines


def test_stored_tables_fill_config_columns_but_never_an_analysis_column():
    runs = pd.DataFrame({"run_id": ["a", "b"], "task": ["mpsp", "mpsp"], "ratio": [0.5, 0.9],
                         "eps": [1e-8, 1e-8], "seed": [0, 1], "status": ["done", "done"]})
    # gradients' ε (its own ``eps`` column) beside the optimizer's eps: a tracked row (no
    # member) with ε undefined (NaN) and a post-hoc row of the same run at the same epoch
    table = pd.DataFrame({"run_id": ["a", "b", "b"], "epoch": [5, 5, 5],
                          "member": [None, None, 0.0], "eps": [0.3, float("nan"), 0.2],
                          "ratio": [None, None, 0.9]})
    out = tidy_analysis(table, runs, one_source=False)
    assert list(out["ratio"]) == [0.5, 0.9, 0.9]  # config filled where the tracked rows lack it
    assert math.isnan(out["eps"][1]) and out["eps"][2] == 0.2  # never the optimizer's 1e-8
    assert list(out["source"]) == ["tracked", "tracked", "post-hoc"]  # both kinds kept
    assert len(tidy_analysis(table, runs)) == 2  # the report keeps the post-hoc row of run b


def test_old_summaries_are_upgraded_on_load():
    runs = pd.DataFrame({"run_id": ["a", "b"], "task": ["mpsp", "mpsp"],
                         "generalized": [True, False], "first_epoch_100": [40, None]})
    no_metrics = pd.DataFrame(columns=["run_id", "epoch", "split", "metric", "value"])
    up = upgrade_by_task(runs, no_metrics)
    assert list(up["adv_generalized"]) == [True, False]  # the old adv-only flag, renamed
    assert up["generalized"].tolist()[1] is False and "first_epoch_100" not in up.columns


def test_a_lab_of_two_tasks_upgrades_each_task_on_its_own_rows():
    runs = pd.DataFrame({"run_id": ["m", "a"], "task": ["modular", "mpsp"],
                         "generalized": [True, True], "first_epoch_100": [None, 40],
                         "width": [65, None]})
    no_metrics = pd.DataFrame(columns=["run_id", "epoch", "split", "metric", "value"])
    up = upgrade_by_task(runs, no_metrics)
    assert list(up["run_id"]) == ["m", "a"]  # the rows in their order
    assert up.loc[up["run_id"] == "a", "adv_generalized"].item() is True  # mpsp: renamed
    assert up.loc[up["run_id"] == "m", "generalized"].item() is True  # modular untouched
    assert up.loc[up["run_id"] == "m", "width"].item() == 65


def test_load_never_creates_a_lab(tmp_path):
    with pytest.raises(Exception, match="no lab at"):
        rulelab.load(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()
    assert isinstance(Lab, type)
