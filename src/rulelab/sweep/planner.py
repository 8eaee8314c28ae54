"""Plan a sweep: runs → shape-compatible ensembles → chunks that fit memory, in a useful order.

- Runs group by (shape key, resume epoch): members of one ensemble share shapes and epoch.
- Each group is cut into equal chunks of at most ``max_members``, fewer when the memory
  estimate (:mod:`rulelab.sweep.estimate`) times the members exceeds the device budget.
- Order: inside a group, seeds are interleaved across cells (seed 0 of every cell, then seed 1,
  …); chunks are dealt round-robin across groups, resumed groups first. So the first chunks give
  a few seeds of every cell — an early, rough rate per cell — instead of all 30 seeds of one.
Packing never changes a run's numbers: a member trains as it would alone (DESIGN §1).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from rulelab.engine.groups import group_runs
from rulelab.sweep.estimate import RunCost, Speed, human_bytes, human_seconds, run_cost


@dataclass
class ChunkPlan:
    """One ensemble to train: shape-compatible runs resuming from the same epoch."""

    index: int
    configs: list
    start_epoch: int
    member_bytes: int
    flops: float
    passes: int = 0  # forward(+backward) passes of the ensemble (a fixed cost each)

    @property
    def label(self) -> str:
        return self.configs[0].label()

    @property
    def run_ids(self) -> list[str]:
        return [c.run_id for c in self.configs]

    @property
    def memory_bytes(self) -> int:
        return self.member_bytes * len(self.configs)

    def seeds(self) -> str:
        seeds = sorted({c.seed for c in self.configs})
        return f"{seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])

    def n_cells(self) -> int:
        return len({cell_key(c) for c in self.configs})


@dataclass
class Plan:
    """What a sweep will do; ``rulelab sweep --dry-run`` prints it."""

    experiment: str
    task: str
    n_runs: int
    n_cells: int
    n_done: int
    n_failed: int
    chunks: list[ChunkPlan]
    budget_bytes: int
    budget_note: str
    max_members: int
    caps: dict[str, int] = field(default_factory=dict)  # shape label → members by memory

    @property
    def n_todo(self) -> int:
        return sum(len(c.configs) for c in self.chunks)

    @property
    def n_resuming(self) -> int:
        return sum(len(c.configs) for c in self.chunks if c.start_epoch > 0)

    @property
    def flops(self) -> float:
        return sum(c.flops for c in self.chunks)

    def seconds(self, speed: Speed) -> float:
        return sum(speed.seconds(c.flops, c.passes) for c in self.chunks)

    def seed_epochs(self) -> int:
        """Member-epochs left: the unit of sweep progress."""
        return sum((c.configs[0].epochs - c.start_epoch) * len(c.configs) for c in self.chunks)


def cell_key(cfg) -> str:
    """A run's cell: its config without the seed."""
    flat = cfg.flat()
    flat.pop("seed", None)
    return repr(sorted(flat.items()))


def interleave(configs: Sequence) -> list:
    """Order runs seed-major: the k-th seed of every cell before the (k+1)-th of any."""
    cells: dict[str, int] = {}
    rank_in_cell: dict[str, int] = defaultdict(int)
    keyed = []
    for c in configs:
        key = cell_key(c)
        cells.setdefault(key, len(cells))
        keyed.append((rank_in_cell[key], cells[key], c))
        rank_in_cell[key] += 1
    return [c for _, _, c in sorted(keyed, key=lambda t: (t[0], t[1]))]


def even_split(items: list, cap: int) -> list[list]:
    """``items`` in ⌈n / cap⌉ consecutive parts whose sizes differ by at most one."""
    n_parts = max(1, math.ceil(len(items) / cap))
    size, extra = divmod(len(items), n_parts)
    out, start = [], 0
    for i in range(n_parts):
        end = start + size + (i < extra)
        out.append(items[start:end])
        start = end
    return out


def consecutive(items: list, cap: int) -> list[list]:
    """``items`` in consecutive parts of ``cap`` (the last one shorter)."""
    return [items[i : i + cap] for i in range(0, len(items), cap)]


BALANCE = 3  # side by side, about this many chunks a worker: an uneven last one idles less


