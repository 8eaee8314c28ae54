"""YAML recipes: the shipped presets, and one clear ``file:line: key: message`` per mistake."""

from pathlib import Path

import pytest

from rulelab.grid import expand
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.sweep.recipe import RecipeError, load_recipe, parse_recipe

# every study's recipes live in its package (issue 9): <study>/recipes/<scale>.yaml
STUDIES = Path(__file__).resolve().parents[2] / "src" / "rulelab" / "studies"


def _recipe(name: str) -> Path:
    study, scale = name.split("/")
    return STUDIES / study / "recipes" / f"{scale}.yaml"

GOOD = """\
experiment: tiny
task: mpsp
base:
  layers: 1
  d_model: 16
grid:
  ratio: [0.5, 0.9]
  weight_decay: [0.1, 0.2]
seeds: 3
"""


def parse(text: str):
    return parse_recipe(text, Path("r.yaml"))


def test_a_recipe_expands_cells_times_seeds_cell_major():
    recipe = parse(GOOD)
    configs = recipe.configs()
    assert len(configs) == 2 * 2 * 3 and recipe.seeds == (0, 1, 2)
    assert [c.seed for c in configs[:3]] == [0, 1, 2]
    assert {(c.ratio, c.weight_decay) for c in configs} == {(0.5, 0.1), (0.5, 0.2), (0.9, 0.1),
                                                            (0.9, 0.2)}
    assert all(c.layers == 1 and c.d_model == 16 for c in configs)
    assert recipe.execution.max_members == 64  # defaults


@pytest.mark.parametrize("seeds, expected", [
    ("4", (0, 1, 2, 3)), ("{count: 2, start: 5}", (5, 6)), ("[3, 1, 8]", (3, 1, 8)),
])
def test_seed_forms(seeds, expected):
    assert parse(GOOD.replace("seeds: 3", f"seeds: {seeds}")).seeds == expected


def test_a_list_of_sub_grids_is_their_union_without_duplicates():
    text = GOOD.split("grid:")[0] + """grid:
  - {ratio: [0.5, 0.9], weight_decay: [0.1]}
  - {ratio: [0.9], weight_decay: [0.1, 0.3]}
seeds: 1
"""
    configs = parse(text).configs()
    assert sorted((c.ratio, c.weight_decay) for c in configs) == [(0.5, 0.1), (0.9, 0.1),
                                                                   (0.9, 0.3)]


@pytest.mark.parametrize("edit, expected", [
    # (old → new text, expected "line: key: message" fragment)
    (("seeds: 3", "sedes: 3"), "r.yaml:9: sedes: unknown key 'sedes' (did you mean 'seeds'?)"),
    (("  d_model: 16", "  d_modle: 16"), "r.yaml:5: base.d_modle: unknown config key "
                                         "'d_modle' (did you mean 'd_model'?)"),
    (("  ratio: [0.5, 0.9]", "  ratio: [0.5,\n    1.5]"), "r.yaml:8: grid.ratio[1]: 1.5 is not "
                                                         "allowed; input should be less than"),
    (("  layers: 1", "  layers: 0"), "r.yaml:4: base.layers: 0 is not allowed; input should be "
                                     "greater than or equal to 1"),
    (("  d_model: 16", "  d_model: 16\n  heads: 3"), "r.yaml:6: base.heads: 3 is not "
                                                     "allowed; d_model (16) must be divisible"),
    (("  layers: 1", "  ratio: 0.5"), "r.yaml:7: grid.ratio: also set in base"),
    (("  layers: 1", "  seed: 4"), "r.yaml:4: base.seed: set model seeds with the top-level"),
    (("  weight_decay: [0.1, 0.2]", "  weight_decay: 0.1"), "r.yaml:8: grid.weight_decay: "
                                                            "must be a non-empty list"),
    (("seeds: 3", "seeds: 0"), "r.yaml:9: seeds: 0 is not allowed; give a count from 1 to 100,000"),
    (("seeds: 3", "seeds: [1, -2]"), "r.yaml:9: seeds[1]: -2 is not allowed"),
    (("task: mpsp", "task: mnist"), "r.yaml:2: task: 'mnist' is not allowed; use one of"),
    (("experiment: tiny", "experiment: a b"), "r.yaml:1: experiment: 'a b' is not allowed"),
    (("experiment: tiny\n", ""), "r.yaml:1: experiment: missing (required)"),
    (("seeds: 3", "seeds: 3\nexecution: {max_membres: 8}"),
     "r.yaml:10: execution.max_membres: unknown key 'max_membres' (did you mean 'max_members'?)"),
    (("seeds: 3", "seeds: 3\nexecution:\n  max_members: 0"),
     "r.yaml:11: execution.max_members: 0 is not allowed; input should be greater than or"),
    (("seeds: 3", "seeds: 3\nexecution: {track: [gradients, nope]}"),
     "r.yaml:10: execution.track: 'nope' is not allowed; use ablation, fingerprints, gradients"),
    (("  d_model: 16", "  d_model: 16\n  d_model: 32"), "r.yaml:6: base.d_model: duplicate key"),
    (("grid:", "grid: ["), "r.yaml:"),  # YAML syntax: a line, then "not valid YAML"
])
def test_mistakes_name_file_line_and_key(edit, expected):
    old, new = edit
    assert old in GOOD
    with pytest.raises(RecipeError) as err:
        parse(GOOD.replace(old, new, 1))
    message = str(err.value)
    assert message.startswith(expected) and "\n" not in message, message


