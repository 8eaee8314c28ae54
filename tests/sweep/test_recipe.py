"""YAML recipes, on the test-only toy study (tests/toy_study): one clear ``file:line: key:
message`` per mistake; every study's shipped presets load (each study's own sizes and grids are
tested in its folder, tests/studies/<study>/test_*_recipes.py)."""

from pathlib import Path

import pytest

from rulelab.study_registry import studies
from rulelab.sweep.recipe import RecipeError, load_recipe, parse_recipe

pytestmark = pytest.mark.usefixtures("toy")

GOOD = """\
experiment: tiny
task: toy
base:
  d: 4
  width: 16
grid:
  noise: [0.0, 0.2]
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
    assert {(c.noise, c.weight_decay) for c in configs} == {(0.0, 0.1), (0.0, 0.2), (0.2, 0.1),
                                                            (0.2, 0.2)}
    assert all(c.d == 4 and c.width == 16 for c in configs)
    assert recipe.execution.max_members == 64  # defaults


@pytest.mark.parametrize("seeds, expected", [
    ("4", (0, 1, 2, 3)), ("{count: 2, start: 5}", (5, 6)), ("[3, 1, 8]", (3, 1, 8)),
])
def test_seed_forms(seeds, expected):
    assert parse(GOOD.replace("seeds: 3", f"seeds: {seeds}")).seeds == expected


def test_a_list_of_sub_grids_is_their_union_without_duplicates():
    text = GOOD.split("grid:")[0] + """grid:
  - {noise: [0.0, 0.2], weight_decay: [0.1]}
  - {noise: [0.2], weight_decay: [0.1, 0.3]}
