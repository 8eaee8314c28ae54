"""Study S's view of the HTML report (SPEC S.3: rates with Wilson CI and k/n, the paper column
at the paper's setting, both readings; "Cross-cutting": curves carry seed spread, results carry
their code version). The page of any study: tests/report/test_report.py (on the toy study)."""

import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from page_checks import assert_self_contained, images
from rulelab.analysis.stats import format_rate
from rulelab.report.figures import accuracy_curves, loss_curves
from rulelab.report.html import write_report
from rulelab.studies.shortcut_saturation.rate_figure import rate_vs_ratio

# Seeds that generalize per (layers, ratio), out of 3: shaped like the paper's headline.
GENERALIZING = {(1, 0.5): 1, (1, 0.9): 0, (2, 0.5): 0, (2, 0.9): 2}
PAPER = {"2L": {0.5: 0.0, 0.9: 0.77}, "1L": {0.5: 0.33, 0.9: 0.0}}


def make_lab(epochs: int = 20, seeds: int = 3, weight_decays=(0.1,)):
    """2 archs × 2 ratios × seeds, with 20-epoch curves, plus one failed and one pending run."""
    rng = np.random.default_rng(0)
    runs, metrics = [], []
    ep = np.arange(1, epochs + 1) * 10
    for (layers, ratio), wins in GENERALIZING.items():
        for wd in weight_decays:
            for seed in range(seeds):
                run_id = f"L{layers}-r{ratio}-wd{wd}-s{seed}"
                won = seed < wins
                adv = np.clip(np.linspace(0.05, 1.3 if won else 0.4, epochs), 0, 1)
                first = float(ep[np.argmax(adv >= 1.0)]) if won else np.nan
                # the paper's setting (SPEC S.1–S.3): its numbers may stand beside these
                runs.append(dict(run_id=run_id, status="done", task="mpsp", layers=layers,
                                 heads=layers,
                                 ratio=ratio, weight_decay=wd, label_mod=2, shortcut="max",
                                 seq_len=10, vocab=64, n_train=16384, epochs=15000,
                                 batch_size=0, lr=1e-3, d_model=64, d_mlp=128, seed=seed,
                                 generalized=won, adv_generalized=won,
                                 first_epoch_generalized=first, first_epoch_adv_100=first,
                                 max_adv_acc=adv.max(), final_adv_acc=adv[-1],
                                 code_version="0.1.0+g1234567"))
                val = np.minimum(1.0, 0.6 + 0.05 * np.arange(epochs))  # 100% from epoch 90
                loss_c = np.exp(-0.2 * np.arange(epochs)) + 1e-3
                loss_a = 2 * np.exp(-0.05 * np.arange(epochs)) + rng.uniform(0, 0.05, epochs)
                for split, metric, values in [("val", "acc", val), ("adv", "acc", adv),
                                              ("train_consistent", "loss", loss_c),
                                              ("train_anti", "loss", loss_a)]:
                    metrics.append(pd.DataFrame(dict(run_id=run_id, epoch=ep, split=split,
                                                     metric=metric, value=values)))
    base = dict(runs[-1], generalized=None, adv_generalized=None,
                first_epoch_generalized=np.nan, first_epoch_adv_100=np.nan, max_adv_acc=np.nan)
    runs.append(dict(base, run_id="failed-1", status="failed", seed=90))
    runs.append(dict(base, run_id="pending-1", status="pending", seed=91))
    return pd.DataFrame(runs), pd.concat(metrics, ignore_index=True)


def test_report_is_self_contained_with_rates(tmp_path):
    runs, metrics = make_lab()
    runs = runs.assign(heads=2)  # the headline's setting has 2 heads (issue 21: 1L·1H is not)
    out = write_report(tmp_path / "nested" / "dir" / "report.html", title="Study S <quick>",
                       runs=runs, metrics=metrics,  # the paper's numbers: study S's view
                       sections=[("Notes", "a < b & c"), ("Raw", "<p><b>bold</b></p>")])
    assert out.exists() and out.parent.name == "dir"
    text = out.read_text(encoding="utf-8")
    assert_self_contained(text)
    # One row per (layers, ratio); the failed and pending runs are not counted.
    for (_layers, _ratio), wins in GENERALIZING.items():
        assert format_rate(wins, 3) in text
    assert "(2/3)" in text and "(1/3)" in text and "(4/3)" not in text
    assert "Study S &lt;quick&gt;" in text
    assert "a &lt; b &amp; c" in text and "<p><b>bold</b></p>" in text
    assert "0.1.0+g1234567" in text
    assert "<td>77%</td>" in text  # the paper's 2L, r = 0.9 reference beside our rate
    assert "scale: n = 10, V = 64, N = 16,384, full batch" in text
    assert "— the paper&#x27;s setting" in text and "paper column omitted" not in text
    assert "adv-only" not in text  # both readings agree here: one rate column
    assert "93.3% [80.0%, 100.0%]" not in text and "[40.0%, 40.0%]" in text  # seed ranges
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temp file left


