"""Sparse-parity analyses that can run during training (``--track``): each takes the live
trainer and returns a tidy frame with a ``member`` column
(:class:`rulelab.engine.tracking.Tracker` stores it per run).

``coordinates``: the first layer's squared weight mass per input coordinate (``mass``), its
share of the total (``share``) and whether the coordinate is in the support — the per-coordinate
view of the support mass (:func:`.metrics.support_mass` is the sum of ``share`` over the
support). Empty for the transformer (no coordinate-wise first layer).
"""

from __future__ import annotations

import pandas as pd

from rulelab.studies.sparse_parity.metrics import coordinate_mass, support_mask


def coordinates(trainer) -> pd.DataFrame:
    W1 = trainer.model.first_layer()
    if W1 is None:
        return pd.DataFrame(columns=["member", "coordinate", "mass", "share", "on_support"])
    mass = coordinate_mass(W1).cpu()  # [E, n]
    share = mass / mass.sum(1, keepdim=True)
    on = support_mask(trainer.data.support.cpu(), mass.shape[1])
    E, n = mass.shape
    return pd.DataFrame({"member": [e for e in range(E) for _ in range(n)],
                         "coordinate": list(range(n)) * E,
                         "mass": mass.flatten().numpy(), "share": share.flatten().numpy(),
                         "on_support": on.flatten().numpy()})
