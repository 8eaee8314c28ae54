"""The ``rulelab`` command line, end to end, run as real processes (SPEC CLI contract).

- a tiny grid is generated, trained, listed, re-run (a no-op), reported and loaded back;
- bad input prints exactly one ``error: …`` line on stderr naming the flag, exits with 2 and
  writes nothing (no new lab; an existing lab byte-for-byte unchanged);
- a corrupt ``registry.sqlite`` or a missing lab is reported the same way and left untouched.

Every CLI start imports torch (~2-3 s on a small CPU), so the many bad-input cases are run by
one driver process that imports ``rulelab.cli`` and torch once and forks a child per case: each
child runs the real entry point :func:`rulelab.cli.main` with its own ``sys.argv``, its own
stdout/stderr file descriptors and its own exit status, exactly like ``rulelab …``. A few cases
are also run through the installed ``rulelab`` script to check that the two agree.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from itertools import product
from pathlib import Path

import pandas as pd
import pytest

from forked_cli import SWEEP_MODULES

TINY = [
    "--seq-len", "4", "--vocab", "8", "--n-train", "64", "--n-eval", "32",
    "--epochs", "6", "--eval-every", "2", "--layers", "1", "--heads", "1",
    "--d-model", "16", "--d-mlp", "32",
]  # fmt: skip
GRID = ["--ratio", "0.5", "0.9", "--weight-decay", "0.1", "0.2", "--seeds", "2"]
RATIOS, WEIGHT_DECAYS, SEEDS = (0.5, 0.9), (0.1, 0.2), (0, 1)
SUMMARY_KEYS = {
    "generalized",  # SPEC S.3: val and adv both 100% at one evaluation
    "first_epoch_generalized",
    "adv_generalized",  # the paper's text: adv alone reached 100%
    "first_epoch_adv_100",
    "max_adv_acc",
    "final_adv_acc",
    "final_val_acc",
    "final_train_loss",
}
CONFIG_KEYS = {"ratio", "weight_decay", "seed", "layers", "heads", "label_mod", "shortcut",
               "epochs", "lr", "seq_len", "vocab", "n_train", "n_eval", "d_model", "d_mlp"}


# --- running the CLI ---------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RULELAB_HOME"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("rulelab")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "rulelab.cli"]


def cli(*args: str | os.PathLike, cwd: Path) -> subprocess.CompletedProcess:
    """``rulelab ARGS`` in a fresh process (cwd ``cwd``, so a default lab would land there)."""
    return subprocess.run(
        [*_script(), *map(str, args)], cwd=cwd, env=_env(), capture_output=True, text=True,
        timeout=300,
    )


_DRIVER = r"""
import json, os, sys, tempfile, traceback
cases = json.load(sys.stdin)
import importlib
import rulelab.cli as cli
for name in sys.argv[1:]:  # the expensive lazy imports (torch, …) happen once, here
    importlib.import_module(name)
results = []
for argv in cases:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child is one ``rulelab ARGV`` invocation
            code = 0
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.argv = ["rulelab", *argv]
                cli.main()
            except SystemExit as e:
                if e.code is None or isinstance(e.code, int):
                    code = e.code or 0
                else:
                    print(e.code, file=sys.stderr)
                    code = 1
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        results.append({"rc": os.waitstatus_to_exitcode(status),
                        "stdout": out.read().decode("utf-8", "replace"),
                        "stderr": err.read().decode("utf-8", "replace")})
json.dump(results, sys.stdout)
"""


def cli_batch(cases: list[list[str]], *, cwd: Path) -> list[subprocess.CompletedProcess]:
    """Run each argv as its own ``rulelab`` process, forked from one pre-imported driver."""
    argvs = [[str(a) for a in argv] for argv in cases]
    if not hasattr(os, "fork"):  # no fork: one fresh interpreter per case (slower, same result)
        return [cli(*argv, cwd=cwd) for argv in argvs]
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, *SWEEP_MODULES], input=json.dumps(argvs), cwd=cwd,
        env=_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"driver failed:\n{proc.stderr}"
    return [
        subprocess.CompletedProcess(["rulelab", *argv], r["rc"], r["stdout"], r["stderr"])
        for argv, r in zip(argvs, json.loads(proc.stdout), strict=True)
    ]


def assert_user_error(proc: subprocess.CompletedProcess, *flags: str) -> str:
    """Exit code 2 and exactly one non-empty stderr line ``error: …`` naming one of ``flags``."""
    shown = f"argv {proc.args}\nrc {proc.returncode}\nstderr {proc.stderr!r}"
    shown += f"\nstdout {proc.stdout!r}"
    assert proc.returncode == 2, shown
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, shown
    line = lines[0]
    assert line.startswith("error:") and line[len("error:"):].strip(), shown
    if flags:
        assert any(f in line for f in flags), f"none of {flags} named in {line!r}"
    assert "Traceback" not in proc.stdout, shown
    return line


def tree_digest(root: Path) -> dict[str, str]:
    """Every directory and file under ``root`` → its kind or the sha256 of its bytes."""
    out = {}
    for p in sorted(root.rglob("*")):
        key = str(p.relative_to(root))
        out[key] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# --- end to end on a tiny grid -----------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A lab with the 2 ratios × 2 weight decays × 2 seeds grid trained to the end."""
    work = tmp_path_factory.mktemp("e2e")
    lab = work / "lab"
    proc = cli("train", "mpsp", *TINY, *GRID, "--quiet", "--lab", lab, cwd=work)
    assert proc.returncode == 0, proc.stderr
    return work, lab, proc


