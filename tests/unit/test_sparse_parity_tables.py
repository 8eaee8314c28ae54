"""Sparse parity's steps table reads "hidden first" only over runs whose support mass exists
(issue 21): a transformer has no first-layer weight mass, so its hidden progress is "not
measurable", never "0 of n"."""

from __future__ import annotations

import math

import pandas as pd

from rulelab.studies.sparse_parity.analysis import steps_table
from rulelab.studies.sparse_parity.reproduce import display_table


def runs(model: str, mass: float, hidden: float | None) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": f"{model}{s}", "status": "done", "model": model, "k": 3,
                          "n_bits": 8, "seed": s, "learned": True, "steps_to_learn": 900 + s,
                          "visible_step": 500, "hidden_progress_step": hidden,
                          "fourier_step": 400, "support_mass_init": mass} for s in range(4)])


def test_hidden_first_counts_measurable_runs_and_says_when_none_are():
    mlp = display_table(steps_table(runs("mlp", 0.375, 200)))
    assert mlp["hidden first"].tolist() == ["4/4"]
    transformer = display_table(steps_table(runs("transformer", math.nan, None)))
    assert transformer["hidden first"].tolist() == ["not measurable"]
    both = display_table(steps_table(pd.concat([runs("mlp", 0.375, 200),
                                                runs("transformer", math.nan, None)])))
    assert sorted(both["hidden first"]) == ["4/4", "not measurable"]
