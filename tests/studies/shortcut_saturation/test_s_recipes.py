"""Study S's shipped recipes: each preset's size and name, the paper's values, and the grids
`rulelab reproduce` trained before presets became recipes (issue 9) — run ids do not move."""

import pytest

from rulelab.grid import expand
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.study_registry import study
from rulelab.sweep.recipe import load_recipe


def _recipe(scale: str):
    return study("shortcut-saturation").recipe_path(scale)


@pytest.mark.parametrize("scale, n_runs", [
    ("quick", 32), ("paper", 2400), ("variants", 1080), ("medium", 24), ("medium-s5s6", 60),
    ("paper-headline", 120),
])
def test_s_presets_load(scale, n_runs):
    recipe = load_recipe(_recipe(scale))
    assert len(recipe.configs()) == n_runs
    assert recipe.experiment == f"shortcut-saturation-{scale}"


def test_the_headline_slice_trains_the_paper_recipes_own_runs():
    """paper-headline.yaml is a slice of paper.yaml: the same run ids, so a GPU session that
    trains it first into the paper lab leaves paper.yaml those runs done."""
    paper = {c.run_id for c in load_recipe(_recipe("paper")).configs()}
    head = load_recipe(_recipe("paper-headline")).configs()
    assert {c.run_id for c in head} <= paper
    assert {(c.layers, c.heads, c.ratio, c.weight_decay) for c in head} == {
        (layers, 2, r, 0.1) for layers in (1, 2) for r in (0.5, 0.9)}


def test_paper_preset_has_the_papers_values():
    configs = load_recipe(_recipe("paper")).configs()
    assert {(c.n_train, c.epochs, c.d_model, c.d_mlp) for c in configs} == {(16384, 15000, 64,
                                                                              128)}
    assert {c.layers for c in configs} == {c.heads for c in configs} == {1, 2}
    ratios = {c.ratio for c in configs}
    assert min(ratios) < 0.5 < max(ratios) and 0.5 in ratios  # below, at, above chance
    assert {c.weight_decay for c in configs} == {0.1, 0.2, 0.3, 0.4}
    per_cell = len(configs) // len({(c.layers, c.heads, c.ratio, c.weight_decay)
                                    for c in configs})
    assert per_cell == 30


# The grid `rulelab reproduce` trained before presets became recipes (issue 9): fixed fields,
# axes, seeds. The recipes must hold exactly these runs (quick) or a superset (paper), so a lab
# made by the old command is the lab the new one resumes — run ids do not move.
_S = dict(heads=2, d_model=64, d_mlp=128, weight_decay=0.1)
OLD_S = {
    "quick": (dict(_S, seq_len=6, vocab=6, n_train=2048, n_eval=1024, epochs=100, batch_size=64,
                   eval_every=5, lr=3e-3), range(8)),
    "paper": (dict(_S, seq_len=10, vocab=64, n_train=16384, n_eval=4096, epochs=15000,
                   eval_every=10, lr=1e-3), range(30)),
}


def test_study_s_recipes_are_the_reproduce_presets():
    """quick.yaml is what `rulelab reproduce shortcut-saturation --scale quick` trained (same
    run ids); the old reproduce paper grid is a slice of paper.yaml, so one lab serves both."""
    for scale, relation in (("quick", "equal"), ("paper", "subset")):
        fixed, seeds = OLD_S[scale]
        ids = {c.run_id for c in expand(MPSPRunConfig, fixed,
                                        [dict(layers=[1, 2], ratio=[0.5, 0.9])], seeds)}
        recipe = load_recipe(_recipe(scale))
        recipe_ids = {c.run_id for c in recipe.configs()}
        assert ids == recipe_ids if relation == "equal" else ids < recipe_ids


def test_a_cross_field_rule_names_its_line_and_key():
    """Study S's config checks d_model against heads; a recipe breaking it gets one
    ``file:line: key: message`` line (the generic cases: tests/sweep/test_recipe.py)."""
    from pathlib import Path

    from rulelab.sweep.recipe import RecipeError, parse_recipe

    text = ("experiment: tiny\ntask: mpsp\nbase:\n  layers: 1\n  d_model: 16\n  heads: 3\n"
            "grid:\n  ratio: [0.5, 0.9]\n  weight_decay: [0.1, 0.2]\nseeds: 3\n")
    with pytest.raises(RecipeError) as err:
        parse_recipe(text, Path("r.yaml"))
    message = str(err.value)
    assert message.startswith("r.yaml:6: base.heads: 3 is not allowed; d_model (16) must be "
                              "divisible") and "\n" not in message, message
