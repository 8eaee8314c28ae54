"""Python's cyclic garbage collector kept off the objects that exist when training starts
(issue 25).

A training step creates and drops thousands of Python objects (tensors, autograd nodes), so
the collector runs every few steps, and every so often a full collection walks every object the
process holds — torch's and numpy's modules, the CLI, the lab's tables: hundreds of thousands,
none of them garbage. :func:`setup_frozen` moves those to the collector's permanent generation
for the length of a training (``gc.freeze``) and hands them back after (``gc.unfreeze``), so
nothing that becomes garbage later is kept. It changes no number (measured: the ladder's 2k
rung as a whole command, 8 seeds × 150 epochs, 2.3% faster; ``bench/native_pieces.py`` times
the step with it).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def setup_frozen() -> Iterator[None]:
    """Within: the objects that existed on entry are not walked by the cyclic collector."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
