"""Study S's cost model for the planner (``Task.cost``; :mod:`rulelab.sweep.estimate`): FLOPs of
the transformer's CLS readout, and a paper-scale member's memory against the measured."""

from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.sweep.estimate import run_cost

TINY = dict(seq_len=5, vocab=12, n_train=128, n_eval=32, d_model=16, d_mlp=16, epochs=100)


def test_transformer_cost_counts_matmuls_of_a_cls_readout():
    c = MPSPRunConfig(**TINY, layers=2, heads=2, eval_every=10)
    T, d, f = 6, 16, 16
    qkv, rest = 3 * d * d, d * d + 2 * d * f + 2 * T * d
    macs = T * (qkv + rest) + T * qkv + rest + d * 2  # last layer: the CLS row only
    cost = run_cost(c)
    assert cost.flops_per_epoch == 6 * macs * 128
    assert cost.flops_per_eval == 2 * macs * (128 + 2 * 32)
    assert cost.flops(c) == 100 * cost.flops_per_epoch + 11 * cost.flops_per_eval
    assert cost.flops(c, 50) == 50 * cost.flops_per_epoch + 5 * cost.flops_per_eval
    assert cost.passes(c) == 100 * 1 + 11 * 3  # one micro-batch a step; 3 splits to evaluate
    bigger = run_cost(MPSPRunConfig(**{**TINY, "n_train": 4096}, layers=2, heads=2))
    assert bigger.member_bytes > cost.member_bytes and bigger.passes_per_epoch == 8


def test_paper_scale_member_estimate_matches_measured_order():
    """Measured on this CPU (peak RSS over an evaluation and an epoch of 8 members at the
    paper's sizes, micro-batch 512): 39 MiB per 1L·1H member, 61 MiB per 2L·2H member."""
    for (layers, heads), measured in (((1, 1), 39), ((2, 2), 61)):
        est = run_cost(MPSPRunConfig(layers=layers, heads=heads, epochs=3)).member_bytes / 2**20
        assert measured / 1.3 < est < measured * 1.3, (layers, heads, est)


def test_a_micro_batch_above_the_step_costs_the_step():
    """A pass holds at most a step's examples (and an evaluation chunk at most a split's): a
    GPU's micro-batch of 2^19 on the paper's N = 16,384 was once estimated at 24 GB a member,
    against 1 GB measured on the H200, which shrank the planner's ensembles."""
    paper = MPSPRunConfig(layers=2, heads=2, epochs=3)
    full = run_cost(paper, micro_batch=16384, eval_chunk=16384).member_bytes
    assert run_cost(paper, micro_batch=2**19, eval_chunk=2**19).member_bytes == full
    assert run_cost(paper, micro_batch=8192).member_bytes < full  # a pass below the step
    mini = MPSPRunConfig(**TINY, batch_size=32)
    assert run_cost(mini, micro_batch=4096).member_bytes == run_cost(mini, 32).member_bytes
