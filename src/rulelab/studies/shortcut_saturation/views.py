"""How study S's runs read in ``rulelab runs``, ``status`` and reports (SPEC S.3–S.4).

``generalized`` = val and adv accuracy both 100% at one evaluation; the paper's adv-only
reading gets its own column wherever the two differ; the mean max adv accuracy carries its
per-seed range; the scale the runs were trained at is printed above the table, and the
paper's headline beside a cell only where the cell is at the paper's setting (:mod:`.paper`).
Labs summarised before that criterion (issue 8) are recomputed from their metrics.
"""

from __future__ import annotations

from rulelab.analysis.stats import format_range, format_rate
from rulelab.report.views import RunsView
from rulelab.studies.shortcut_saturation import rates
from rulelab.studies.shortcut_saturation.labels import SHORT, config_label
from rulelab.studies.shortcut_saturation.paper import (
    PAPER_S,
    cell_paper,
    describe_scale,
    paper_note,
    run_matches,
)

VAL, ADV = "C0", "C3"  # one colour per split, the same in every panel


class ShortcutView(RunsView):
    title = "generalization rate (val and adv acc both 100% at one evaluation)"
    rate_head = "rate [95% CI] (k/n)"
    curves = (("val", "acc", VAL, "val acc"), ("adv", "acc", ADV, "adv acc"))
    losses = (("train_consistent", "loss", "C2", "train consistent loss"),
              ("train_anti", "loss", "C1", "train anti loss"))
    mark = ("first_epoch_generalized", "first epoch with val and adv at 100%")
    analyses = ("gradients", "ablation", "patching", "fingerprints", "phases")
    short = SHORT
    readme = ("Quick reproduction (study S)", "quick")

    def upgrade(self, runs, metrics=None):
        from rulelab.studies.shortcut_saturation.summary_frames import upgrade_runs

        return upgrade_runs(runs, metrics)

    def scale(self, runs):
        return describe_scale(runs)

    def cells(self, runs):
        return rates.cell_columns(runs)

    def table(self, runs, by):
        return rates.readings_table(runs, by)

    def columns(self, runs, by, table):
        out = []
        if rates.readings_differ(table):
            out.append(("adv-only, the paper's text [95% CI] (k/n)",
                        [format_rate(int(k), int(n)) for k, n in zip(table["k_adv"],
                                                                     table["n"], strict=True)]))
        if "mean_max_adv" in table.columns:
            out.append(("mean max adv [seed min, max]",
                        [format_range(m, lo, hi) for m, lo, hi in zip(
                            table["mean_max_adv"], table["max_adv_min"], table["max_adv_max"],
                            strict=True)]))
        return out

    def trailing(self, runs, by, table):
        paper = cell_paper(runs, by, PAPER_S)
        return [("paper", paper)] if paper else []

    def notes(self, runs, table):
        lines = [rates.FLIPPED] if rates.readings_differ(table) else []
        if note := paper_note(runs):
            lines.append(note)
        if unknown := runs.attrs.get("generalized_unknown", 0):
            lines.append(f"{unknown} run(s) summarised by an older rulelab (adv-only) have no "
                         "readable metrics: their val-and-adv reading is unknown, counted as not")
        return lines

    def figures(self, runs, metrics, analyses):
        from rulelab.studies.shortcut_saturation.rate_figure import rate_vs_ratio

        if "ratio" not in runs.columns or "generalized" not in runs.columns:
            return []
        paper = PAPER_S if run_matches(runs).any() else None  # only beside runs at its setting
        return [(rate_vs_ratio(runs, paper=paper),
                 "Generalization rate vs spurious ratio (95% Wilson CI)")]

    def extra_figures(self, runs, metrics, analyses):
        from rulelab.studies.shortcut_saturation.figures import analysis_figures

        return "Mechanistic analyses", analysis_figures(analyses, runs)

    def label(self, row, cols):
        return config_label(row, cols)

    def title_columns(self, runs):
        return ["ratio", *(c for c in super().title_columns(runs) if c != "ratio")]

    def chance(self, runs):
        if "label_mod" not in runs.columns or runs.empty:
            return None
        k = runs["label_mod"].iloc[0]
        return 1 / k, f"chance 1/k, k = {k:g} labels"

    def generalized_of(self, summary):
        from rulelab.studies.shortcut_saturation.summary import generalized_of

        return generalized_of(summary)


VIEW = ShortcutView()
