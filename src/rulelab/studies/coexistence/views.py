"""How study M's runs read in ``rulelab runs``, ``status`` and the generic report: a run
generalizes when its final test accuracy reaches the task's level (modular 99%, SPEC M.3;
digits 90%, M.4.7); curves show clean-train, noisy-train (against the corrupted labels:
memorization) and test accuracy."""

from __future__ import annotations

from rulelab.report.views import RunsView


class CoexistenceView(RunsView):
    curves = (("train_clean", "acc", "C2", "clean-train acc"),
              ("train_noisy", "acc", "C1", "noisy-train acc (corrupted labels)"),
              ("test", "acc", "C0", "test acc"))
    losses = (("train", "loss", "C2", "train loss"), ("test", "loss", "C0", "test loss"))
    short = {"noise": "α={}", "width": "M={}", "weight_decay": "wd={}", "lr": "lr={}"}
    analyses = ("ff", "swap", "neurons", "order", "dd")

    def __init__(self, level: str) -> None:
        self.title = f"generalization rate (final test acc ≥ {level})"


MODULAR = CoexistenceView("99%")
DIGITS = CoexistenceView("90%")
