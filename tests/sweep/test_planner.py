"""The sweep planner: shape groups, memory-capped even chunks, seeds interleaved across cells."""

from collections import Counter

from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.sweep.estimate import GiB, run_cost, speed
from rulelab.sweep.planner import Plan, describe_plan, even_split, interleave, plan_chunks

TINY = dict(seq_len=5, vocab=12, n_train=128, n_eval=32, d_model=16, d_mlp=16, epochs=100)


def grid(layers=(1, 2), ratios=(0.5, 0.9), seeds=range(4)):
    return [MPSPRunConfig(**TINY, layers=n, heads=1, ratio=r, seed=s)
            for n in layers for r in ratios for s in seeds]


def test_interleave_puts_the_kth_seed_of_every_cell_before_the_next():
    runs = interleave(grid(layers=(1,)))
    assert [(c.seed, c.ratio) for c in runs[:4]] == [(0, 0.5), (0, 0.9), (1, 0.5), (1, 0.9)]


def test_even_split_sizes_differ_by_at_most_one():
    assert [len(p) for p in even_split(list(range(10)), 4)] == [4, 3, 3]
    assert [len(p) for p in even_split(list(range(8)), 4)] == [4, 4]
    assert [len(p) for p in even_split(list(range(3)), 64)] == [3]


def test_chunks_share_shapes_and_epoch_cover_every_run_once_and_alternate_shapes():
    configs = grid(seeds=range(6))  # 2 shapes × 12 runs
    chunks, caps = plan_chunks(configs, {}, max_members=5, budget_bytes=64 * GiB)
    assert Counter(r for c in chunks for r in c.run_ids) == Counter(c.run_id for c in configs)
    assert all(len({cfg.shape_key() for cfg in c.configs}) == 1 for c in chunks)
    assert [len(c.configs) for c in chunks] == [4, 4, 4, 4, 4, 4]  # 12 → 3 × 4, not 5 + 5 + 2
    assert [c.label for c in chunks[:4]] == ["1L·1H", "2L·1H", "1L·1H", "2L·1H"]
    first = chunks[0]  # seeds 0–1 of both cells of its shape: an early rate for each cell
    assert {(c.seed, c.ratio) for c in first.configs} == {(0, 0.5), (0, 0.9), (1, 0.5), (1, 0.9)}
    assert [c.index for c in chunks] == list(range(6)) and caps == {"1L·1H": 5, "2L·1H": 5}


def test_resumed_runs_group_by_epoch_and_come_first():
    configs = grid(layers=(1,))
    start = {configs[0].run_id: 40, configs[1].run_id: 40}
    chunks, _ = plan_chunks(configs, start, max_members=64, budget_bytes=64 * GiB)
    assert [(c.start_epoch, len(c.configs)) for c in chunks] == [(40, 2), (0, 6)]
    assert chunks[0].flops < chunks[1].flops  # 60 epochs left instead of 100, fewer runs


def test_memory_budget_caps_members_per_chunk():
    configs = grid(layers=(2,), seeds=range(8))
    member = run_cost(configs[0]).member_bytes
    chunks, caps = plan_chunks(configs, {}, max_members=64, budget_bytes=3 * member + 1)
    assert caps == {"2L·1H": 3} and max(len(c.configs) for c in chunks) == 3
    chunks, _ = plan_chunks(configs, {}, max_members=64, budget_bytes=1)
    assert all(len(c.configs) == 1 for c in chunks)  # never below one member


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
    assert speed("cpu").seconds(60e9, 1000) == 1.0 + 1000 * 3e-3


def test_paper_scale_member_estimate_matches_measured_order():
    """Measured on this CPU (peak RSS over an evaluation and an epoch of 8 members at the
    paper's sizes, micro-batch 512): 39 MiB per 1L·1H member, 61 MiB per 2L·2H member."""
    for (layers, heads), measured in (((1, 1), 39), ((2, 2), 61)):
        est = run_cost(MPSPRunConfig(layers=layers, heads=heads, epochs=3)).member_bytes / 2**20
        assert measured / 1.3 < est < measured * 1.3, (layers, heads, est)


def test_modular_cost_follows_the_eval_schedule():
    c = ModularRunConfig(p=31, width=65, epochs=300, eval_every=100, log_eval_steps=20)
    cost = run_cost(c)
    assert cost.flops_per_epoch == 3 * 2 * 65 * 31 * round(31 * 31 * 0.5)
    assert cost.eval_epochs[0] == 0 and cost.eval_epochs[-1] == 300
    assert cost.flops(c) > cost.flops(c, 150) > cost.flops(c, 300) == 0


def test_dry_run_text_labels_estimates():
    configs = grid()
    chunks, caps = plan_chunks(configs, {}, max_members=4, budget_bytes=GiB)
    plan = Plan("e", "mpsp", len(configs), 4, 0, 0, chunks, GiB, "1 GiB", 4, caps)
    text = "\n".join(describe_plan(plan, cpu=speed("cpu"), gpu=speed("cuda", "bf16")))
    assert "4 chunks of 4 members" in text and "to train 16" in text
    assert "estimate on this CPU" in text and "(estimate)" in text and "memory (est.)" in text
    assert "TFLOP/s bf16 + 0.5 ms a pass, assumed" in text
