"""``python -m rulelab`` is the ``rulelab`` command."""

from rulelab.cli import main

main()
