"""Study S's scale ladder (issue 20): each rung keeps the paper's invariants with all four
headline cells and at least 8 seeds a cell; the other scales say which invariants they break.

The invariants are computed from the recipes' own configs (what `rulelab sweep` would train),
and the parameter count they rest on is checked against the model itself."""

from __future__ import annotations

import pandas as pd
import pytest

from rulelab.models.transformer import EnsembleTransformer
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.invariants import invariants, param_count
from rulelab.study_registry import study
from rulelab.sweep.recipe import load_recipe

S = study("shortcut-saturation")
RUNGS = ("ladder-2k", "ladder-4k", "ladder-8k")


def recipe_runs(scale: str) -> pd.DataFrame:
    return pd.DataFrame([c.flat() for c in load_recipe(S.recipe_path(scale)).configs()])


@pytest.mark.parametrize("shape", [
    dict(layers=2, d_model=64, d_mlp=128),  # the paper's: 72,066
    dict(layers=1, d_model=24, d_mlp=48),
    dict(layers=3, d_model=32, d_mlp=0, heads=4, ln=False, label_mod=3, vocab=17, seq_len=5),
])
def test_the_parameter_count_is_the_models_own(shape):
    cfg = MPSPRunConfig(**shape)
    model = EnsembleTransformer(cfg, 1)
    assert param_count(**cfg.model_dump()) == sum(p.numel() for p in model.parameters())


def test_the_paper_model_has_the_papers_72066_parameters():
    assert param_count(layers=2, d_model=64, d_mlp=128, vocab=64, seq_len=10, label_mod=2) \
        == 72066


@pytest.mark.parametrize("scale", RUNGS)
def test_every_rung_keeps_every_invariant_with_the_four_cells_and_8_seeds(scale):
    runs = recipe_runs(scale)
    broken = [i.name for i in invariants(runs) if not i.kept]
    assert broken == []
    seeds = runs.groupby(["layers", "ratio"])["seed"].nunique()
    assert set(seeds.index) == {(1, 0.5), (1, 0.9), (2, 0.5), (2, 0.9)}
    assert (seeds >= 8).all()
    assert (runs["heads"] == 2).all() and (runs["weight_decay"] == 0.1).all()
    values = {i.name: i.value for i in invariants(runs)}
    assert values["wd_time"] == "1.5" and values["opt_time"] == "15"


def test_the_rungs_climb_toward_the_papers_n_at_4_to_6_parameters_per_example():
    per_example = {s: float(next(i.value for i in invariants(recipe_runs(s))
                                 if i.name == "params_per_example")) for s in RUNGS}
    assert per_example == {"ladder-2k": 5.7, "ladder-4k": 4.8, "ladder-8k": 5.1}
    sizes = [recipe_runs(s)["n_train"].iloc[0] for s in RUNGS]
    assert sizes == [2048, 4096, 8192]


def test_the_paper_keeps_its_own_invariants_and_medium_and_quick_break_them():
    assert all(i.kept for i in invariants(recipe_runs("paper-headline")))
    medium = {i.name: i for i in invariants(recipe_runs("medium"))}
    # issue 20's table: 34 parameters an example, lr·wd·steps 0.15, lr·steps 1.5
    assert medium["params_per_example"].value == "33.6" and \
        not medium["params_per_example"].kept
    assert (medium["wd_time"].value, medium["wd_time"].kept) == ("0.15", False)
    assert (medium["opt_time"].value, medium["opt_time"].kept) == ("1.5", False)
    assert medium["full_batch"].kept and not medium["task"].kept  # n = 8, V = 16
    quick = {i.name: i for i in invariants(recipe_runs("quick"))}
    assert not quick["full_batch"].kept  # minibatches of 64
    # 100 epochs × 32 minibatches at lr 3e-3: lr·steps 9.6 is within the fair range, but
    # lr·wd·steps 0.96 is below one time constant
    assert (quick["opt_time"].value, quick["opt_time"].kept) == ("9.6", True)
    assert (quick["wd_time"].value, quick["wd_time"].kept) == ("0.96", False)


def test_a_lab_whose_runs_differ_reads_a_range_kept_only_when_every_run_keeps_it():
    runs = pd.concat([recipe_runs("ladder-2k"),
                      recipe_runs("ladder-2k").assign(weight_decay=0.05)])
    wd = next(i for i in invariants(runs) if i.name == "wd_time")
    assert wd.value == "0.75–1.5" and not wd.kept
