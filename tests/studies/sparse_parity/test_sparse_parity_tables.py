"""Sparse parity's steps table reads "hidden first" only over runs whose support mass exists
(issue 21): a transformer has no first-layer weight mass, so its hidden progress is "not
measurable", never "0 of n"."""

from __future__ import annotations

import math

import pandas as pd

from rulelab.studies.sparse_parity.reproduce import display_table
from rulelab.studies.sparse_parity.steps_tables import steps_table


def runs(model: str, mass: float, hidden: float | None, band: float = 0.02,
         n: int = 16) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": f"{model}{s}", "status": "done", "model": model, "k": 3,
                          "n_bits": n, "seed": s, "learned": True, "steps_to_learn": 900 + s,
                          "visible_step": 500, "hidden_progress_step": hidden,
                          "hidden_called": hidden is not None and s < 3, "hidden_band": band,
                          "fourier_step": 400, "support_mass_init": mass} for s in range(4)])


def test_hidden_first_counts_called_runs_of_those_that_can_be_called():
    mlp = display_table(steps_table(runs("mlp", 0.375, 200)))
    assert mlp["hidden first"].tolist() == ["3/4"]  # called: above the null band
    assert mlp["band"].tolist() == ["+2.0%"]
    few = display_table(steps_table(runs("mlp", 0.375, None, band=math.nan, n=8)))
    assert few["hidden first"].tolist() == ["too few nulls"]  # C(5, 3) = 10 < 19 subsets


def test_hidden_first_is_not_measurable_without_a_support_mass():
    transformer = display_table(steps_table(runs("transformer", math.nan, None, math.nan)))
    assert transformer["hidden first"].tolist() == ["not measurable"]
    both = display_table(steps_table(pd.concat([runs("mlp", 0.375, 200),
                                                runs("transformer", math.nan, None,
                                                     math.nan)])))
    assert sorted(both["hidden first"]) == ["3/4", "not measurable"]