def test_an_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(RecipeError, match=r"missing\.yaml: cannot read the recipe"):
        load_recipe(tmp_path / "missing.yaml")


def test_a_bad_value_in_a_sub_grid_points_at_its_item():
    text = GOOD.split("grid:")[0] + "grid:\n  - {ratio: [0.5]}\n  - {ratio: [0.9, 2.0]}\n"
    with pytest.raises(RecipeError, match=r"^r\.yaml:8: grid\[1\]\.ratio\[1\]: 2\.0 is not"):
        parse(text)


# --- the shipped presets ------------------------------------------------------------------------
@pytest.mark.parametrize("name, n_runs", [
    ("shortcut_saturation/quick", 32), ("shortcut_saturation/paper", 2400),
    ("shortcut_saturation/variants", 1080), ("coexistence/tiny", 4), ("coexistence/quick", 42),
    ("coexistence/paper", 108), ("coexistence/variants", 891),
    ("shortcut_saturation/medium", 24), ("shortcut_saturation/medium-s5s6", 60),
    ("coexistence/medium", 42), ("shortcut_saturation/paper-headline", 120),
])
def test_presets_load(name, n_runs):
    recipe = load_recipe(_recipe(name))
    assert len(recipe.configs()) == n_runs
    assert recipe.experiment == name.replace("_", "-").replace("/", "-")


def test_the_headline_slice_trains_the_paper_recipes_own_runs():
    """paper-headline.yaml is a slice of paper.yaml: the same run ids, so a GPU session that
    trains it first into the paper lab leaves paper.yaml those runs done."""
    paper = {c.run_id for c in load_recipe(_recipe("shortcut_saturation/paper")).configs()}
    head = load_recipe(_recipe("shortcut_saturation/paper-headline")).configs()
    assert {c.run_id for c in head} <= paper
    assert {(c.layers, c.heads, c.ratio, c.weight_decay) for c in head} == {
        (layers, 2, r, 0.1) for layers in (1, 2) for r in (0.5, 0.9)}


def test_paper_preset_has_the_papers_values():
    configs = load_recipe(_recipe("shortcut_saturation/paper")).configs()
    assert {(c.n_train, c.epochs, c.d_model, c.d_mlp) for c in configs} == {(16384, 15000, 64,
                                                                              128)}
    assert {c.layers for c in configs} == {c.heads for c in configs} == {1, 2}
    ratios = {c.ratio for c in configs}
    assert min(ratios) < 0.5 < max(ratios) and 0.5 in ratios  # below, at, above chance
    assert {c.weight_decay for c in configs} == {0.1, 0.2, 0.3, 0.4}
    per_cell = len(configs) // len({(c.layers, c.heads, c.ratio, c.weight_decay)
                                    for c in configs})
    assert per_cell == 30
    m = load_recipe(_recipe("coexistence/variants")).configs()
    assert {c.width for c in m} == {2**j + 1 for j in range(4, 13)}
    assert max(c.noise for c in m) == 0.8 and {c.p for c in m} == {113}
    assert {c.optimizer for c in m} == {"adamw", "adam", "sgd", "muon"}
    assert {"relu", "quadratic", "gelu"} <= {c.activation for c in m}


# The grids `rulelab reproduce` trained before presets became recipes (issue 9): fixed fields,
# axes, seeds. The recipes must hold exactly these runs (quick, tiny) or a superset (S paper),
# so a lab made by the old command is the lab the new one resumes — run ids do not move.
_S = dict(heads=2, d_model=64, d_mlp=128, weight_decay=0.1)
OLD_S = {
    "quick": (dict(_S, seq_len=6, vocab=6, n_train=2048, n_eval=1024, epochs=100, batch_size=64,
                   eval_every=5, lr=3e-3), range(8)),
    "paper": (dict(_S, seq_len=10, vocab=64, n_train=16384, n_eval=4096, epochs=15000,
                   eval_every=10, lr=1e-3), range(30)),
}
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


