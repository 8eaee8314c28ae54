"""``python -m rulelab.cli`` is the ``rulelab`` command."""

from rulelab.cli import main

main()