def test_toy_scale_report_omits_the_paper_column(tmp_path):
    # issue 8: the quick preset's setting is not the paper's, so the paper's numbers must not
    # stand beside its rates (the old report printed them whatever the scale)
    runs, metrics = make_lab()
    runs = runs.assign(seq_len=6, vocab=6, n_train=2048, batch_size=64, epochs=100, lr=3e-3)
    text = write_report(tmp_path / "r.html", title="quick", runs=runs, metrics=metrics
                        ).read_text()
    assert "<td>77%</td>" not in text and "<th>paper</th>" not in text
    assert ("paper column omitted: the setting differs from the paper&#x27;s: n = 6 (paper setting "
            "10)") in text
    assert "minibatches of 64 (paper setting full batch)" in text and "3,200 steps" in text
    assert "not the paper&#x27;s setting" in text


def test_flipped_shortcut_runs_show_both_readings(tmp_path):
    runs, metrics = make_lab()
    flipped = runs.index[(runs.layers == 1) & (runs.ratio == 0.9) & (runs.status == "done")][:2]
    runs.loc[flipped, "adv_generalized"] = True  # adv 100% with val low: the flipped shortcut
    text = write_report(tmp_path / "r.html", title="t", runs=runs, metrics=metrics).read_text()
    assert "adv-only, the paper&#x27;s text" in text and "flipped shortcut" in text
    row = re.search(r"<tr><td>1</td><td>1</td><td>0.9</td>(.*?)</tr>", text).group(1)
    assert format_rate(0, 3) in row and format_rate(2, 3) in row


def test_old_lab_summaries_are_recomputed_from_metrics(tmp_path):
    # a lab written before the val-and-adv criterion: ``first_epoch_100`` and an adv-only
    # ``generalized``; its report must not crash and must count by the new criterion
    runs, metrics = make_lab()
    runs = runs.drop(columns=["adv_generalized", "first_epoch_adv_100",
                              "first_epoch_generalized"])
    runs["first_epoch_100"] = np.nan
    won = runs.index[(runs.layers == 2) & (runs.ratio == 0.9) & (runs.status == "done")][:2]
    runs.loc[won, "first_epoch_100"] = 160.0
    val_low = metrics.run_id.isin(runs.loc[won[:1], "run_id"]) & (metrics.split == "val")
    metrics.loc[val_low, "value"] = 0.3  # its adv hit 100% but val never did
    text = write_report(tmp_path / "r.html", title="old", runs=runs, metrics=metrics).read_text()
    row = re.search(r"<tr><td>2</td><td>2</td><td>0.9</td>(.*?)</tr>", text).group(1)
    assert format_rate(1, 3) in row and format_rate(2, 3) in row  # new 1/3, adv-only 2/3


def test_lab_in_progress_renders_without_finished_runs(tmp_path):
    runs, metrics = make_lab()
    runs = runs.assign(status="running", generalized=None)
    metrics = metrics.rename(columns={"epoch": "step"})  # the store may key curves by step
    text = write_report(tmp_path / "r.html", title="live", runs=runs, metrics=metrics).read_text()
    assert "— (0/0)" in text and "14 running" in text
    assert len(images(text)) == 3


def test_rate_vs_ratio_lines_per_config_and_paper_points():
    runs, _ = make_lab(weight_decays=(0.1, 0.4))
    fig = rate_vs_ratio(runs, paper=PAPER)
    assert isinstance(fig, Figure)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert {"1L·1H wd=0.1", "2L·2H wd=0.4", "paper 1L", "paper 2L",
            "chance b = 1/k = 1/2 (k labels)"} <= set(labels)
    assert fig.axes[0].get_ylim() == pytest.approx((-0.03, 1.03))


def test_accuracy_curves_one_panel_per_config_with_seed_lines():
    runs, metrics = make_lab()
    fig = accuracy_curves(runs, metrics)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 4
    titles = [ax.get_title() for ax in panels]
    assert "2L·2H r=0.9\n2/3 generalized" in titles
    # 2 splits × 3 seeds thin lines + 2 medians + the first-100% markers + chance line.
    assert len(panels[0].lines) >= 2 * 3 + 2
    few = accuracy_curves(runs, metrics, max_configs=2)
    assert len([ax for ax in few.axes if ax.get_visible()]) == 2
    assert len(loss_curves(runs, metrics).axes) == 4
