"""The one exception the store raises (DESIGN §3).

Every problem with a lab directory (missing lab, corrupt registry, corrupt metrics or checkpoint
file) surfaces as a :class:`StoreError` whose text is a single line naming the file, so the CLI
can print it as is.
"""

from __future__ import annotations


class StoreError(Exception):
    """A lab-directory problem, reported as one line that names the offending path."""

    def __init__(self, message: object) -> None:
        super().__init__(" ".join(str(message).split()))


def first_line(err: BaseException) -> str:
    """A short, single-line description of ``err`` for embedding in a :class:`StoreError`."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__