def test_data_mpsp_writes_parquet_with_exact_splits(tmp_path):
    out = tmp_path / "sub" / "mpsp.parquet"
    proc = cli("data", "mpsp", "--out", out, "--seq-len", "4", "--vocab", "8", "--n-train",
               "64", "--n-eval", "32", "--label-mod", "3", "--ratio", "0.75", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()
    df = pd.read_parquet(out)
    assert set(df.columns) >= {"split", "x", "label", "shortcut", "consistent"}
    assert df["split"].value_counts().to_dict() == {"train": 64, "val": 32, "adv": 32}
    x = [list(map(int, row)) for row in df["x"]]
    assert all(len(row) == 4 and all(0 <= v < 8 for v in row) for row in x)
    assert [sum(row) % 3 for row in x] == df["label"].astype(int).tolist()
    assert [max(row) % 3 for row in x] == df["shortcut"].astype(int).tolist()
    assert (df["consistent"] == (df["label"] == df["shortcut"])).all()
    by_split = df.groupby("split")["consistent"].sum().to_dict()
    assert by_split == {"train": 48, "val": 32, "adv": 0}  # r = 0.75 of 64; val r=1; adv r=0
    assert len({tuple(row) for row in x}) == len(x)  # no sequence twice, within or across splits


def test_train_creates_the_grid_and_runs_json_lists_it(trained):
    work, lab, proc = trained
    assert (lab / "registry.sqlite").is_file()
    assert "8 runs" in proc.stderr
    res = cli("runs", "--lab", lab, "--json", cwd=work)
    assert res.returncode == 0, res.stderr
    runs = json.loads(res.stdout)
    assert isinstance(runs, list) and len(runs) == 8
    for r in runs:
        assert {"run_id", "status", "config", "summary"} <= set(r)
        assert r["status"] == "done", r
        assert set(r["config"]) >= CONFIG_KEYS, set(r["config"])
        assert not any(isinstance(v, dict | list) for v in r["config"].values())  # flat
        assert set(r["summary"]) >= SUMMARY_KEYS, set(r["summary"])
        assert isinstance(r["summary"]["generalized"], bool)
        assert r["summary"]["adv_generalized"] or not r["summary"]["generalized"]  # new ⊆ adv
        assert 0.0 <= r["summary"]["max_adv_acc"] <= 1.0
        assert r["summary"]["final_adv_acc"] <= r["summary"]["max_adv_acc"] + 1e-12
        assert r["config"]["layers"] == 1 and r["config"]["heads"] == 1
        assert r["config"]["epochs"] == 6 and r["config"]["label_mod"] == 2
        assert r["config"]["shortcut"] == "max"
    assert len({r["run_id"] for r in runs}) == 8
    got = {(r["config"]["ratio"], r["config"]["weight_decay"], r["config"]["seed"]) for r in runs}
    assert got == set(product(RATIOS, WEIGHT_DECAYS, SEEDS))


def test_runs_table_mentions_each_ratio(trained):
    work, lab, _ = trained
    res = cli("runs", "--lab", lab, cwd=work)
    assert res.returncode == 0, res.stderr
    for value in ("0.5", "0.9", "0.1", "0.2"):
        assert value in res.stdout, res.stdout
    assert "(0/2)" in res.stdout or "(1/2)" in res.stdout or "(2/2)" in res.stdout


def test_rerunning_the_same_grid_is_a_no_op(trained):
    import rulelab

    work, lab, _ = trained
    metrics = sorted((lab / "metrics").glob("*.parquet"))
    assert len(metrics) == 8

    def snapshot():
        files = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in metrics}
        runs = rulelab.load(lab).runs.set_index("run_id")[["status", "updated_at"]]
        return files, runs.sort_index()

    files0, runs0 = snapshot()
    res = cli("train", "mpsp", *TINY, *GRID, "--quiet", "--lab", lab, cwd=work)
    assert res.returncode == 0, res.stderr
    files1, runs1 = snapshot()
    assert files1 == files0  # bytes and mtimes: no run was trained again
    pd.testing.assert_frame_equal(runs1, runs0)  # statuses (and update stamps) untouched
    assert (runs1["status"] == "done").all()
    assert sorted((lab / "metrics").glob("*.parquet")) == metrics


