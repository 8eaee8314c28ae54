"""Engine versions (issue 25): every run records the engine version that trained it; resuming a
checkpoint another engine version wrote is refused before any work, with one line naming both
versions, unless ``--allow-engine-change``, which records the switch on the run. On the toy
study (tests/toy_study)."""

import sqlite3

import pandas as pd
import pytest

from cli_inproc import run_main
from labs import state_at
from rulelab.settings import Settings
from rulelab.store import Lab, StoreError
from rulelab.store.registry import engine_read
from rulelab.store.version import ENGINE_VERSION, LEGACY_ENGINE, precision_refusal
from rulelab.sweep.driver import run_configs
from toy_study import ToyRunConfig
from toy_study.trainer import ToyTrainer

FLAGS = dict(n_train=128, n_eval=64, width=16, epochs=20, eval_every=5, seed=3)
CFG = ToyRunConfig(**FLAGS)
ARGS = ["train", "toy", "--n-train", "128", "--n-eval", "64", "--width", "16", "--epochs", "20",
        "--eval-every", "5", "--seed-start", "3", "--micro-batch", "64", "--quiet"]
OPTS = Settings(micro_batch=64)
pytestmark = pytest.mark.usefixtures("toy")


OTHER = ENGINE_VERSION + 1  # an engine whose numbers differ from this one's


def _killed_at(lab: Lab, epoch: int, *, engine: int | None) -> dict:
    """``lab`` as a kill at ``epoch`` leaves it: the run registered and pending, its checkpoint
    at ``epoch`` as engine version ``engine`` wrote it (None: no version, as before them)."""
    saved = state_at(ToyTrainer([CFG], OPTS), epoch)
    del saved["engine_version"], saved["engines"]
    if engine is not None:
        saved.update(engine_version=engine, engines=[[0, engine]])
    lab.register([(CFG.run_id, CFG.flat())], "t")
    lab.save_checkpoint(CFG.run_id, saved)
    return saved


def test_a_checkpoint_without_a_version_reads_as_engine_1_and_is_refused(tmp_path):
    """Engine 1 trained on every core; engine 4 on one thread (rulelab.engine.threads): a
    checkpoint written before versions existed is engine 1's, and resuming it moves numbers."""
    assert LEGACY_ENGINE == 1 and ENGINE_VERSION == 4
    whole = Lab(tmp_path / "whole", create=True)
    run_configs([CFG], whole, experiment="t", settings=OPTS)
    lab = Lab(tmp_path / "lab", create=True)
    _killed_at(lab, 10, engine=None)
    with pytest.raises(StoreError, match="by engine version 1; this is engine version 4"):
        run_configs([CFG], lab, experiment="t", settings=OPTS)
    run_configs([CFG], lab, experiment="t", settings=OPTS.merged(allow_engine_change=True))
    (row,) = lab.runs_json()
    assert row["engine_version"] == 4 and row["engine_switch"] == "1 from epoch 0, 4 from epoch 10"
    # (that checkpoint was written by this engine: the resumed run ends bitwise the same)
    pd.testing.assert_frame_equal(lab.read_metrics(), whole.read_metrics(), check_exact=True)


def test_fresh_runs_record_the_engine_version(tmp_path):
    lab = Lab(tmp_path / "lab", create=True)
    run_configs([CFG], lab, experiment="t", settings=OPTS)
    (row,) = lab.runs_json()
    assert row["engine_version"] == ENGINE_VERSION and row["engine_switch"] is None
    state = lab.load_checkpoint(CFG.run_id)
    assert state["engine_version"] == ENGINE_VERSION and state["engines"] == [[0, ENGINE_VERSION]]


def test_resume_under_another_engine_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    lab = Lab(tmp_path / "lab", create=True)
    _killed_at(lab, 10, engine=OTHER)
    ckpt = lab.checkpoints_dir / f"{CFG.run_id}.pt"
    before = ckpt.read_bytes()
    with pytest.raises(StoreError) as err:
        run_configs([CFG], lab, experiment="t", settings=OPTS)
    line = str(err.value)
    assert "\n" not in line and f"engine version {OTHER}" in line
    assert f"engine version {ENGINE_VERSION}" in line and "epoch 10" in line
    # the command line: exit 1 and the same one line; nothing trained or written
    done = run_main([*ARGS, "--lab", lab.root], capsys, monkeypatch)
    assert done.returncode != 0 and "--allow-engine-change" in done.stderr
    assert f"engine version {ENGINE_VERSION}" in done.stderr
    assert ckpt.read_bytes() == before and lab.status(CFG.run_id) == "pending"
    assert not list(lab.metrics_dir.glob("*.parquet"))


def test_allowed_engine_change_trains_on_and_records_the_switch(tmp_path, monkeypatch,
                                                                capsys):
    whole = Lab(tmp_path / "whole", create=True)
    run_configs([CFG], whole, experiment="t", settings=OPTS)
    lab = Lab(tmp_path / "lab", create=True)
    _killed_at(lab, 10, engine=OTHER)
    new = ENGINE_VERSION
    done = run_main([*ARGS, "--lab", lab.root, "--allow-engine-change"], capsys, monkeypatch)
    assert done.returncode == 0, done.stderr
    (row,) = lab.runs_json()
    assert row["status"] == "done" and row["engine_version"] == new
    assert row["engine_switch"] == f"{OTHER} from epoch 0, {new} from epoch 10"
    state = lab.load_checkpoint(CFG.run_id)
    assert state["engine_version"] == new and state["engines"] == [[0, OTHER], [10, new]]
    # (that "other" state was written by this engine: the resumed run ends bitwise the same)
    pd.testing.assert_frame_equal(lab.read_metrics(), whole.read_metrics(), check_exact=True)


