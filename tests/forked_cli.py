"""``rulelab`` processes that start in milliseconds, to be killed at chosen moments.

A fresh ``rulelab`` process spends ~3 s importing torch before it does anything, so a test that
kills many of them at random moments would mostly kill imports. :class:`ForkedCLI` keeps one
server process that has imported ``rulelab.cli`` (and torch, without running any torch op, so
forking is safe) and forks a child per command: the child is one real ``rulelab ARGV``
invocation (the real entry point, its own pid, session and process group, exit status), only
without the import time. Kill it, and its whole process group, with :meth:`ForkedCLI.kill`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_SERVER = r"""
import importlib, json, os, sys, traceback
import rulelab.cli as cli  # the expensive imports happen once, here
for name in sys.argv[1:]:
    importlib.import_module(name)
print("ready", flush=True)
for line in sys.stdin:
    argv, log = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # one ``rulelab ARGV`` process, in its own session and process group
        code = 1
        try:
            os.setsid()
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            sys.argv = ["rulelab", *argv]
            cli.main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""

# what `rulelab sweep` imports lazily (torch first of all): imported by the server, up front
SWEEP_MODULES = ("torch", "rulelab.cli.sweep", "rulelab.sweep", "rulelab.sweep.progress",
                 "rulelab.engine.runner")
# … and the toy study, registered (the server's environment needs tests/ on PYTHONPATH:
# labs.toy_env)
TOY_MODULES = (*SWEEP_MODULES, "toy_study.registered", "toy_study.trainer")


class ForkedCLI:
    """A server forking one ``rulelab`` process at a time (use as a context manager)."""

    def __init__(self, env: dict, preload: tuple[str, ...] = SWEEP_MODULES) -> None:
        self._server = subprocess.Popen([sys.executable, "-c", _SERVER, *preload], env=env,
                                        text=True, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE)
        assert self._server.stdout.readline() == "ready\n", "the fork server did not start"
        self.pid: int | None = None

    def __enter__(self) -> ForkedCLI:
        return self

    def __exit__(self, *exc) -> None:
        if self.pid is not None:
            self.kill()
        self._server.stdin.close()
        self._server.wait(timeout=30)

    def start(self, argv: list, log: Path) -> int:
        """Start ``rulelab ARGV`` (stdout and stderr appended to ``log``); returns its pid."""
        assert self.pid is None, "one process at a time"
        self._server.stdin.write(json.dumps([[str(a) for a in argv], str(log)]) + "\n")
        self._server.stdin.flush()
        self.pid = int(self._server.stdout.readline())
        return self.pid

    def wait(self) -> int:
        """Its exit status (negative: killed by that signal)."""
        line = self._server.stdout.readline()
        assert line, "the fork server died"
        self.pid = None
        return int(line)

    def pause(self) -> None:
        """SIGSTOP its process group and wait until it has stopped."""
        os.killpg(self.pid, signal.SIGSTOP)
        while _state(self.pid) not in ("T", "t", "Z", None):
            time.sleep(0.0005)

    def resume(self) -> None:
        os.killpg(self.pid, signal.SIGCONT)

    def kill(self) -> int:
        """SIGKILL its whole process group; returns its exit status: ``-SIGKILL`` where the
        kill landed, its own code where it had ended first."""
        with contextlib.suppress(ProcessLookupError):  # ended, and reaped by the server
            os.killpg(self.pid, signal.SIGKILL)
        return self.wait()


def _state(pid: int) -> str | None:
    """The process state letter from ``/proc/<pid>/stat`` (None once gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