def test_report_writes_html_with_embedded_figures(trained):
    work, lab, _ = trained
    out = work / "reports" / "lab.html"
    res = cli("report", "--lab", lab, "--out", out, cwd=work)
    assert res.returncode == 0, res.stderr
    html = out.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith(("<!doctype html", "<html"))
    assert html.count("data:image/png;base64,") >= 1


def test_load_returns_runs_and_metrics_frames(trained):
    import rulelab

    _, lab, _ = trained
    frames = rulelab.load(lab)
    assert len(frames.runs) == 8
    assert set(frames.runs["status"]) == {"done"}
    assert {"run_id", "ratio", "weight_decay", "seed", "generalized"} <= set(frames.runs.columns)
    m = frames.metrics
    assert {"run_id", "epoch", "split", "metric", "value"} <= set(m.columns)
    assert set(m["run_id"]) == set(frames.runs["run_id"])
    for run_id, group in m.groupby("run_id"):
        epochs = sorted(set(group["epoch"].astype(int)))
        # evaluated at epoch 0, every --eval-every 2 epochs, and at the end (epoch 6)
        assert epochs == [0, 2, 4, 6], (run_id, epochs)
        assert group["value"].notna().all()


# --- bad input: one line, exit code 2, nothing written ----------------------------------------
# (id, argv before --lab, flags of which the error line must name one, hint it must contain)
TRAIN_BAD = [
    ("ratio-above-1", ["--ratio", "1.5"], ("--ratio",), None),
    ("ratio-negative", ["--ratio", "-0.1"], ("--ratio",), None),
    ("ratio-second-value", ["--ratio", "0.5", "1.5"], ("--ratio",), None),
    ("label-mod-4", ["--label-mod", "4"], ("--label-mod",), "2 or 3"),
    ("shortcut-min", ["--shortcut", "min"], ("--shortcut",), "max"),
    ("act-tanh", ["--activation", "tanh"], ("--act",), "relu"),  # one flag name (issue 9)
    ("layers-0", ["--layers", "0"], ("--layers",), None),
    ("layers-not-int", ["--layers", "abc"], ("--layers",), "integer"),
    ("heads-not-dividing-d-model", ["--heads", "3", "--d-model", "64"], ("--heads", "--d-model"),
     "divisible"),
    ("seeds-0", ["--seeds", "0"], ("--seeds",), None),
    ("epochs-0", ["--epochs", "0"], ("--epochs",), None),
    ("lr-0", ["--lr", "0"], ("--lr",), None),
    ("weight-decay-negative", ["--weight-decay", "-1"], ("--weight-decay",), None),
    ("batch-size-above-n-train", ["--batch-size", "128"], ("--batch-size",), None),
    ("vocab-2", ["--vocab", "2"], ("--vocab",), None),
    ("device-tpu", ["--device", "tpu"], ("--device",), "cpu"),
    ("eval-every-0", ["--eval-every", "0"], ("--eval-every",), None),
    ("seq-len-1", ["--seq-len", "1"], ("--seq-len",), None),
    ("n-train-below-16", ["--n-train", "8"], ("--n-train",), None),
    ("data-seed-negative", ["--data-seed", "-1"], ("--data-seed",), None),
    ("max-members-0", ["--max-members", "0"], ("--max-members",), None),
    ("unknown-flag", ["--foo"], ("--foo",), None),
]


