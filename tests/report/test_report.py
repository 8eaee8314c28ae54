"""The self-contained HTML report of any study (SPEC "Cross-cutting": results carry their code
version; rates with Wilson CI and k/n), on the test-only toy study. Study S's view of it (the
paper column, both readings, old summaries): tests/studies/shortcut_saturation/test_s_report.py."""


import numpy as np
import pandas as pd
import pytest

from page_checks import assert_self_contained
from rulelab.analysis.stats import format_rate
from rulelab.report.html import write_report

WINS = {(8, 0.0): 2, (8, 0.2): 1, (16, 0.0): 3, (16, 0.2): 0}  # seeds generalized, of 3


def toy_lab(epochs: int = 8, seeds: int = 3):
    """2 widths × 2 noise levels × seeds of toy runs with accuracy and loss curves."""
    runs, metrics = [], []
    ep = np.arange(1, epochs + 1) * 5
    for (width, noise), wins in WINS.items():
        for seed in range(seeds):
            run_id = f"w{width}-n{noise}-s{seed}"
            won = seed < wins
            acc = np.linspace(0.5, 0.95 if won else 0.7, epochs)
            runs.append(dict(run_id=run_id, status="done", task="toy", d=4, width=width,
                             noise=noise, seed=seed, generalized=won,
                             first_epoch_generalized=float(ep[-1]) if won else np.nan,
                             final_eval_acc=acc[-1], code_version="0.1.0+g7654321"))
            for split, metric, values in [("train", "acc", acc), ("eval", "acc", acc - 0.05),
                                          ("train", "loss", 1 - acc), ("eval", "loss", 1.1 - acc)]:
                metrics.append(pd.DataFrame(dict(run_id=run_id, epoch=ep, split=split,
                                                 metric=metric, value=values)))
    return pd.DataFrame(runs), pd.concat(metrics, ignore_index=True)


@pytest.mark.usefixtures("toy")
def test_report_is_self_contained_with_rates(tmp_path):
    runs, metrics = toy_lab()
    out = write_report(tmp_path / "nested" / "dir" / "report.html", title="Toy <quick>",
                       runs=runs, metrics=metrics,
                       sections=[("Notes", "a < b & c"), ("Raw", "<p><b>bold</b></p>")])
    assert out.exists() and out.parent.name == "dir"
    text = out.read_text(encoding="utf-8")
    assert_self_contained(text)
    for wins in WINS.values():  # one rate per (width, noise), with its interval and k/n
        assert format_rate(wins, 3) in text
    assert "Toy &lt;quick&gt;" in text
    assert "a &lt; b &amp; c" in text and "<p><b>bold</b></p>" in text
    assert "0.1.0+g7654321" in text
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temp file left


def test_empty_lab_gets_a_message(tmp_path):
    runs = pd.DataFrame(columns=["run_id", "status", "ratio", "generalized"])
    metrics = pd.DataFrame(columns=["run_id", "epoch", "split", "metric", "value"])
    text = write_report(tmp_path / "r.html", title="empty", runs=runs, metrics=metrics).read_text()
    assert "no runs yet" in text and "data:image/png" not in text
