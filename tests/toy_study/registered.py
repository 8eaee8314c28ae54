"""Importing this module puts the toy study in the registry for the rest of the process: how a
child process gets it (``labs.toy_cli``, ``ForkedCLI(preload=TOY_MODULES)``)."""

from toy_study import register

register()
