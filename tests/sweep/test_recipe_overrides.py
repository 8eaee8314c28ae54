"""``key=value`` overrides of a recipe (issue 23): applied to the file's YAML, then checked
exactly as the file is, with a problem in an overridden key named by the override."""

from __future__ import annotations

from pathlib import Path

import pytest

from rulelab.sweep.overrides import make_override, parse_override
from rulelab.sweep.recipe import load_recipe
from rulelab.sweep.yaml_lines import RecipeError

QUICK = (Path(__file__).resolve().parents[2] / "src" / "rulelab" / "studies" /
         "shortcut_saturation" / "recipes" / "quick.yaml")


def load(*items: str):
    return load_recipe(QUICK, [parse_override(i) for i in items])


def test_the_issue_example_sets_epochs_and_seed_count():
    plain, r = load(), load("base.epochs=50", "seeds.count=2")
    assert len(plain.configs()) == 32 and {c.epochs for c in plain.configs()} == {100}
    assert len(r.configs()) == 8 and {c.epochs for c in r.configs()} == {50}
    assert r.seeds == (0, 1) and r.overrides == ("base.epochs=50", "seeds.count=2")
    assert r.description == f"{plain.description} (overridden: base.epochs=50, seeds.count=2)"
    # everything else is the file's: same n_train, lr, grid
    assert {(c.n_train, c.lr) for c in r.configs()} == {(2048, 0.003)}
    assert sorted({(c.layers, c.ratio) for c in r.configs()}) == [(1, 0.5), (1, 0.9),
                                                                  (2, 0.5), (2, 0.9)]


def test_a_bare_config_key_goes_to_base_or_to_the_grid_and_leaves_the_other():
    r = load("layers=2", "ratio=[0.5,0.7,0.9]", "seeds=3")
    assert r.base["layers"] == 2 and r.grids == ({"ratio": [0.5, 0.7, 0.9]},)
    assert len(r.configs()) == 9 and {c.layers for c in r.configs()} == {2}
    r = load("grid.weight_decay=[0.0,0.1]")  # a new axis; taken out of base
    assert "weight_decay" not in r.base and len(r.configs()) == 64


def test_values_are_yaml_and_dict_overrides_are_python_values():
    r = load("base.shortcut=first", "execution.max_members=16", "experiment=mine")
    assert {c.shortcut for c in r.configs()} == {"first"}
    assert r.execution.max_members == 16 and r.experiment == "mine"
    r = load_recipe(QUICK, [make_override("base.lr", 1e-3), make_override("grid.ratio", [0.6])])
    assert {(c.lr, c.ratio) for c in r.configs()} == {(1e-3, 0.6)}


def test_seeds_given_as_a_count_take_seeds_count(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("experiment: e\ntask: mpsp\nbase: {epochs: 5}\nseeds: 3\n")
    assert load_recipe(path, [parse_override("seeds.count=5")]).seeds == (0, 1, 2, 3, 4)
    assert load_recipe(path, [parse_override("seeds.start=10")]).seeds == (10, 11, 12)


def test_a_list_of_sub_grids_is_overridden_in_each(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("experiment: e\ntask: mpsp\nbase: {epochs: 5}\ngrid:\n"
                    "  - {ratio: [0.5], label_mod: [2]}\n  - {ratio: [0.9], label_mod: [3]}\n")
    r = load_recipe(path, [parse_override("grid.ratio=[0.7]")])
    assert sorted((c.ratio, c.label_mod) for c in r.configs()) == [(0.7, 2), (0.7, 3)]
    r = load_recipe(path, [parse_override("grid.1.ratio=[0.8]")])
    assert sorted((c.ratio, c.label_mod) for c in r.configs()) == [(0.5, 2), (0.8, 3)]


@pytest.mark.parametrize("item, expected", [
    ("base.epochs=0", "base.epochs=0: 0 is not allowed; input should be greater than or equal "
                      "to 1"),
    ("base.epoch=50", "base.epoch=50: unknown config key 'epoch' (did you mean 'epochs'?)"),
    ("foo=1", "foo=1: unknown config key 'foo'; allowed: label_mod, shortcut, ratio"),
    ("epochs=abc", "epochs=abc: 'abc' is not allowed; input should be a valid integer"),
    ("seeds.count=0", "seeds.count=0: 0 is not allowed; give a count from 1 to 100,000"),
    ("seeds.size=2", "seeds.size=2: unknown key; use count and start"),
    ("grid.ratio=[0.5,1.5]", "grid.ratio=[0.5,1.5]: grid.ratio[1]: 1.5 is not allowed; input "
                             "should be less than or equal to 1"),
    ("grid.ratio=0.5", "grid.ratio=0.5: must be a non-empty list of values"),
    ("execution.max_members=0", "execution.max_members=0: 0 is not allowed; input should be "
                                "greater than or equal to 1"),
    ("execution.max_membrs=8", "execution.max_membrs=8: unknown key 'max_membrs' (did you "
                               "mean 'max_members'?)"),
    ("experiment=a b", "experiment=a b: 'a b' is not allowed; use up to 100 letters"),
    ("grid.0.ratio=[0.5]", "grid.0.ratio=[0.5]: grid is a mapping, not a list"),
    ("base.epochs.x=1", "base.epochs.x=1: base.epochs is 100, not a mapping or a list"),
    ("nokey", "'nokey' is not a key=value override; write e.g. base.epochs=50"),
    ("base.epochs=[1", "base.epochs=[1: the value is not valid YAML"),
])
def test_a_bad_override_is_one_line_naming_it_and_what_is_allowed(item, expected):
    with pytest.raises(RecipeError) as err:
        load(item)
    message = str(err.value)
    assert message.startswith(expected) and "\n" not in message, message


def test_a_problem_the_override_did_not_cause_still_names_the_file_line(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("experiment: e\ntask: mpsp\nbase: {epochs: 5, lr: -1.0}\n")
    with pytest.raises(RecipeError, match=r"^.*r\.yaml:3: base\.lr: -1\.0 is not allowed"):
        load_recipe(path, [parse_override("base.epochs=7")])
    assert load_recipe(path, [parse_override("base.lr=0.01")]).base == {"epochs": 5, "lr": 0.01}
