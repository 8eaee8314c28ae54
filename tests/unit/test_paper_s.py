"""Scale honesty (issue 8): the paper's numbers stand beside a rate only where the runs are at
the paper's setting, judged from config values (not a preset's name); every table says its
scale and carries per-seed ranges."""

import io

import pandas as pd
from rich.console import Console

from rulelab.report.terminal import print_rate_table
from rulelab.studies import study
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.paper import (
    describe_scale,
    differences,
    matches_paper,
    paper_note,
)
from rulelab.sweep.recipe import load_recipe

# the fixed values of study S's quick and paper recipes (the paper's numbers, PAPER_S, are
# always the study view's: a table shows them where runs are at the paper's setting)
QUICK = load_recipe(study("shortcut-saturation").recipe_path("quick")).base
PAPER = load_recipe(study("shortcut-saturation").recipe_path("paper")).base


def _runs(fixed: dict, layers=(1, 2), ratios=(0.5, 0.9), seeds=3) -> pd.DataFrame:
    rows = []
    for la in layers:
        for r in ratios:
            for s in range(seeds):
                cfg = MPSPRunConfig(**{**fixed, "layers": la, "ratio": r, "seed": s})
                won = la == 2 and r == 0.9 and s == 0
                rows.append({"run_id": cfg.run_id, "status": "done", "task": "mpsp",
                             **cfg.flat(), "generalized": won, "adv_generalized": won,
                             "max_adv_acc": 1.0 if won else 0.2 + 0.1 * s})
    return pd.DataFrame(rows)


def _print(runs: pd.DataFrame, **kw) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    print_rate_table(console, runs, **kw)
    return console.export_text()


def test_the_setting_is_judged_from_config_values():
    quick = MPSPRunConfig(**QUICK).flat()
    assert not matches_paper(quick)
    assert differences(quick) == [
        "n = 6 (paper 10)", "V = 6 (paper 64)", "N = 2,048 (paper 16,384)",
        "minibatches of 64 (paper full batch)", "100 epochs (paper 15,000 epochs)",
        "lr 0.003 (paper 0.001)", "3,200 steps (paper 15,000)"]
    paper = MPSPRunConfig(**PAPER).flat()
    assert matches_paper(paper) and differences(paper) == []
    # a user's own run at the paper's setting (other heads / weight decay / seed) matches too
    own = MPSPRunConfig(**{**PAPER, "heads": 1, "weight_decay": 0.3, "seed": 7}).flat()
    assert matches_paper(own)
    assert matches_paper({**paper, "batch_size": paper["n_train"]})  # one batch = full batch
    assert differences({**paper, "label_mod": 3}) == ["k = 3 (paper 2)"]


def test_quick_table_omits_the_paper_column_and_says_why():
    text = _print(_runs(QUICK))
    assert "scale: n = 6, V = 6, N = 2,048, minibatches of 64, 100 epochs (3,200 steps)" in text
    assert "8 seeds" not in text and "3 seeds per cell — not the paper's setting" in text
    assert "paper │" not in text and "77%" not in text
    assert "paper column omitted: the setting differs from the paper's: n = 6 (paper 10)" in text
    assert "20.0% [20.0%, 20.0%]" not in text  # seeds 0..2: max adv 0.2, 0.3, 0.4
    assert "30.0% [20.0%, 40.0%]" in text and "56.7% [30.0%, 100.0%]" in text


def test_paper_setting_table_shows_the_paper_column():
    text = _print(_runs(PAPER))
    assert "the paper's setting" in text and "paper column omitted" not in text
    rows = {tuple(c.strip() for c in line.split("│")[1:4]): line for line in text.splitlines()
            if line.count("│") > 5}
    assert rows[("2", "2", "0.9")].rstrip(" │").endswith("77%")
    assert rows[("1", "2", "0.5")].rstrip(" │").endswith("33%")


def test_mixed_lab_marks_the_cells_off_the_setting():
    runs = pd.concat([_runs(PAPER, layers=(2,)), _runs(QUICK, layers=(1,))])
    assert "partly the paper's setting" in describe_scale(runs)
    text = _print(runs)
    assert "≠ setting" in text and "77%" in text
    assert paper_note(runs).startswith("paper column shown only for cells at the paper's setting")
