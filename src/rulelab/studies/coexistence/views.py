"""How study M's runs read in ``rulelab runs``, ``status`` and the generic report: a run
generalizes when its final test accuracy reaches the task's level (modular 99%, SPEC M.3;
digits 90%, M.4.7); curves show clean-train, noisy-train (against the corrupted labels:
memorization) and test accuracy. ``rulelab report`` draws the reproduction's figures
(:mod:`.panels`): double descent and learning order from the runs, and FF, activation swap,
neuron partition and the early lead wherever ``rulelab analyze`` stored their tables."""

from __future__ import annotations

from rulelab.report.views import RunsView
from rulelab.studies.coexistence.names import NAMES


class CoexistenceView(RunsView):
    curves = (("train_clean", "acc", "C2", "train acc (clean labels)"),
              ("train_noisy", "acc", "C1", "train acc (corrupted labels)"),
              ("test", "acc", "C0", "test acc"))
    losses = (("train", "loss", "C2", "train loss"), ("test", "loss", "C0", "test loss"))
    short = {"noise": "α={}", "width": "M={}", "weight_decay": "wd={}", "lr": "lr={}"}
    analyses = ("ff", "swap", "neurons", "order", "dd")
    names = NAMES

    def __init__(self, level: str) -> None:
        self.title = f"generalization rate (final test acc ≥ {level})"

    def scale(self, runs):
        from rulelab.studies.coexistence.analyses.scale import scale_line

        return scale_line("this lab", runs) if "p" in runs.columns else None

    def figures(self, runs, metrics, analyses):
        from rulelab.studies.coexistence.panels import double_descent, learning_order

        made = [double_descent(runs, analyses.get("ff")),
                learning_order(runs, metrics, analyses.get("order"))]
        return [p for p in made if p is not None]

    def extra_figures(self, runs, metrics, analyses):
        from rulelab.studies.coexistence.panels import analysis_panels

        return "Analyses (docs/methods.md)", analysis_panels(runs, metrics, analyses)


MODULAR = CoexistenceView("99%")
DIGITS = CoexistenceView("90%")