def test_study_s_recipes_are_the_reproduce_presets():
    """quick.yaml is what `rulelab reproduce shortcut-saturation --scale quick` trained (same
    run ids); the old reproduce paper grid is a slice of paper.yaml, so one lab serves both."""
    for scale, relation in (("quick", "equal"), ("paper", "subset")):
        fixed, seeds = OLD_S[scale]
        ids = {c.run_id for c in expand(MPSPRunConfig, fixed,
                                        [dict(layers=[1, 2], ratio=[0.5, 0.9])], seeds)}
        recipe = load_recipe(_recipe(f"shortcut_saturation/{scale}"))
        recipe_ids = {c.run_id for c in recipe.configs()}
        assert ids == recipe_ids if relation == "equal" else ids < recipe_ids


@pytest.mark.parametrize("scale", ["tiny", "quick", "paper"])
def test_study_m_recipes_are_the_reproduce_presets(scale):
    """coexistence/<scale>.yaml is what `rulelab reproduce coexistence --scale <scale>` trained
    — the runs in the same order (the old memorization/quick.yaml, a different grid, is gone:
    issue 9)."""
    fixed, axes, seeds = OLD_M[scale]
    old = [c.run_id for c in expand(ModularRunConfig, fixed, [axes], seeds)]
    assert [c.run_id for c in load_recipe(_recipe(f"coexistence/{scale}")).configs()] == old


# --- hostile recipes (issue 12): refused with one line, before memory or time runs out -------
def _bomb(levels: int) -> str:
    """A YAML "billion laughs": 10**levels values from a few hundred bytes of aliases."""
    text = "experiment: bomb\ntask: mpsp\ndescription:\n  - &l0 [a, a, a, a, a, a, a, a, a, a]\n"
    for i in range(1, levels):
        text += f"  - &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n"
    return text


@pytest.mark.parametrize("text, expected", [
    (_bomb(9), r"^r\.yaml:\d+: too large: more than 100,000 values once aliases are expanded"),
    ("experiment: x\ntask: mpsp\ndescription: " + "[" * 5000 + "]" * 5000 + "\n",
     r"^r\.yaml: nested more than 32 levels deep"),
    ("experiment: x\ntask: mpsp\ndescription: " + "[" * 40 + "]" * 40 + "\n",
     r"^r\.yaml:3: nested more than 32 levels deep"),
    ("experiment: x\ntask: mpsp\ndescription: &a [1, *a]\n", r"^r\.yaml:3: .*recursive alias"),
    (GOOD.replace("seeds: 3", "seeds: {count: 1000000000}"),
     r"^r\.yaml:9: seeds\.count: 1000000000 is not allowed; give a count from 1 to 100,000"),
    (GOOD.replace("seeds: 3", "seeds: 1000000000"), r"^r\.yaml:9: seeds: 1000000000 is not"),
    (GOOD.replace("seeds: 3", "seeds: 30000"), r"^r\.yaml:6: grid: 120,000 runs \(cells × "
     r"seeds\) is not allowed; a recipe holds at most 100,000 runs"),
    (GOOD.replace("  weight_decay: [0.1, 0.2]\n", "  heads: [1, true]\n"),
     r"^r\.yaml:8: grid\.heads\[1\]: true is not allowed; it must be an integer"),
])
def test_hostile_recipes_are_refused_in_one_line(text, expected):
    with pytest.raises(RecipeError, match=expected) as info:
        parse(text)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("edit, expected", [
    (("layers: 1", "layers: true"), r"^r\.yaml:4: base\.layers: true is not allowed; it must "
     r"be an integer, not a boolean"),  # before: accepted as layers = 1
    (("d_model: 16", "d_model: 16\n  ln: 1"), r"^r\.yaml:6: base\.ln: 1 is not allowed; use "
     r"true or false"),
    (("seeds: 3", "seeds: 3\nexecution: {max_members: true}"), r"^r\.yaml:10: "
     r"execution\.max_members: true is not allowed; it must be an integer"),
    (("ratio: [0.5, 0.9]", "ratio: [0.5, false]"), r"grid\.ratio\[1\]: false is not allowed; it "
     r"must be a number"),
])
def test_a_boolean_is_not_a_number_and_a_number_is_not_a_boolean(edit, expected):
    with pytest.raises(RecipeError, match=expected):
        parse(GOOD.replace(*edit))


def test_a_binary_or_huge_file_is_one_line(tmp_path):
    binary = tmp_path / "b.yaml"
    binary.write_bytes(bytes(range(256)) * 4)  # before: UnicodeDecodeError traceback
    with pytest.raises(RecipeError, match=r"b\.yaml: not a text file"):
        load_recipe(binary)
    huge = tmp_path / "h.yaml"
    huge.write_text("# " + "x" * (2 << 20) + "\n" + GOOD)
    with pytest.raises(RecipeError, match=r"h\.yaml: too large for a recipe"):
        load_recipe(huge)


def test_experiment_names_are_plain_text():
    for name in ("'[/bold]'", "'[link=https://example.com]x[/link]'", "x" * 101):
        with pytest.raises(RecipeError, match=r"^r\.yaml:1: experiment: .* is not allowed"):
            parse(GOOD.replace("experiment: tiny", f"experiment: {name}"))