def _bad_cases(base: Path) -> dict[str, tuple[list, tuple, str | None, list[Path]]]:
    """id → (argv, flags, hint, paths that must not exist afterwards)."""
    cases = {}
    for name, extra, flags, hint in TRAIN_BAD:
        lab = base / f"lab-{name}"
        cases[f"train:{name}"] = (["train", "mpsp", *TINY, *extra, "--lab", lab], flags, hint,
                                  [lab])
    out = base / "data.parquet"
    data = ["data", "mpsp", "--seq-len", "4", "--vocab", "8", "--n-train", "64", "--n-eval", "32"]
    cases["data:ratio-above-1"] = ([*data, "--ratio", "1.5", "--out", out], ("--ratio",), None,
                                   [out])
    cases["data:label-mod-4"] = ([*data, "--label-mod", "4", "--out", out], ("--label-mod",),
                                 None, [out])
    csv = base / "data.csv"
    cases["data:out-not-parquet"] = ([*data, "--out", csv], ("--out",), "parquet", [csv])
    rlab, rout = base / "lab-reproduce", base / "reproduce.html"
    cases["reproduce:scale-huge"] = (
        ["reproduce", "shortcut-saturation", "--scale", "huge", "--lab", rlab, "--out", rout],
        ("--scale",), "quick", [rlab, rout],
    )
    cases["reproduce:device-tpu"] = (
        ["reproduce", "shortcut-saturation", "--device", "tpu", "--lab", rlab, "--out", rout],
        ("--device",), "cpu", [rlab, rout],
    )
    missing = base / "no-such-lab"
    cases["runs:missing-lab"] = (["runs", "--lab", missing, "--json"], ("--lab",), "no lab",
                                 [missing])
    cases["report:missing-lab"] = (["report", "--lab", missing, "--out", rout], ("--lab",),
                                   "no lab", [missing, rout])
    return cases


_BAD_IDS = list(_bad_cases(Path("x")))


@pytest.fixture(scope="module")
def bad_results(tmp_path_factory):
    base = tmp_path_factory.mktemp("bad")
    cases = _bad_cases(base)
    procs = cli_batch([argv for argv, *_ in cases.values()], cwd=base)
    return base, cases, dict(zip(cases, procs, strict=True))


@pytest.mark.parametrize("case", _BAD_IDS)
def test_bad_input_is_one_error_line_exit_2_and_writes_nothing(bad_results, case):
    base, cases, procs = bad_results
    _, flags, hint, must_not_exist = cases[case]
    line = assert_user_error(procs[case], *flags)
    if hint:
        assert hint in line, line
    for path in must_not_exist:
        assert not path.exists(), f"{path} was created"
    assert not (base / "rulelab-runs").exists()  # nor the default lab in the working directory


def test_bad_input_cases_behave_the_same_in_a_fresh_interpreter(bad_results, tmp_path):
    """The forking driver matches the installed ``rulelab`` script (rc and stderr)."""
    _, cases, procs = bad_results
    case = "train:layers-not-int"  # a parse error (typer), the most wrapper-sensitive path
    fresh = cli(*cases[case][0], cwd=tmp_path)
    assert (fresh.returncode, fresh.stderr) == (procs[case].returncode, procs[case].stderr)


def test_bad_input_leaves_an_existing_lab_byte_identical(trained):
    work, lab, _ = trained
    before = tree_digest(lab)
    assert "registry.sqlite" in before and len([k for k in before if k.endswith(".parquet")]) == 8
    report = work / "never.html"
    cases = [
        ["train", "mpsp", *TINY, *GRID, "--ratio", "1.5", "--lab", lab],
        ["train", "mpsp", *TINY, *GRID, "--heads", "3", "--d-model", "64", "--lab", lab],
        ["train", "mpsp", *TINY, *GRID, "--device", "tpu", "--lab", lab],
        ["train", "mpsp", *TINY, *GRID, "--layers", "abc", "--lab", lab],
        ["train", "mpsp", *TINY, *GRID, "--seeds", "0", "--lab", lab],
        ["train", "mpsp", *TINY, *GRID, "--foo", "--lab", lab],
        # valid flags, but the 8**4 space cannot hold 4000 + 2*32 distinct sequences
        ["train", "mpsp", *TINY, "--n-train", "4000", "--lab", lab],
        ["runs", "--lab", lab, "--foo"],
        ["report", "--lab", lab, "--out", report, "--foo"],
        ["data", "mpsp", "--vocab", "2", "--out", lab / "metrics" / "x.parquet"],
    ]
    procs = cli_batch(cases, cwd=work)
    for proc in procs:
        assert_user_error(proc)
    assert tree_digest(lab) == before
    assert not report.exists()


# --- a corrupt or missing store --------------------------------------------------------------
GARBAGE = b"this is not an SQLite database\n" * 64 + bytes(range(256))


