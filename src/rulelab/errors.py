"""The one error a user sees: bad input, printed as ``error: <message>`` with exit code 2.

SPEC "Cross-cutting": bad input gets one clear line naming the flag (or the file) and what is
allowed, before any work starts. Every layer raises :class:`UserError` (or its subclass
:class:`rulelab.config.base.ConfigError`) for such input; the command line's entry point
prints it. It lives at the bottom so studies and the engine can raise it without importing
the command line.
"""


class UserError(Exception):
    """Bad input: printed as ``error: <message>`` and exit code 2."""
