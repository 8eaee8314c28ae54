"""How toy runs read in ``rulelab runs``, ``status`` and the report: the generic rate table
(generalized: eval accuracy ≥ 90% at an evaluation) and accuracy and loss curves."""

from rulelab.report.views import RunsView


class ToyView(RunsView):
    curves = (("train", "acc", "C0", "train"), ("eval", "acc", "C1", "eval"))
    losses = (("train", "loss", "C0", "train"), ("eval", "loss", "C1", "eval"))


VIEW = ToyView()
