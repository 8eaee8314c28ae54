"""A CPU training step computes on one thread (:mod:`rulelab.engine.threads`, engine 4): study
S's numbers no longer depend on how many threads the process has — they did (LayerNorm's and
the matmuls' long gradient reductions split across threads), which this test shows first."""

import pytest
import torch
import torch.nn.functional as F

from rulelab.engine import threads
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


def test_without_the_one_thread_region_the_steps_reductions_move_with_the_threads():
    """The property above is not vacuous: the long reductions of a training step — LayerNorm's
    weight and bias gradients, a weight gradient summed over every row — give other bits on 2
    threads than on 1. Shown on the ops themselves, at the rows of a 4,096-example micro-batch
    (4 × 1,024 × 11 positions): whether a whole trainer's numbers move depends on the machine's
    libraries (they did on an AMD EPYC, AVX2, at the ladder's sizes; on an AMX Xeon, engines 4
    and 8 gave the same bits either way), and the region keeps them from depending on it."""
    gen = torch.Generator().manual_seed(0)
    rows, d = 4 * 1024 * 11, 24
    x = torch.randn(rows, d, generator=gen, requires_grad=True)
    w, b = torch.randn(d, generator=gen, requires_grad=True), torch.randn(d, generator=gen,
                                                                          requires_grad=True)
    g, other = torch.randn(rows, d, generator=gen), torch.randn(rows, 48, generator=gen)
    before, out = torch.get_num_threads(), []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            out.append([*torch.autograd.grad(F.layer_norm(x, (d,), w, b), (w, b), g),
                        x.detach().t() @ other])
    finally:
        torch.set_num_threads(before)
    assert not all(torch.equal(a, b) for a, b in zip(*out, strict=True))


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
