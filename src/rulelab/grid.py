"""Grids: lists of values expand to one config per combination × seed — written once, for the
command line (``--ratio 0.5 0.9 --weight-decay 0.1 0.2 --seeds 8`` = 2 × 2 × 8 = 32 runs) and
for recipes (``grid:`` maps, or a list of them: the union of their products).

Runs come cell-major (every seed of a cell before the next cell; cells in the order of the
axes' product), and runs that coincide (same config, same run id) appear once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

from pydantic import ValidationError

from rulelab.config.base import ConfigError, make_config

# Most runs one command may expand to: a registry row, a config object and a plan entry each.
# The paper-scale recipes hold 2,400 runs; a typo like --seeds 1000000000 must not allocate.
MAX_RUNS = 100_000


def check_size(values_per_flag: dict[str, int], n_seeds: int, seeds_flag: str = "--seeds"
               ) -> int:
    """The number of runs of a grid (values per flag × seeds); ConfigError above MAX_RUNS."""
    n = n_seeds
    for count in values_per_flag.values():
        n *= max(count, 1)
    if n <= MAX_RUNS:
        return n
    if n_seeds > MAX_RUNS:
        raise ConfigError(f"{seeds_flag}: {n_seeds:,} is not allowed; one command trains at most "
                          f"{MAX_RUNS:,} runs")
    listed = [f for f, c in values_per_flag.items() if c > 1]
    shape = " × ".join(f"{values_per_flag[f]} {f}" for f in listed)
    raise ConfigError(f"{'/'.join([*listed, seeds_flag])}: {shape} × {n_seeds} seeds = {n:,} runs "
                      f"is not allowed; one command trains at most {MAX_RUNS:,} runs")


def largest_seed(cls) -> int | None:
    """The largest seed a config class accepts (its ``seed`` field's bound), None if unbounded."""
    field = getattr(cls, "model_fields", {}).get("seed")
    out = None
    for bound in field.metadata if field is not None else ():
        if getattr(bound, "lt", None) is not None:
            out = int(bound.lt) - 1
        if getattr(bound, "le", None) is not None:
            out = int(bound.le)
    return out


def seed_range_problem(cls, start: int, count: int) -> str | None:
    """Why seeds ``start … start + count − 1`` do not fit ``cls``'s seed field (None when
    they do), worded for the flags or keys that set them — never ``seed``, which users do not
    pass (issue 24)."""
    top = largest_seed(cls)
    last = start + count - 1
    if top is None or last <= top:
        return None
    if start > top:
        return f"{start} is not allowed; seeds go up to {top:,}"
    return (f"seeds {start} to {last} are not allowed; seeds go up to {top:,}, so at most "
            f"{top - start + 1:,} seed(s) from {start}")


def indexed_cells(grids: Sequence[Mapping[str, Sequence]]) -> list[tuple[int, dict]]:
    """``(sub-grid index, grid point)`` in order; a point already given by an earlier
    sub-grid is dropped."""
    out, seen = [], set()
    for g, grid in enumerate(grids):
        names = list(grid)
        for values in itertools.product(*(grid[n] for n in names)):
            cell = dict(zip(names, values, strict=True))
            key = repr(sorted(cell.items()))
            if key not in seen:
                seen.add(key)
                out.append((g, cell))
    return out


def cells(grids: Sequence[Mapping[str, Sequence]]) -> list[dict]:
    """Grid points (without the seed), in order; duplicates across sub-grids dropped."""
    return [cell for _, cell in indexed_cells(grids)]


def expand(cls, base: Mapping[str, object], grids: Sequence[Mapping[str, Sequence]],
           seeds: Sequence[int], *,
           on_error: Callable[[ValidationError, int, dict], Exception] | None = None) -> list:
    """Every cell of ``grids`` × ``seeds`` as a validated ``cls`` config, with ``base`` fields:
    each run's config built here, the once it is built (issue 22).

    Raises :class:`rulelab.config.ConfigError` (one line naming the flag) on the first invalid
    value, before anything is built, so nothing is written for a bad grid; with ``on_error``,
    the exception ``on_error(error, sub-grid index, cell)`` returns instead (a recipe's
    ``file:line`` message).
    """
    runs: dict[str, object] = {}
    for g, cell in indexed_cells(grids):
        for seed in seeds:
            if on_error is None:
                cfg = make_config(cls, **base, **cell, seed=seed)
            else:
                try:
                    cfg = cls(**base, **cell, seed=seed)
                except ValidationError as err:
                    raise on_error(err, g, cell) from None
            runs.setdefault(cfg.run_id, cfg)
    return list(runs.values())
