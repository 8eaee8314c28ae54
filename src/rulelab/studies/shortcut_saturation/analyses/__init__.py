"""Study S's ``rulelab analyze`` commands, declared (SPEC S.4): the command line builds each
from its declaration, checks its options, opens the lab and calls the run function in
:mod:`.commands`."""

from rulelab.study import Analysis, Option

_RUN = "rulelab.studies.shortcut_saturation.commands"


def _pairs(n: int) -> str | None:
    return None if 1 <= n <= 1_000_000 else "use 1 to 1000000 pairs per member"


ANALYSES = (
    Analysis("gradients", "cos(g+, g−) and ‖g−‖/‖g+‖ per module, beside r/(1−r) "
             "(docs/methods.md § S.4.1–2).",
             f"{_RUN}:gradients"),
    Analysis("ablation", "Zero / mean ablation of each head and MLP at CLS or all positions "
             "(docs/methods.md § S.4.3).", f"{_RUN}:ablation"),
    Analysis("phases", "Phase-1 and phase-2 onset epochs and transient flags from stored curves "
             "(docs/methods.md § S.4.6).", f"{_RUN}:phases", epochs=False),
    Analysis("patching", "Cross-split patching from aligned twins into adv sequences "
             "(docs/methods.md § S.4.4).", f"{_RUN}:patching",
             options=(Option("n", 256, "adv/twin pairs per member", _pairs),)),
    Analysis("fingerprints", "QK magnitude ρ, attention on x₁ and OV parity ρ per head "
             "(docs/methods.md § S.4.5).", f"{_RUN}:fingerprints"),
)
