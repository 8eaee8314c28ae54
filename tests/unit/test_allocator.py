"""glibc heap tuning (rulelab.train.allocator, issue 13): no page faults for a repeated large
allocation, applied once by the engine. Before issue 13 every micro-batch's large activations
came from fresh mmap'd pages (≈ 135,000+ minor page faults per epoch of 4 paper-config members).
"""

import resource

import pytest
import torch

from rulelab.train import allocator


def _faults_of(fn) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _big_step() -> None:
    x = torch.ones(16 << 20)  # 64 MiB: above glibc's largest mmap threshold
    del x


def test_a_repeated_large_allocation_stops_page_faulting():
    if not allocator.keep_heap():
        pytest.skip("not glibc, or MALLOC_* set in the environment")
    faults = [_faults_of(_big_step) for _ in range(10)]
    # glibc's default faults all 16,384 pages in again on every step; with the heap kept, the
    # heap grows for the first steps (alignment and fragmentation) and then stops faulting.
    assert all(f < 1000 for f in faults[-4:]), faults


def test_the_engine_applies_it(monkeypatch):
    from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
    from rulelab.train.runner import trainer_class

    monkeypatch.setattr(allocator, "_applied", None)  # as in a fresh process
    trainer_class("mpsp")([MPSPRunConfig(n_train=64, n_eval=16, epochs=1)])
    assert allocator._applied is not None  # decided once, for the whole process
