"""A new user's first steps after ``make quick`` (issue 10): the reproduction ends by printing
the commands that inspect its lab — and each of them works — and a command pointed at
``./rulelab-runs``, which holds labs but is none, names the labs it holds and ``--lab``."""

from __future__ import annotations

import contextlib
import io
import shlex
import shutil

import pytest

from cli_inproc import run_main


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    """``rulelab reproduce coexistence --scale tiny`` run once in an empty folder (defaults:
    lab ``rulelab-runs/coexistence-tiny``, report ``reports/coexistence-tiny.html``)."""
    base = tmp_path_factory.mktemp("quick")
    mp = pytest.MonkeyPatch()
    mp.delenv("RULELAB_HOME", raising=False)
    mp.chdir(base)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            res = run_main(["reproduce", "coexistence", "--scale", "tiny", "--quiet"],
                           _Capture(), mp)
    finally:
        mp.undo()
    assert res.returncode == 0, err.getvalue()
    return base, out.getvalue()


class _Capture:
    """A stand-in for ``capsys`` in a module-scoped fixture (output goes to the redirects)."""

    def readouterr(self):
        return "", ""


def test_reproduce_ends_with_the_commands_that_inspect_its_lab(reproduced):
    base, out = reproduced
    lab = "rulelab-runs/coexistence-tiny"
    tail = out.rstrip("\n").splitlines()[-6:]
    assert tail == [
        f"inspect the lab {lab}:",
        f"  rulelab runs --lab {lab}",
        f"  rulelab status --lab {lab}",
        f"  rulelab report --lab {lab} --out reports/coexistence-tiny.html",
        f"  rulelab analyze ff --lab {lab}  (also: swap, neurons, order, dd)",
        f"  python -c 'import rulelab; lab = rulelab.load(\"{lab}\"); print(lab.runs)'",
    ]
    assert (base / lab / "registry.sqlite").is_file()


def test_every_printed_command_works(reproduced, capsys, monkeypatch):
    base, out = reproduced
    monkeypatch.chdir(base)
    monkeypatch.delenv("RULELAB_HOME", raising=False)
    lines = [line.strip() for line in out.splitlines() if line.startswith("  rulelab ")]
    assert len(lines) == 4
    for line in lines:
        argv = shlex.split(line.split("  (also")[0])[1:]
        res = run_main(argv, capsys, monkeypatch)
        assert res.returncode == 0, (line, res.stderr)
    (python,) = [line for line in out.splitlines() if line.startswith("  python -c ")]
    code = shlex.split(python)[2]
    import rulelab

    scope: dict = {}
    exec(code.replace("print(lab.runs)", "runs = lab.runs"), scope)  # noqa: S102
    assert len(scope["runs"]) == 4 and set(scope["runs"].status) == {"done"}
    assert isinstance(scope["lab"], type(rulelab.load(base / "rulelab-runs/coexistence-tiny")))


@pytest.mark.parametrize("command", [["runs"], ["runs", "--json"], ["status"],
                                     ["report", "--out", "r.html"], ["analyze", "phases"]])
def test_a_folder_of_labs_names_them_and_the_flag(command, reproduced, tmp_path, capsys,
                                                  monkeypatch):
    base, _ = reproduced
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RULELAB_HOME", raising=False)
    for name in ("shortcut-saturation-quick", "coexistence-quick"):
        shutil.copytree(base / "rulelab-runs/coexistence-tiny", tmp_path / "rulelab-runs" / name)
    (tmp_path / "rulelab-runs" / "notes").mkdir()  # a folder without a registry is no lab
    res = run_main(command, capsys, monkeypatch)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == (
        "error: --lab: no lab at rulelab-runs, but it holds 2: rulelab-runs/coexistence-quick, "
        "rulelab-runs/shortcut-saturation-quick; pick one with --lab, e.g. --lab "
        "rulelab-runs/coexistence-quick\n")
    assert not (tmp_path / "r.html").exists()


def test_an_empty_or_missing_folder_keeps_the_plain_message(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RULELAB_HOME", raising=False)
    res = run_main(["runs"], capsys, monkeypatch)
    assert res.returncode == 2 and res.stderr.startswith(f"error: no lab at {tmp_path}")
    assert "--lab" in res.stderr and not (tmp_path / "rulelab-runs").exists()
