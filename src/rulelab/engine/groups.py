"""Which runs can train together (DESIGN §1): members of one ensemble share every shape field
and the epoch they start from. The planner packs these groups into chunks; a worker regroups a
chunk whose runs resume from different epochs (a kill between two members' checkpoints); the
analyses reload stored runs the same way. Torch-free, so planning imports no torch."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence


def group_runs(configs: Sequence, start_epochs: dict[str, int]) -> dict[tuple[str, int], list]:
    """Runs grouped by (shape key, resume epoch), each group in the order given."""
    groups: dict[tuple[str, int], list] = defaultdict(list)
    for c in configs:
        groups[c.shape_key(), start_epochs.get(c.run_id, 0)].append(c)
    return dict(groups)


def plan_ensembles(configs: Sequence, start_epochs: dict[str, int], max_members: int) -> list[list]:
    """:func:`group_runs`, each group cut into consecutive ensembles of ≤ ``max_members``."""
    return [g[i : i + max_members] for g in group_runs(configs, start_epochs).values()
            for i in range(0, len(g), max_members)]