seeds: 1
"""
    configs = parse(text).configs()
    assert sorted((c.noise, c.weight_decay) for c in configs) == [(0.0, 0.1), (0.2, 0.1),
                                                                   (0.2, 0.3)]


@pytest.mark.parametrize("edit, expected", [
    # (old → new text, expected "line: key: message" fragment)
    (("seeds: 3", "sedes: 3"), "r.yaml:9: sedes: unknown key 'sedes' (did you mean 'seeds'?)"),
    (("  width: 16", "  widht: 16"), "r.yaml:5: base.widht: unknown config key "
                                     "'widht' (did you mean 'width'?)"),
    (("  noise: [0.0, 0.2]", "  noise: [0.0,\n    0.7]"), "r.yaml:8: grid.noise[1]: 0.7 is not "
                                                         "allowed; input should be less than"),
    (("  d: 4", "  d: 0"), "r.yaml:4: base.d: 0 is not allowed; input should be "
                           "greater than or equal to 1"),
    (("  d: 4", "  noise: 0.5"), "r.yaml:7: grid.noise: also set in base"),
    (("  d: 4", "  seed: 4"), "r.yaml:4: base.seed: set model seeds with the top-level"),
    (("  weight_decay: [0.1, 0.2]", "  weight_decay: 0.1"), "r.yaml:8: grid.weight_decay: "
                                                            "must be a non-empty list"),
    (("seeds: 3", "seeds: 0"), "r.yaml:9: seeds: 0 is not allowed; give a count from 1 to 100,000"),
    (("seeds: 3", "seeds: [1, -2]"), "r.yaml:9: seeds[1]: -2 is not allowed"),
    (("task: toy", "task: mnist"), "r.yaml:2: task: 'mnist' is not allowed; use one of"),
    (("experiment: tiny", "experiment: a b"), "r.yaml:1: experiment: 'a b' is not allowed"),
    (("experiment: tiny\n", ""), "r.yaml:1: experiment: missing (required)"),
    (("seeds: 3", "seeds: 3\nexecution: {max_membres: 8}"),
     "r.yaml:10: execution.max_membres: unknown key 'max_membres' (did you mean 'max_members'?)"),
    (("seeds: 3", "seeds: 3\nexecution:\n  max_members: 0"),
     "r.yaml:11: execution.max_members: 0 is not allowed; input should be greater than or"),
    (("seeds: 3", "seeds: 3\nexecution: {track: [weights, nope]}"),
     "r.yaml:10: execution.track: 'nope' is not allowed; use weights"),
    (("  width: 16", "  width: 16\n  width: 32"), "r.yaml:6: base.width: duplicate key"),
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
    text = GOOD.split("grid:")[0] + "grid:\n  - {noise: [0.0]}\n  - {noise: [0.2, 2.0]}\n"
    with pytest.raises(RecipeError, match=r"^r\.yaml:8: grid\[1\]\.noise\[1\]: 2\.0 is not"):
        parse(text)


# --- every study's shipped presets (each study's own sizes: tests/studies/<study>/) ----------
def test_every_shipped_preset_loads_and_is_named_study_scale():
    """Every recipe a registered study ships parses, expands to runs, and names its experiment
    ``<study>-<scale>`` (loops over the registry, so it adapts when a study is deleted)."""
    checked = 0
    for st in studies():
        for scale in st.scales():
            recipe = load_recipe(st.recipe_path(scale))
            assert recipe.configs() and recipe.experiment == f"{st.name}-{scale}"
            checked += 1
    assert checked >= len(studies())


# --- hostile recipes (issue 12): refused with one line, before memory or time runs out -------
def _bomb(levels: int) -> str:
    """A YAML "billion laughs": 10**levels values from a few hundred bytes of aliases."""
    text = "experiment: bomb\ntask: toy\ndescription:\n  - &l0 [a, a, a, a, a, a, a, a, a, a]\n"
    for i in range(1, levels):
        text += f"  - &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n"
    return text


@pytest.mark.parametrize("text, expected", [
    (_bomb(9), r"^r\.yaml:\d+: too large: more than 100,000 values once aliases are expanded"),
    ("experiment: x\ntask: toy\ndescription: " + "[" * 5000 + "]" * 5000 + "\n",
     r"^r\.yaml: nested more than 32 levels deep"),
    ("experiment: x\ntask: toy\ndescription: " + "[" * 40 + "]" * 40 + "\n",
     r"^r\.yaml:3: nested more than 32 levels deep"),
    ("experiment: x\ntask: toy\ndescription: &a [1, *a]\n", r"^r\.yaml:3: .*recursive alias"),
    (GOOD.replace("seeds: 3", "seeds: {count: 1000000000}"),
     r"^r\.yaml:9: seeds\.count: 1000000000 is not allowed; give a count from 1 to 100,000"),
    (GOOD.replace("seeds: 3", "seeds: 1000000000"), r"^r\.yaml:9: seeds: 1000000000 is not"),
    (GOOD.replace("seeds: 3", "seeds: 30000"), r"^r\.yaml:6: grid: 120,000 runs \(cells × "
     r"seeds\) is not allowed; a recipe holds at most 100,000 runs"),
    (GOOD.replace("  weight_decay: [0.1, 0.2]\n", "  epochs: [1, true]\n"),
     r"^r\.yaml:8: grid\.epochs\[1\]: true is not allowed; it must be an integer"),
])
def test_hostile_recipes_are_refused_in_one_line(text, expected):
    with pytest.raises(RecipeError, match=expected) as info:
        parse(text)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("edit, expected", [
    (("d: 4", "d: true"), r"^r\.yaml:4: base\.d: true is not allowed; it must "
     r"be an integer, not a boolean"),  # before: accepted as d = 1
    (("width: 16", "width: 16\n  broken: 1"), r"^r\.yaml:6: base\.broken: 1 is not allowed; use "
     r"true or false"),
    (("seeds: 3", "seeds: 3\nexecution: {max_members: true}"), r"^r\.yaml:10: "
     r"execution\.max_members: true is not allowed; it must be an integer"),
    (("noise: [0.0, 0.2]", "noise: [0.0, false]"), r"grid\.noise\[1\]: false is not allowed; it "
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
