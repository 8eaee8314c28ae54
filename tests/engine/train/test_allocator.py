"""glibc heap tuning (rulelab.engine.allocator, issue 13): large activations come from the kept
heap, not from fresh mmap'd pages, applied once by the engine. Before issue 13 every
micro-batch's large activations were mmap'd afresh and page-faulted in (135,000–227,000 minor
page faults per epoch of 4 paper-config members, 0 after).

Checked in fresh processes, as a training command runs, through glibc's own accounting
(``mallinfo2``: bytes in mmap'd blocks) rather than page-fault counts, which this VM's memory
reclaim (DAMON pageout) also moves.
"""

import json
import os
import subprocess
import sys

import pytest

from rulelab.engine import allocator

PROBE = """
import ctypes, json, sys, torch
from rulelab.engine import allocator

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
                .split()]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
applied = allocator.keep_heap() if sys.argv[1] == "keep" else False
mapped = []
for _ in range(4):
    x = torch.ones(16 << 20)  # 64 MiB: above glibc's largest mmap threshold
    mapped.append(libc.mallinfo2().hblkhd)  # bytes in mmap'd blocks while x is alive
    del x
print(json.dumps([applied, mapped]))
"""


def _mapped(mode: str) -> tuple[bool, list[int]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         env=env)
    if out.returncode:
        pytest.skip(f"no glibc mallinfo2 here: {out.stderr.strip().splitlines()[-1]}")
    applied, mapped = json.loads(out.stdout)
    return applied, mapped


def test_large_allocations_come_from_the_kept_heap():
    applied, kept = _mapped("keep")
    if not applied:
        pytest.skip("not glibc")
    _, default = _mapped("default")
    # glibc's default: each 64 MiB block is a fresh mmap (page-faulted in every step)
    assert all(m >= 64 << 20 for m in default), default
    # kept heap: served from the heap, reused step after step
    assert all(m < 64 << 20 for m in kept), kept


def test_the_engine_applies_it(monkeypatch, toy):
    from rulelab.engine.runner import trainer_class
    from toy_study import ToyRunConfig

    monkeypatch.setattr(allocator, "_applied", None)  # as in a fresh process
    trainer_class("toy")([ToyRunConfig(n_train=64, n_eval=16, epochs=1)])
    assert allocator._applied is not None  # decided once, for the whole process
