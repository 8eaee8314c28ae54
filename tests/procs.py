"""Processes from ``/proc`` (Linux): who is whose child, who runs a Ray chunk task, and who is
still alive — for the Ray tests, which kill a chunk's worker and check what ran where."""

from __future__ import annotations

import os
import time

CHUNK_TASK = b"ray::rulelab-chunk"  # Ray names a worker process after the task it runs


def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read()


def descendants(root: int | None = None) -> list[int]:
    """Every live process below ``root`` (default: this process)."""
    root = os.getpid() if root is None else root
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        p = pid = int(entry)
        try:
            while p > 1 and p != root:
                p = parent(p)
        except OSError:
            continue
        if p == root and pid != root:
            found.append(pid)
    return found


def mentioning(text: str) -> list[int]:
    """Every live process whose command line contains ``text`` (e.g. a Ray session folder)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if text.encode() in cmdline(int(entry)):
                    found.append(int(entry))
            except OSError:
                continue
    return found


def chunk_workers(root: int | None = None) -> dict[int, int]:
    """``{pid: parent pid}`` of the processes below ``root`` now running a chunk task (their
    parent is the raylet of the node they run on)."""
    found = {}
    for pid in descendants(root):
        try:
            if cmdline(pid).startswith(CHUNK_TASK):
                found[pid] = parent(pid)
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, timeout: float = 20) -> list[int]:
    """Wait until none of ``pids`` runs; returns those still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [p for p in left if alive(p)]
    return left
