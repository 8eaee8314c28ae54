"""Study M's shipped recipes: each preset's size and name, the variants' grid, and the grids
`rulelab reproduce` trained before presets became recipes (issue 9) — run ids do not move."""

import pytest

from rulelab.grid import expand
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.study_registry import study
from rulelab.sweep.recipe import load_recipe


def _recipe(scale: str):
    return study("coexistence").recipe_path(scale)


@pytest.mark.parametrize("scale, n_runs", [
    ("tiny", 4), ("quick", 42), ("paper", 108), ("variants", 891), ("medium", 42),
])
def test_m_presets_load(scale, n_runs):
    recipe = load_recipe(_recipe(scale))
    assert len(recipe.configs()) == n_runs
    assert recipe.experiment == f"coexistence-{scale}"


def test_variants_preset_crosses_widths_optimizers_and_activations():
    m = load_recipe(_recipe("variants")).configs()
    assert {c.width for c in m} == {2**j + 1 for j in range(4, 13)}
    assert max(c.noise for c in m) == 0.8 and {c.p for c in m} == {113}
    assert {c.optimizer for c in m} == {"adamw", "adam", "sgd", "muon"}
    assert {"relu", "quadratic", "gelu"} <= {c.activation for c in m}


# The grids `rulelab reproduce` trained before presets became recipes (issue 9): fixed fields,
# axes, seeds. The recipes must hold exactly these runs, so a lab made by the old command is the
# lab the new one resumes — run ids do not move.
_M = dict(op="add", activation="relu", optimizer="adamw", train_frac=0.8)
OLD_M = {
    "tiny": (dict(_M, p=11, epochs=60, eval_every=20, log_eval_steps=20, lr=1e-2,
                  weight_decay=1.0), dict(width=[9, 33], noise=[0.0, 0.5]), range(1)),
    "quick": (dict(_M, p=31, epochs=1500, eval_every=50, log_eval_steps=100, lr=1e-2,
                   weight_decay=1.0),
              dict(width=[2**j + 1 for j in range(4, 11)], noise=[0.0, 0.5, 0.8]), range(2)),
    "paper": (dict(_M, p=113, epochs=200_000, eval_every=1000, log_eval_steps=200, lr=1e-3,
                   weight_decay=0.1),
              dict(width=[2**j + 1 for j in range(4, 13)], noise=[0.0, 0.2, 0.5, 0.8]),
              range(3)),
}


@pytest.mark.parametrize("scale", ["tiny", "quick", "paper"])
def test_study_m_recipes_are_the_reproduce_presets(scale):
    """coexistence/<scale>.yaml is what `rulelab reproduce coexistence --scale <scale>` trained
    — the runs in the same order (the old memorization/quick.yaml, a different grid, is gone:
    issue 9)."""
    fixed, axes, seeds = OLD_M[scale]
    old = [c.run_id for c in expand(ModularRunConfig, fixed, [axes], seeds)]
    assert [c.run_id for c in load_recipe(_recipe(scale)).configs()] == old
