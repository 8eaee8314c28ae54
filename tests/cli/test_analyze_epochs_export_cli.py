"""``rulelab analyze … --epochs`` where weights are missing, and ``rulelab export tl``
(issue 10): what used to be a traceback or a silent drop is one ``error:`` line with exit
code 2 before anything is written, or — where some runs legitimately lack an epoch — a
``warning:`` line naming the runs left out.

Before: ``analyze ff`` on runs without final checkpoints → ``KeyError: 'subset'``; ``analyze
gradients`` there → an empty table, exit 0; ``--epochs all`` without snapshots → the final
checkpoint analysed as if asked; ``--epochs 1,8`` where one run lacks epoch 8 → that run
silently missing from epoch 8.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import torch

from cli_inproc import run_main
from labs import sweep, write

S_RECIPE = """experiment: s
task: mpsp
base: {layers: 1, heads: 1, d_model: 16, d_mlp: 16, seq_len: 5, vocab: 12, n_train: 96,
       n_eval: 32, eval_every: 5, epochs: 20}
seeds: 2
"""
M_RECIPE = """experiment: m
task: modular
base: {p: 11, width: 8, epochs: 60, eval_every: 5, log_eval_steps: 3}
seeds: 2
"""


@pytest.fixture(scope="module")
def labs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("epochs")
    out = {}
    for name, text, snapshots in (("s", S_RECIPE, 0), ("s-snap", S_RECIPE, 3),
                                  ("m-snap", M_RECIPE, 3)):
        recipe = text + (f"execution: {{snapshots: {snapshots}}}\n" if snapshots else "")
        sweep(write(base, name, recipe), base / name)
        out[name] = base / name
    return out


@pytest.fixture
def copy(labs, tmp_path):
    def make(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(labs[name], dst)
        return dst
    return make


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def one_error(res, *names: str) -> str:
    shown = f"rc {res.returncode}\nstderr {res.stderr!r}\nstdout {res.stdout[-500:]!r}"
    assert res.returncode == 2, shown
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    assert "Traceback" not in res.stdout + res.stderr, shown
    assert all(n in lines[0] for n in names), shown
    return lines[0]


@pytest.mark.parametrize("analysis", ["gradients", "ablation"])
def test_all_without_snapshots_is_refused_not_final(analysis, copy, capsys, monkeypatch):
    lab = copy("s")
    before = digest(lab)
    res = run_main(["analyze", analysis, "--epochs", "all", "--lab", lab], capsys, monkeypatch)
    line = one_error(res, "--epochs", "all", "--snapshots")
    assert "use final" in line and digest(lab) == before


@pytest.mark.parametrize(("lab_name", "analysis"), [("s", "gradients"), ("m-snap", "ff"),
                                                     ("m-snap", "swap")])
def test_final_without_checkpoints_is_one_line(lab_name, analysis, copy, capsys, monkeypatch):
    lab = copy(lab_name)
    for p in (lab / "checkpoints").glob("*.pt"):
        p.unlink()
    before = digest(lab)
    res = run_main(["analyze", analysis, "--lab", lab], capsys, monkeypatch)
    # issue 24: the reading check first names the missing checkpoints, in one warning line
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 1 and "(missing)" in warnings[0] and "rulelab verify" in warnings[0]
    res.stderr = res.stderr.replace(warnings[0] + "\n", "")
    line = one_error(res, "--epochs", "final checkpoint")
    assert ("stored snapshot epoch (0, 1, 8, 60)" in line) == (lab_name == "m-snap"), line
    assert digest(lab) == before and not (lab / "analyses").exists()


def test_an_epoch_some_runs_lack_is_a_warning_naming_them(copy, capsys, monkeypatch):
    lab = copy("m-snap")
    gone = sorted(p.name for p in (lab / "snapshots").iterdir())[0]
    (lab / "snapshots" / gone / f"{8:09d}.pt").unlink()
    res = run_main(["analyze", "ff", "--epochs", "1,8", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and gone in warnings[0] and "8 (1 of 2" in warnings[0], res.stderr
    import pandas as pd

    table = pd.concat(pd.read_parquet(p) for p in (lab / "analyses" / "ff").glob("*.parquet"))
    assert table.groupby("epoch")["run_id"].nunique().to_dict() == {1: 2, 8: 1}


def test_export_tl_writes_a_model_with_our_logits(copy, capsys, monkeypatch, tmp_path):
    pytest.importorskip("transformer_lens")
    from rulelab.models.tl_export import load_file
    from rulelab.store import Lab

    lab = copy("s-snap")
    run_id = Lab(lab).runs_json()[0]["run_id"]
    out = tmp_path / "out" / "m.pt"
    # a unique prefix names the run (issue 23), as `rulelab runs --ids` shows it
    res = run_main(["export", "tl", run_id[:6], "--lab", lab, "--epoch", "4", "--out", out],
                   capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    assert f"run {run_id} at epoch 4 as TransformerBridge" in res.stdout
    diff = float(res.stdout.rsplit("val inputs: ", 1)[1].split()[0])
    assert diff < 1e-5
    assert f"load_file({str(out)!r})" in res.stdout  # the loader is printed
    payload = torch.load(out, weights_only=True)
    assert payload["meta"]["run_id"] == run_id and payload["meta"]["epoch"] == 4
    assert load_file(out).cfg.attention_dir == "bidirectional"


@pytest.mark.parametrize(("argv", "names"), [
    (["zzz"], ("RUN_ID", "zzz")),
    (["RUN", "--epoch", "7"], ("--epoch: 7", "stored snapshot epochs are 0, 1, 4, 20",
                               "leave --epoch out for the final checkpoint")),
    (["RUN", "--epoch", "-1"], ("--epoch",)),
    (["RUN", "--out", "m.txt"], ("--out", ".pt")),
    (["RUN", "--out", "."], ("--out", "directory")),
    (["MLP"], ("RUN_ID", "EnsembleMLP")),
])
def test_export_tl_bad_input(argv, names, copy, capsys, monkeypatch, tmp_path):
    from rulelab.store import Lab

    lab = copy("s-snap" if argv[0] != "MLP" else "m-snap")
    run_id = Lab(lab).runs_json()[0]["run_id"]
    argv = [run_id if a in ("RUN", "MLP") else a for a in argv]
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before = digest(lab)
    one_error(run_main(["export", "tl", *argv, "--lab", lab], capsys, monkeypatch), *names)
    assert digest(lab) == before and list(work.iterdir()) == []


def test_export_tl_without_transformer_lens_names_the_install(copy, capsys, monkeypatch,
                                                              tmp_path):
    import sys

    from rulelab.store import Lab

    lab = copy("s-snap")
    monkeypatch.setitem(sys.modules, "transformer_lens", None)  # as if not installed
    monkeypatch.chdir(tmp_path)
    run_id = Lab(lab).runs_json()[0]["run_id"]
    one_error(run_main(["export", "tl", run_id, "--lab", lab], capsys, monkeypatch),
              "pip install transformer_lens")
    assert not (tmp_path / f"{run_id}-tl.pt").exists()