def test_corrupt_registry_is_reported_and_left_untouched(tmp_path):
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "registry.sqlite").write_bytes(GARBAGE)
    out = tmp_path / "report.html"
    fresh = cli("runs", "--lab", lab, cwd=tmp_path)
    batch = cli_batch(
        [
            ["runs", "--lab", lab, "--json"],
            ["report", "--lab", lab, "--out", out],
            ["train", "mpsp", *TINY, "--quiet", "--lab", lab],
        ],
        cwd=tmp_path,
    )
    for proc in [fresh, *batch]:
        line = assert_user_error(proc, "registry.sqlite")
        assert "corrupt" in line, line
        assert proc.stdout == "", proc.stdout
    assert (lab / "registry.sqlite").read_bytes() == GARBAGE
    assert sorted(p.name for p in lab.iterdir()) == ["registry.sqlite"]  # no -wal/-shm, no dirs
    assert not out.exists()


def test_missing_lab_is_one_error_line_and_is_not_created(tmp_path):
    if Path("/nonexistent").exists():
        pytest.skip("/nonexistent exists on this machine")
    proc = cli("runs", "--lab", "/nonexistent", cwd=tmp_path)
    line = assert_user_error(proc, "--lab")
    assert "/nonexistent" in line
    assert not Path("/nonexistent").exists()
    assert os.listdir(tmp_path) == []  # no default lab either


def test_data_with_a_too_small_sequence_space_fails_cleanly(tmp_path):
    out = tmp_path / "small.parquet"
    proc = cli("data", "mpsp", "--vocab", "4", "--seq-len", "2", "--n-train", "10000",
               "--out", out, cwd=tmp_path)
    assert_user_error(proc, "--n-train", "--n-eval", "--vocab", "--seq-len")
    assert not out.exists()
    assert os.listdir(tmp_path) == []  # not even a temp file


# --- `rulelab runs` on labs without finished runs, and on labs of the old criterion -----------
def _pending_lab(path: Path, ratios=(0.5, 0.9), seeds=(0, 1)) -> list[str]:
    from rulelab.store import Lab
    from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

    configs = [MPSPRunConfig(seq_len=4, vocab=8, n_train=64, n_eval=32, epochs=6, ratio=r,
                             seed=s) for r in ratios for s in seeds]
    lab = Lab(path, create=True)
    lab.register([(c.run_id, c.flat()) for c in configs], "fresh")
    return [c.run_id for c in configs]


def test_runs_on_a_lab_where_nothing_has_finished(tmp_path):
    # issue 12: this raised KeyError "rate_table: runs has no column(s) ['generalized']"
    ids = _pending_lab(tmp_path / "lab")
    (tmp_path / "lab" / "metrics").mkdir(exist_ok=True)
    (tmp_path / "lab" / "metrics" / f"{ids[0]}.parquet").write_bytes(b"garbage, not parquet")
    res = cli("runs", "--lab", tmp_path / "lab", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "KeyError" not in res.stderr
    rows = [line for line in res.stdout.splitlines() if "(0/0)" in line]
    assert len(rows) == 2, res.stdout  # one row per ratio: no finished run, 2 unfinished
    for line in rows:
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        assert cells[-2:] == ["0", "2"], cells  # failed, unfinished
    assert "scale: n = 4, V = 8" in res.stdout and "not the paper's setting" in res.stdout


def test_runs_on_an_old_lab_recomputes_the_criterion(tmp_path):
    # A lab summarised by the old code (adv-only ``generalized``, ``first_epoch_100``): run a
    # saw adv 100% with val 0% (the flipped shortcut), run b learned the rule.
    from rulelab.store import Lab

    a, b, *_ = _pending_lab(tmp_path / "lab", ratios=(0.1,), seeds=(0, 1))
    lab = Lab(tmp_path / "lab")
    for run_id, val in ((a, 0.0), (b, 1.0)):
        rows = [(e, split, "acc", v) for e in (0, 2, 4, 6)
                for split, v in (("val", val if e else 0.5), ("adv", 1.0 if e else 0.5))]
        lab.write_metrics(run_id, pd.DataFrame(rows, columns=["epoch", "split", "metric",
                                                              "value"]).assign(run_id=run_id))
        lab.mark_done(run_id, {"generalized": True, "first_epoch_100": 2, "max_adv_acc": 1.0,
                               "final_adv_acc": 1.0, "final_val_acc": val, "transient": False,
                               "final_train_loss": 0.1, "final_epoch": 6,
                               "failed_reason": None})
    res = cli("runs", "--lab", tmp_path / "lab", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "50% [9%, 91%] (1/2)" in res.stdout  # val and adv: only b
    assert "100% [34%, 100%] (2/2)" in res.stdout  # adv-only (paper text): both
    assert "flipped shortcut" in res.stdout
