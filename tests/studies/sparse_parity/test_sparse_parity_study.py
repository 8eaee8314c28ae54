"""The sparse-parity study declaration (:mod:`rulelab.study`): every named part resolves and
does what the engine expects of it; listing the study imports no torch."""

import math
import sys

import pandas as pd
import pytest
import yaml

from rulelab.studies.sparse_parity import SPARSE_PARITY, STUDY
from rulelab.study import resolve


def test_the_study_declaration_resolves(tmp_path):
    from rulelab.engine.base import EnsembleTrainerBase
    from rulelab.report.views import RunsView

    assert STUDY.name == "sparse-parity" and STUDY.tasks == (SPARSE_PARITY,)
    assert STUDY.scales() == ["quick", "scaling-k"]
    assert issubclass(SPARSE_PARITY.trainer_class(), EnsembleTrainerBase)
    assert isinstance(SPARSE_PARITY.view(), RunsView)
    assert callable(resolve(STUDY.reproduce))
    assert set(SPARSE_PARITY.axes) <= set(SPARSE_PARITY.config.model_fields)
    quick = yaml.safe_load(STUDY.recipe_path("quick").read_text(encoding="utf-8"))
    assert quick["task"] == SPARSE_PARITY.name
    SPARSE_PARITY.config(**quick["base"])  # the recipe's base is a valid config
    # rulelab data sparse_parity: the fixed sets as Parquet, one row per example
    cfg = SPARSE_PARITY.config(n_bits=6, k=2, samples="fixed", n_train=50, n_eval=64)
    data = resolve(SPARSE_PARITY.data.make)(cfg)
    line = resolve(SPARSE_PARITY.data.write)(data, tmp_path / "d.parquet")
    frame = pd.read_parquet(tmp_path / "d.parquet")
    assert "train 50" in line and len(frame) == 114
    assert set(frame["y"]) <= {-1, 1} and frame["x"].str.len().eq(6).all()


def test_the_coordinates_tracker_sums_to_the_support_mass():
    from rulelab.studies.sparse_parity.metrics import support_mass

    configs = [SPARSE_PARITY.config(n_bits=7, k=3, width=16, seed=s, epochs=5) for s in (0, 1)]
    trainer = SPARSE_PARITY.trainer_class()(configs)
    trainer.fit()
    frame = SPARSE_PARITY.tracker("coordinates")(trainer)
    assert len(frame) == 2 * 7 and set(frame["member"]) == {0, 1}
    on = frame[frame["on_support"]].groupby("member")["share"].sum()
    expected = support_mass(trainer.model.first_layer(), trainer.data.support)
    assert on.tolist() == pytest.approx(expected.tolist())


def test_the_cost_model_scales_with_the_shapes():
    cost = SPARSE_PARITY.cost
    small = cost(SPARSE_PARITY.config(n_bits=20, width=256, epochs=1000), 512, 2048)
    wide = cost(SPARSE_PARITY.config(n_bits=20, width=1024, epochs=1000), 512, 2048)
    assert wide.flops_per_epoch == pytest.approx(4 * small.flops_per_epoch)
    assert small.flops_per_epoch == 3 * 2 * 256 * 21 * 32  # 3 × forward × batch of 32
    assert wide.member_bytes > small.member_bytes > 0
    fixed = cost(SPARSE_PARITY.config(n_bits=20, width=256, samples="fixed", n_train=320,
                                      epochs=10), 512, 2048)
    assert fixed.flops_per_epoch == pytest.approx(10 * small.flops_per_epoch)  # 10 steps
    assert fixed.passes_per_epoch == 10
    t = cost(SPARSE_PARITY.config(n_bits=20, model="transformer"), 512, 2048)
    assert t.flops_per_epoch > 0 and not math.isnan(t.flops_per_eval)


def test_listing_the_study_imports_no_torch():
    import subprocess

    code = ("import sys; import rulelab.studies.sparse_parity as s; s.STUDY.scales(); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
