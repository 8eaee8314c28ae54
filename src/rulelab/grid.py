"""Grids: lists of flag values expand to one config per combination × seed.

``--ratio 0.5 0.9 --weight-decay 0.1 0.2 --seeds 8`` gives 2 × 2 × 8 = 32 runs; shape-compatible
runs are packed into one ensemble by the runner.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from rulelab.config import ConfigError, flag_name, make_config

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


def expand_grid(
    cls: type[BaseModel],
    axes: Mapping[str, Sequence],
    fixed: Mapping[str, object],
    seeds: Sequence[int],
) -> list:
    """Every combination of ``axes`` values × ``seeds``, with ``fixed`` fields; validated.

    Raises :class:`rulelab.config.ConfigError` (one line) on the first invalid value, before
    anything is built, so nothing is written for a bad grid; a grid of more than
    :data:`MAX_RUNS` runs is refused before any config is built.
    """
    names = list(axes)
    check_size({flag_name(n): len(axes[n]) for n in names}, len(seeds))
    configs = []
    for values in itertools.product(*(axes[n] for n in names)):
        for seed in seeds:
            configs.append(make_config(cls, **fixed, **dict(zip(names, values, strict=True)),
                                       seed=seed))
    return configs


def split_multi_value_flags(argv: list[str], flags: set[str]) -> list[str]:
    """Rewrite ``--ratio 0.5 0.9`` as ``--ratio 0.5 --ratio 0.9`` for the given flags.

    click options take one value per occurrence; researchers type lists after one flag.
    """
    out: list[str] = []
    current: str | None = None
    for tok in argv:
        if tok.startswith("--"):
            name = tok.split("=", 1)[0]
            current = name if (name in flags and "=" not in tok) else None
            out.append(tok)
        elif current is not None and out[-1] != current:
            out.extend([current, tok])
        else:
            out.append(tok)
    return out
