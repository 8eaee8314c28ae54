"""The sweep planner on the toy study: shape groups, memory-capped even chunks, seeds
interleaved across cells. The cost models of the studies are tested in their folders
(tests/studies/<study>/test_*_cost.py)."""

from collections import Counter

import pytest

from rulelab.sweep.estimate import GiB, run_cost, speed
from rulelab.sweep.planner import Plan, describe_plan, even_split, interleave, plan_chunks
from toy_study import ToyRunConfig

TINY = dict(n_train=128, n_eval=32, epochs=100)
pytestmark = pytest.mark.usefixtures("toy")  # run_cost looks the task up in the registry


def grid(widths=(8, 16), noises=(0.0, 0.2), seeds=range(4)):
    return [ToyRunConfig(**TINY, width=w, noise=n, seed=s)
            for w in widths for n in noises for s in seeds]


def test_interleave_puts_the_kth_seed_of_every_cell_before_the_next():
    runs = interleave(grid(widths=(8,)))
    assert [(c.seed, c.noise) for c in runs[:4]] == [(0, 0.0), (0, 0.2), (1, 0.0), (1, 0.2)]


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
    assert [c.label for c in chunks[:4]] == ["d4·w8", "d4·w16", "d4·w8", "d4·w16"]
    first = chunks[0]  # seeds 0–1 of both cells of its shape: an early rate for each cell
    assert {(c.seed, c.noise) for c in first.configs} == {(0, 0.0), (0, 0.2), (1, 0.0), (1, 0.2)}
    assert [c.index for c in chunks] == list(range(6)) and caps == {"d4·w8": 5, "d4·w16": 5}


def test_resumed_runs_group_by_epoch_and_come_first():
    configs = grid(widths=(8,))
    start = {configs[0].run_id: 40, configs[1].run_id: 40}
    chunks, _ = plan_chunks(configs, start, max_members=64, budget_bytes=64 * GiB)
    assert [(c.start_epoch, len(c.configs)) for c in chunks] == [(40, 2), (0, 6)]
    assert chunks[0].flops < chunks[1].flops  # 60 epochs left instead of 100, fewer runs


def test_memory_budget_caps_members_per_chunk():
    configs = grid(widths=(16,), seeds=range(8))
    member = run_cost(configs[0]).member_bytes
    chunks, caps = plan_chunks(configs, {}, max_members=64, budget_bytes=3 * member + 1)
    assert caps == {"d4·w16": 3} and max(len(c.configs) for c in chunks) == 3
    chunks, _ = plan_chunks(configs, {}, max_members=64, budget_bytes=1)
    assert all(len(c.configs) == 1 for c in chunks)  # never below one member


def test_cost_left_counts_epochs_and_evaluations_from_the_resume_epoch():
    c = ToyRunConfig(**{**TINY, "n_train": 128}, width=16, eval_every=10)
    cost = run_cost(c)
    assert cost.flops_per_epoch == 3 * 2 * 16 * 6 * 128  # 3 × forward of a 4-16-2 network
    assert cost.flops(c) == 100 * cost.flops_per_epoch + 11 * cost.flops_per_eval
    assert cost.flops(c, 50) == 50 * cost.flops_per_epoch + 5 * cost.flops_per_eval
    assert cost.passes(c) == 100 * 1 + 11 * 2  # one micro-batch a step; 2 splits to evaluate
    bigger = run_cost(ToyRunConfig(**{**TINY, "n_train": 4096}, width=16))
    assert bigger.member_bytes > cost.member_bytes and bigger.passes_per_epoch == 8
    assert speed("cpu").seconds(60e9, 1000) == 1.0 + 1000 * 3e-3


def test_dry_run_text_labels_estimates():
    configs = grid()
    chunks, caps = plan_chunks(configs, {}, max_members=4, budget_bytes=GiB)
    plan = Plan("e", "toy", len(configs), 4, 0, 0, chunks, GiB, "1 GiB", 4, caps)
    text = "\n".join(describe_plan(plan, cpu=speed("cpu"), gpu=speed("cuda", "bf16")))
    assert "4 chunks of 4 members" in text and "to train 16" in text
    assert "estimate on this CPU" in text and "(estimate)" in text and "memory (est.)" in text
    assert "12.1 TFLOP/s bf16 + 20 ms a pass (the default: the slowest task measured" in text


def test_a_gpu_estimate_takes_the_tasks_measured_rates():
    """Study S's transformer and study M's wide MLP ran at 9.7 and 20.5 TFLOP/s fp32 on one
    H200: each task's runs are timed at its own rate and pass cost; a task with none declared
    (the toy) at the slowest declared rate and the dearest pass: study S's rate, its 20 ms."""
    s, m, toy = (speed("cuda", "fp32", t) for t in ("mpsp", "modular", "toy"))
    assert (s.flops, s.pass_s) == (9.7e12, 20e-3) and (m.flops, m.pass_s) == (20.5e12, 1.7e-3)
    assert (toy.flops, toy.pass_s) == (min(s.flops, m.flops), max(s.pass_s, m.pass_s))
    assert speed("cuda").flops == toy.flops and "the default" in toy.note
    assert "task modular's, measured on one H200" in m.note
    assert speed("cuda", "tf32", "modular").flops == 22.2e12
    assert speed("cpu", "fp32", "modular") == speed("cpu")  # the CPU's rate is one for all
