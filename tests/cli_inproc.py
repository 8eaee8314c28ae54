"""Run ``rulelab ARGV`` through the real entry point in this process (a fresh process per
command would pay the torch import): exit code, stdout and stderr as a CompletedProcess."""

import subprocess
import sys


def run_main(argv, capsys, monkeypatch) -> subprocess.CompletedProcess:
    from rulelab.cli import main

    monkeypatch.setattr(sys, "argv", ["rulelab", *map(str, argv)])
    capsys.readouterr()
    try:
        main()
        rc = 0
    except SystemExit as e:
        rc = e.code or 0
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, rc, out, err)


class NoCapture:
    """A ``capsys`` stand-in for :func:`run_main` in module-scoped fixtures, which have none."""

    def readouterr(self):
        return "", ""
