"""Study S's analyses that can run during training (``--track``, SPEC S.4): each takes the
live trainer and returns a tidy frame with a ``member`` column
(:class:`rulelab.engine.tracking.Tracker` stores it per run).

The ``gradients`` rows carry, beside cos(g+, g−) and ‖g−‖/‖g+‖, ``eps`` = ‖g‖/(r‖g+‖) and
``identity_dominated`` (issues 8, 21: where ε is small the identity g = r·g+ + (1−r)·g− alone
pins amplification to r/(1−r) and cos to −1 — cos ≤ −√(1 − ε²); per run, ``<NA>`` where ε is
NaN), each group's mean per-example gradient norm over up
to 256 examples per group (:mod:`.analyses.gradients`), each group's mean loss and
``saturated`` (issue 11: a loss below float32's resolution leaves the gradients rounding noise,
:mod:`.analyses.saturation`); ``fingerprints`` rows carry the OV probe
``ov_probe_acc`` beside OV parity ρ (:mod:`.analyses.circuits`).
"""

from __future__ import annotations

import pandas as pd

from rulelab.studies.shortcut_saturation.analyses.ablation import ablation_table
from rulelab.studies.shortcut_saturation.analyses.gradients import gradient_conflict
from rulelab.studies.shortcut_saturation.analyses.tables import fingerprint_table


def gradients(trainer) -> pd.DataFrame:
    return gradient_conflict(trainer.model, trainer.data)


def fingerprints(trainer) -> pd.DataFrame:
    return fingerprint_table(trainer)


def ablation(trainer) -> pd.DataFrame:
    return ablation_table(trainer.model, trainer.data, methods=("mean",), where=("cls",))
