"""``rulelab verify [--repair]``: check every run of a lab against what was recorded, and make
again what was damaged (issue 24): :mod:`.scan` finds, :mod:`.replay` re-derives summaries from
metrics, :mod:`.repair` fixes."""

from rulelab.verify.repair import repair
from rulelab.verify.scan import Problem, Scan, scan

__all__ = ["Problem", "Scan", "repair", "scan"]