def plan_chunks(configs: Sequence, start_epochs: dict[str, int], *, max_members: int,
                budget_bytes: int, micro_batch: int = 512, eval_chunk: int = 2048,
                interleave_seeds: bool = True, min_chunks: int = 1
                ) -> tuple[list[ChunkPlan], dict[str, int]]:
    """Chunks in training order, and the memory cap on members per shape label.

    ``interleave_seeds`` (sweeps): seeds interleaved across cells and groups cut in equal
    parts, so the first chunks give an early rate for every cell. Off (``train``,
    ``reproduce``): each group keeps the order of the runs given and is cut in consecutive
    ensembles of the cap — the packing of a command line or a reproduction is its grid's.
    ``min_chunks`` (workers training chunks side by side): no chunk costs more than
    1 / (:data:`BALANCE` · ``min_chunks``) of the plan (to within one run), and the costliest
    chunks go first, so one costly shape does not train alone on one core at the end (the quick
    preset's 2L ensemble, two thirds of its work, did). A plan of one shape and epoch is cut in
    equal chunks, one per worker (or a multiple, where the cap needs): they finish together
    uncut finer, and a larger ensemble trains more seed-epochs a second (engine 8 at the ladder's
    2k rung: 81 ms per seed-epoch in ensembles of 2, 52 ms in ensembles of 4).
    """
    groups = group_runs(configs, start_epochs)
    costs: dict[str, RunCost] = {}

    def group_flops(key) -> float:
        cost = costs.setdefault(key[0], run_cost(groups[key][0], micro_batch, eval_chunk))
        return sum(cost.flops(c, key[1]) for c in groups[key])

    share = sum(group_flops(k) for k in groups) / (BALANCE * min_chunks) if min_chunks > 1 else 0
    per_group: list[list[ChunkPlan]] = []
    caps: dict[str, int] = {}
    order = sorted(groups, key=lambda k: -k[1])  # resumed groups first (stable: file order)
    for shape, epoch in order:
        runs = interleave(groups[shape, epoch]) if interleave_seeds else groups[shape, epoch]
        cost = costs.setdefault(shape, run_cost(runs[0], micro_batch, eval_chunk))
        cap = max(1, min(max_members, budget_bytes // max(cost.member_bytes, 1)))
        caps[runs[0].label()] = min(caps.get(runs[0].label(), cap), cap)
        size = cap
        if share > 0 and len(groups) == 1:  # side by side, one shape: one part per worker
            parts = min_chunks * math.ceil(len(runs) / (min_chunks * cap))
            size = min(cap, max(1, math.ceil(len(runs) / parts)))
        elif share > 0:  # side by side: parts of at most `share` each
            parts = math.ceil(group_flops((shape, epoch)) / share)
            size = min(cap, max(1, math.ceil(len(runs) / max(parts, 1))))
        per_group.append([
            ChunkPlan(0, part, epoch, cost.member_bytes,
                      sum(cost.flops(c, epoch) for c in part), cost.passes(part[0], epoch))
            for part in (even_split if interleave_seeds else consecutive)(runs, size)
        ])
    chunks = []
    for round_ in range(max((len(g) for g in per_group), default=0)):
        for group in per_group:
            if round_ < len(group):
                chunks.append(group[round_])
    if min_chunks > 1:  # the longest first: workers finish together (stable: order kept)
        chunks.sort(key=lambda c: -c.flops)
    for i, chunk in enumerate(chunks):
        chunk.index = i
    return chunks, caps


# --- printing ---------------------------------------------------------------------------------
def describe_plan(plan: Plan, *, cpu: Speed, gpu: Speed, max_rows: int = 24) -> list[str]:
    """Human lines for ``--dry-run``; every memory and time figure is labelled an estimate."""
    lines = [
        f"experiment  {plan.experiment} (task {plan.task})",
        f"runs        {plan.n_runs} in {plan.n_cells} cells; done {plan.n_done}, failed "
        f"{plan.n_failed}; to train {plan.n_todo} (resuming from a checkpoint {plan.n_resuming})",
    ]
    if not plan.chunks:
        return [*lines, "nothing to train: every run is done or failed"]
    shapes = sorted({c.label for c in plan.chunks})
    w = max(len(s) for s in shapes)
    sizes = sorted({len(c.configs) for c in plan.chunks})
    size_txt = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
    label, cap = min(plan.caps.items(), key=lambda kv: (kv[1], kv[0]))
    caps = "all of them for every shape" if cap >= plan.max_members else (
        f"{cap} of {label}, the tightest shape")
    lines += [
        f"ensembles   {_n(len(shapes), 'shape')} → {_n(len(plan.chunks), 'chunk')} of "
        f"{size_txt} members "
        f"(max_members {plan.max_members}; memory allows {caps})",
        f"memory      largest chunk {human_bytes(max(c.memory_bytes for c in plan.chunks))} "
        f"(estimate); budget {human_bytes(plan.budget_bytes)} = {plan.budget_note}",
        f"compute     {plan.flops:.3g} FLOP, {plan.seed_epochs():,} seed-epochs (estimate: 3 × "
        "forward matmul FLOPs per training example + evaluations)",
        f"time        estimate on {cpu.note}: {human_seconds(plan.seconds(cpu))}",
        f"            estimate on a {gpu.note}: {human_seconds(plan.seconds(gpu))}",
        "order       seeds interleaved across cells, chunks round-robin across shapes: the "
        f"first {_n(min(len(shapes), len(plan.chunks)), 'chunk')} give seeds "
        f"{plan.chunks[0].seeds()} of their cells",
        "",
        f"{'#':>4}  {'shape':<{w}} {'members':>7} {'cells':>5} {'seeds':>7} {'from':>6} "
        f"{'memory (est.)':>13} {'CPU (est.)':>11} {'GPU (est.)':>11}",
    ]
    shown = plan.chunks if len(plan.chunks) <= max_rows else plan.chunks[: max_rows - 2]
    for c in shown:
        lines.append(
            f"{c.index + 1:>4}  {c.label:<{w}} {len(c.configs):>7} {c.n_cells():>5} "
            f"{c.seeds():>7} {c.start_epoch:>6} {human_bytes(c.memory_bytes):>13} "
            f"{human_seconds(cpu.seconds(c.flops, c.passes)):>11} "
            f"{human_seconds(gpu.seconds(c.flops, c.passes)):>11}")
    if len(shown) < len(plan.chunks):
        last = plan.chunks[-1]
        lines.append(f"{'…':>4}  ({len(plan.chunks) - len(shown) - 1} more)")
        lines.append(
            f"{last.index + 1:>4}  {last.label:<{w}} {len(last.configs):>7} {last.n_cells():>5} "
            f"{last.seeds():>7} {last.start_epoch:>6} {human_bytes(last.memory_bytes):>13} "
            f"{human_seconds(cpu.seconds(last.flops, last.passes)):>11} "
            f"{human_seconds(gpu.seconds(last.flops, last.passes)):>11}")
    return lines


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
