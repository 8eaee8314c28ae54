"""The toy study's one analysis that can run during training (``--track weights``): the norm of
each weight matrix (``module``) per member, as a tidy frame with a ``member`` column
(:class:`rulelab.engine.tracking.Tracker` stores it per run)."""

from __future__ import annotations

import pandas as pd


def weights(trainer) -> pd.DataFrame:
    rows = [(e, name, float(p[e].detach().norm())) for name, p in trainer.model.named_parameters()
            for e in range(trainer.n_members)]
    return pd.DataFrame(rows, columns=["member", "module", "norm"])
