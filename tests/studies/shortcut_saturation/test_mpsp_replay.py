"""Study S's summary replayed from its stored metrics (``rulelab verify``, issue 24): a summary
recomputed from the metric rows agrees with the stored one, a changed value disagrees, and an
adv-only summary of before issue 8 is read by what its fields meant then."""

import pandas as pd

from rulelab.config.base import make_config
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig


def _rows(points) -> pd.DataFrame:
    """Metric rows of evaluations ``(epoch, val acc, adv acc)``."""
    return pd.DataFrame([(e, s, m, v) for e, val, adv in points
                         for s, m, v in (("val", "acc", val), ("adv", "acc", adv),
                                         ("train", "loss", 0.25))],
                        columns=["epoch", "split", "metric", "value"])


def test_a_summary_replays_from_its_metrics_and_a_changed_value_disagrees():
    from rulelab.verify.replay import disagreement, replay

    flat = make_config(MPSPRunConfig).flat()
    summary = replay(flat, _rows([(0, 0.5, 0.25), (5, 1.0, 1.0), (10, 1.0, 0.5)]), None)
    assert (summary["generalized"], summary["first_epoch_generalized"]) == (True, 5)
    assert (summary["max_adv_acc"], summary["final_adv_acc"], summary["transient"]) == \
        (1.0, 0.5, True)
    assert disagreement(flat, dict(summary), summary) == []
    assert disagreement(flat, {**summary, "final_epoch": 5}, summary) == ["final_epoch"]
    # an adv-only summary of before issue 8: its "generalized" meant something else (skipped),
    # its max_adv_acc did not
    legacy = {"generalized": True, "first_epoch_100": 5, "max_adv_acc": 1.0}
    assert disagreement(flat, legacy, summary) == []
    assert disagreement(flat, {**legacy, "max_adv_acc": 0.75}, summary) == ["max_adv_acc"]
