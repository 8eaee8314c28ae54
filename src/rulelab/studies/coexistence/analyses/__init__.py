"""Study M's ``rulelab analyze`` commands, declared (SPEC M.4): the command line builds each
from its declaration, checks its options, opens the lab and calls the run function in
:mod:`.commands`."""

from rulelab.study import Analysis, Option

_RUN = "rulelab.studies.coexistence.commands"


def _share(k: float) -> str | None:
    return None if 0.0 <= k <= 1.0 else "it must lie in [0, 1]"


def _window(w: float) -> str | None:
    ok = w > 0 and w == w and w != float("inf")
    return None if ok else "give a number of steps > 0"


ANALYSES = (
    Analysis("ff", "Frequency filtering: original vs G (dominant frequency) vs R (residual) "
             "(docs/methods.md § M.4.3).", f"{_RUN}:ff"),
    Analysis("swap", "Activation swap: trained weights scored with every activation "
             "(docs/methods.md § M.4.4).", f"{_RUN}:swap"),
    Analysis("neurons", "IPR and strength scores, top-k / bottom partition, pruning curves "
             "(docs/methods.md § M.4.5).", f"{_RUN}:neurons",
             options=(Option("k_frac", 0.5, "share of neurons in the top (rule) subnetwork; "
                             "the rest form the bottom one, in [0, 1]", _share),)),
    Analysis("order", "Learning order (docs/methods.md § M.4.2): the early lead of noisy- "
             "over clean-train accuracy over the first T epochs (mean lead, first-evaluation lead, "
             "loss-decrease rates; every run with α > 0 counts), beside the old "
             "first-step-at-50% reading with its own n.", f"{_RUN}:order", epochs=False,
             options=(Option("window", 100.0, "T: read the early lead over the first T epochs "
                             "(full batch: steps; > 0); the paper's modular window is ≈ 200 "
                             "steps, its MNIST reading epochs 1–2", _window),)),
    Analysis("dd", "Double descent: final test accuracy vs width with seed spread, and its dip "
             "(docs/methods.md § M.4.1).", f"{_RUN}:dd", epochs=False),
)
