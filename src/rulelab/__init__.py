"""rulelab: controlled experiments on when a network learns the rule, a shortcut, or noise.

Layout (data flows one way): ``tasks`` → ``models`` → ``optim`` / ``train`` → ``store`` →
``analysis`` → ``report``, with ``cli`` on top. ``rulelab.load(lab)`` returns DataFrames.
"""

from rulelab.store.load import LabFrames, load

__version__ = "0.1.0"
__all__ = ["LabFrames", "load", "__version__"]
