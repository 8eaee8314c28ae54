"""A CPU training step computes on one thread (:mod:`rulelab.engine.threads`, engine 4): study
S's numbers no longer depend on how many threads the process has — they did (LayerNorm's and
the matmuls' long gradient reductions split across threads), which this test shows first."""

import contextlib

import pytest
import torch

from rulelab.engine import base, threads
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

# The ladder's first rung's shapes (N 2,048: reductions long enough to be split), 2 members.
CFGS = [MPSPRunConfig(layers=2, d_model=24, d_mlp=48, n_train=2048, n_eval=64, seed=s,
                      epochs=3) for s in (0, 1)]


def _trained(n_threads: int, engine: str) -> dict[str, torch.Tensor]:
    before = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        tr = MPSPTrainer(CFGS, Settings(engine=engine))
        tr.fit()
        assert torch.get_num_threads() == n_threads  # restored after training
        return {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    finally:
        torch.set_num_threads(before)


def _equal(a: dict, b: dict) -> bool:
    return all(torch.equal(a[n], b[n]) for n in a)


@pytest.mark.parametrize("engine", ["eager", "4"])  # the transformer's 8, and 4
def test_training_numbers_do_not_depend_on_the_process_threads(engine):
    assert _equal(_trained(1, engine), _trained(2, engine))


def test_without_the_one_thread_region_engine_4s_numbers_move_with_the_threads(monkeypatch):
    """The property above is not vacuous at these sizes. (Engine 8 sums its long reductions
    in its own kernels or as one library call's inner reduction, and here gave the same
    numbers even without the region; the region keeps that from resting on the library.)"""
    monkeypatch.setattr(base, "training_threads", lambda device: contextlib.nullcontext())
    assert not _equal(_trained(1, "4"), _trained(2, "4"))


def test_the_region_sets_one_thread_restores_and_nests():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with threads.training_threads("cpu"):
            assert torch.get_num_threads() == threads.TRAINING_THREADS == 1
            with threads.training_threads("cpu"):
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 1  # the inner region restores nothing
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), threads.training_threads("cpu"):
            raise RuntimeError("a failed step")
        assert torch.get_num_threads() == 2  # restored on an error too
    finally:
        torch.set_num_threads(before)
