"""``rulelab show RUN`` and ``lab.runs`` indexed by run id (issue 23 item 4).

``show`` names a run by any unique prefix and prints what the lab holds of it: status and
versions, config, the summary ``rulelab runs`` reads, one sparkline per metric and split (the
values the metrics file holds, scaled 0…1 for accuracies), the checkpoint and snapshots
stored, the analyses with rows of it; ``--out`` draws the curves. An unknown or ambiguous
prefix is one error line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import rulelab
from cli_inproc import run_main
from labs import tiny_lab
from rulelab.hardware import cpu_kernels
from rulelab.report.run_curves import BARS, sparkline

SNAPSHOTS = "execution: {snapshots: 3}\n"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tiny_lab(tmp_path_factory.mktemp("show"), "show", SNAPSHOTS)


@pytest.fixture
def lab(base, tmp_path) -> Path:
    shutil.copytree(base, tmp_path / "lab")
    return tmp_path / "lab"


def section(stdout: str, name: str) -> list[str]:
    """The indented lines under the heading ``name``."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split(" (")[0] == name)
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        out.append(line)
    return out


def test_show_prints_the_run_its_config_summary_curves_and_files(lab, capsys, monkeypatch):
    loaded = rulelab.load(lab)
    rid = loaded.where("layers == 2 and seed == 1").index[0]
    row = loaded.runs.loc[rid]
    res = run_main(["show", rid[:5], "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    lines = out.splitlines()
    assert lines[0] == f"run {rid} ({loaded.short_ids[rid]}) · experiment show · task mpsp"
    assert lines[1] == "  status: done"
    assert lines[2].startswith("  code ") and " · device cpu · created " in lines[2]
    config = " · ".join(section(out, "config")).replace("   ", " ")
    assert "layers 2" in config and "seed 1" in config and "epochs 10" in config
    summary = " · ".join(section(out, "summary"))
    assert f"final_val_acc {row['final_val_acc']:.4g}" in summary
    assert f"generalized {row['generalized']}" in summary
    curves = {tuple(line.split()[:2]): line for line in section(out, "curves")}
    m = loaded.metrics[loaded.metrics["run_id"] == rid]
    assert set(curves) == set(zip(m["metric"], m["split"], strict=True))
    val = m[(m["metric"] == "acc") & (m["split"] == "val")].sort_values("epoch")["value"]
    bars = curves["acc", "val"].split()[2]
    assert len(bars) == 3 == len(val)  # epochs 0, 5, 10
    assert bars == "".join(BARS[round(v * 7)] for v in val)  # on the 0…1 scale
    assert curves["acc", "val"].endswith(f"{val.iloc[0]:.3g} → {val.iloc[-1]:.3g} (max "
                                         f"{val.max():.3g})")
    snaps = ", ".join(map(str, loaded.lab.snapshot_epochs(rid)))
    assert f"  final checkpoint · weight snapshots: epochs {snaps}" in lines
    state = loaded.lab.load_checkpoint(rid)  # what else fixed its numbers: pass, precision, CPU
    step = min(state["micro_batch"], state["step_examples"])
    tile = f", tiles of {state['tile']}" if state.get("tile") else ""  # engine 11's
    assert f"  numerics: steps summed in passes of {step:,}{tile} · fp32 · on a {cpu_kernels()} " \
           "CPU from epoch 0" in lines
    assert "  analyses: none" in lines


def test_show_reads_the_numerics_from_the_checkpoint(lab, capsys, monkeypatch):
    """A run resumed on another kind of CPU and trained in passes of 64: what its checkpoint
    holds is printed, not this machine's kind or the settings' pass; a checkpoint whose hash
    no longer matches the lab's record is not read (no numerics line)."""
    from rulelab.cli.show import numerics_line

    class Held:  # a lab holding one checkpoint
        def __init__(self, state):
            self.state = state

        def load_checkpoint(self, run_id):
            return self.state

    state = {"micro_batch": 512, "step_examples": 64, "precision": "bf16",
             "cpus": [[0, "AuthenticAMD AVX2"], [7, "GenuineIntel AVX512"]]}
    assert numerics_line(Held(state), "r") == (
        "numerics: steps summed in passes of 64 · bf16 · on a AuthenticAMD AVX2 CPU from epoch "
        "0, then a GenuineIntel AVX512 CPU from epoch 7")
    assert numerics_line(Held({"micro_batch": 128, "step_examples": 2048}), "r") == \
        "numerics: steps summed in passes of 128"
    assert numerics_line(Held({"micro_batch": 4096, "step_examples": 2048, "tile": 48}), "r") == \
        "numerics: steps summed in passes of 2,048, tiles of 48"
    assert numerics_line(Held({}), "r") is None and numerics_line(Held(None), "r") is None
    loaded = rulelab.load(lab)
    rid = loaded.where("layers == 1 and seed == 0").index[0]
    changed = {**loaded.lab.load_checkpoint(rid), "precision": "bf16"}
    loaded.lab.save_checkpoint(rid, changed)  # its recorded hash now differs: damaged
    res = run_main(["show", rid[:6], "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    assert "  final checkpoint" in res.stdout and "numerics" not in res.stdout


def test_show_lists_the_analyses_with_rows_of_the_run(lab, capsys, monkeypatch):
    loaded = rulelab.load(lab)
    rid, other = loaded.where("layers == 1").index
    res = run_main(["analyze", "ablation", "--lab", lab, "--where", f"run_id == '{rid}'"],
                   capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    table = rulelab.load(lab).analyses["ablation"]
    n = int((table["run_id"] == rid).sum())
    assert n > 0 and set(table["run_id"]) == {rid}
    shown = run_main(["show", rid, "--lab", lab], capsys, monkeypatch).stdout.splitlines()
    assert f"    ablation: {n} rows at epoch 10 (post-hoc)" in shown
    assert "  analyses: none" in run_main(["show", other, "--lab", lab], capsys,
                                          monkeypatch).stdout.splitlines()


def test_show_out_draws_a_figure(lab, tmp_path, capsys, monkeypatch):
    from PIL import Image

    rid = rulelab.load(lab).runs.index[0]
    out = tmp_path / "fig" / "run.png"
    res = run_main(["show", rid[:8], "--lab", lab, "--out", out], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    assert f"wrote {out}" in res.stdout
    with Image.open(out) as img:
        width, height = img.size
        colours = len(img.convert("RGB").getcolors(maxcolors=1 << 24))
    assert width > 2 * height > 0 and colours > 50  # three panels, lines drawn
    bad = run_main(["show", rid[:8], "--lab", lab, "--out", tmp_path / "x.jpg"], capsys,
                   monkeypatch)
    assert bad.returncode == 2 and "--out" in bad.stderr and ".png" in bad.stderr


def test_an_unknown_or_ambiguous_run_is_one_line(lab, capsys, monkeypatch):
    from rulelab.store import Lab

    res = run_main(["show", "zzz", "--lab", lab], capsys, monkeypatch)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1
    assert lines[0].startswith("error: RUN: 'zzz' is not a run of") and "runs --ids" in lines[0]
    rows = Lab(lab).runs_json()
    real = rows[0]["run_id"]
    twin = real[:9] + ("fff" if real[9:] != "fff" else "000")
    monkeypatch.setattr(Lab, "runs_json", lambda self: [*rows, {**rows[0], "run_id": twin}])
    res = run_main(["show", real[:4], "--lab", lab], capsys, monkeypatch)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1
    assert f"error: RUN: '{real[:4]}' is ambiguous" in lines[0] and "2 runs start" in lines[0]


def test_sparkline_scales_and_resamples():
    assert sparkline([0.0, 0.5, 1.0], 0.0, 1.0) == BARS[0] + BARS[4] + BARS[7]
    assert sparkline([2.0, float("nan"), 3.0], 2.0, 3.0) == BARS[0] + " " + BARS[7]
    long = sparkline([i / 99 for i in range(100)], 0.0, 1.0, width=10)
    assert len(long) == 10 and long[-1] == BARS[7] and long[0] == BARS[1]  # value 9/99
    assert sparkline([5.0, 5.0], 5.0, 5.0) == BARS[0] * 2  # a flat curve


def test_lab_runs_is_indexed_by_run_id(lab):
    loaded = rulelab.load(lab)
    runs = loaded.runs
    assert list(runs.index) == list(runs["run_id"]) and runs.index.is_unique
    rid = runs["run_id"].iloc[0]  # positional access as the notebook uses it
    assert runs.loc[rid, "final_val_acc"] == runs["final_val_acc"].iloc[0]
    merged = loaded.metrics.merge(runs[["run_id", "layers"]], on="run_id")  # no ambiguity
    assert len(merged) == len(loaded.metrics)
    assert runs.groupby("run_id").size().to_dict() == dict.fromkeys(runs.index, 1)
    assert list(loaded.where("layers == 2").index) == list(runs.index[runs["layers"] == 2])
    first, metrics = loaded
    assert first is runs and metrics is loaded.metrics