def test_a_lab_written_before_engine_versions_reads_as_version_1(tmp_path):
    lab = Lab(tmp_path / "lab", create=True)
    run_configs([CFG], lab, experiment="t", settings=OPTS)
    with sqlite3.connect(lab.registry_path) as conn:  # the registry as it was written then
        conn.execute("ALTER TABLE runs DROP COLUMN engine_switch")
        conn.execute("ALTER TABLE runs DROP COLUMN engine_version")
    old = Lab(lab.root)  # opens (the schema check accepts it) and reads without writing
    (row,) = old.runs_json()
    assert row["engine_version"] == 1 and row["engine_switch"] is None
    assert engine_read({"status": "pending", "engine_version": None}) is None  # never started
    with sqlite3.connect(lab.registry_path) as conn:
        assert "engine_version" not in {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    # its next write adds the columns; the trained run still reads as engine 1
    Lab(lab.root, create=True).register([(CFG.run_id, CFG.flat())], "t")
    (row,) = Lab(lab.root).runs_json()
    assert row["engine_version"] == 1 and row["engine_switch"] is None


def test_the_compiled_engine_refuses_an_eager_checkpoint_and_falls_back_without_a_compiler(
        tmp_path, monkeypatch):
    import rulelab.engine.compiled as compiled

    lab = Lab(tmp_path / "lab", create=True)
    _killed_at(lab, 10, engine=ENGINE_VERSION)
    ckpt = lab.checkpoints_dir / f"{CFG.run_id}.pt"
    before = ckpt.read_bytes()
    monkeypatch.setattr(compiled, "compile_unavailable", lambda device: None)
    with pytest.raises(StoreError) as err:  # refused before any compile or write
        run_configs([CFG], lab, experiment="t", settings=OPTS.merged(engine="compiled"))
    line = str(err.value)
    assert "engine version 4" in line and "engine version 5" in line
    assert "--engine eager" in line and "\n" not in line
    assert ckpt.read_bytes() == before and lab.status(CFG.run_id) == "pending"
    # Where nothing compiles, "compiled" trains with the eager engine: no refusal, recorded 1.
    monkeypatch.setattr(compiled, "compile_unavailable", lambda device: "no C++ compiler found")
    compiled._notice.cache_clear()  # the notice is once per process
    with pytest.warns(RuntimeWarning, match="no C.. compiler found"):
        run_configs([CFG], lab, experiment="t", settings=OPTS.merged(engine="compiled"))
    (row,) = lab.runs_json()
    assert row["status"] == "done" and row["engine_version"] == ENGINE_VERSION
    assert row["engine_switch"] is None


def test_resume_in_other_micro_batches_is_refused_where_they_cut_steps_otherwise(tmp_path):
    """A step's gradient is summed pass by pass: another --micro-batch is another order."""
    whole = Lab(tmp_path / "whole", create=True)
    run_configs([CFG], whole, experiment="t", settings=OPTS)
    lab = Lab(tmp_path / "lab", create=True)
    saved = _killed_at(lab, 10, engine=ENGINE_VERSION)  # passes of 64 of the 128 examples
    assert saved["micro_batch"] == 64 and saved["step_examples"] == 128
    for other in (32, 128, 4096):  # 128 and more: one pass a step, not two
        with pytest.raises(StoreError) as err:
            run_configs([CFG], lab, experiment="t", settings=OPTS.merged(micro_batch=other))
        line = str(err.value)
        assert "\n" not in line and "micro-batches of 64" in line
        assert f"--micro-batch {other}" in line and "resume it with --micro-batch 64" in line
    assert lab.status(CFG.run_id) == "pending" and not list(lab.metrics_dir.glob("*.parquet"))
    run_configs([CFG], lab, experiment="t", settings=OPTS)
    pd.testing.assert_frame_equal(lab.read_metrics(), whole.read_metrics(), check_exact=True)


def test_micro_batches_past_the_step_are_all_one_pass(tmp_path):
    one_pass = Settings(micro_batch=128)
    lab = Lab(tmp_path / "lab", create=True)
    saved = state_at(ToyTrainer([CFG], one_pass), 10)
    lab.register([(CFG.run_id, CFG.flat())], "t")
    lab.save_checkpoint(CFG.run_id, saved)
    run_configs([CFG], lab, experiment="t", settings=Settings(micro_batch=5000))  # not refused
    assert lab.status(CFG.run_id) == "done"


def test_resume_in_another_precision_is_refused_before_any_work(tmp_path):
    """bf16 rounds every step's matmul operands: switching mid-run would mix two runs."""
    whole = Lab(tmp_path / "whole", create=True)
    run_configs([CFG], whole, experiment="t", settings=OPTS)
    lab = Lab(tmp_path / "lab", create=True)
    saved = _killed_at(lab, 10, engine=ENGINE_VERSION)
    assert saved["precision"] == "fp32"
    with pytest.raises(StoreError) as err:
        run_configs([CFG], lab, experiment="t", settings=OPTS.merged(precision="bf16"))
    line = str(err.value)
    assert "\n" not in line and "in fp32; --precision bf16" in line
    assert "resume it with --precision fp32" in line
    assert lab.status(CFG.run_id) == "pending" and not list(lab.metrics_dir.glob("*.parquet"))
    run_configs([CFG], lab, experiment="t", settings=OPTS)  # its own precision: resumes
    pd.testing.assert_frame_equal(lab.read_metrics(), whole.read_metrics(), check_exact=True)
    bf16 = state_at(ToyTrainer([CFG], OPTS.merged(precision="bf16")), 5)
    assert bf16["precision"] == "bf16"
    del bf16["precision"]  # a checkpoint written before the record: not judged
    assert precision_refusal(CFG.run_id, bf16, "fp32") is None
