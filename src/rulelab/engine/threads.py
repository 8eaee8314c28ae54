"""Training on the CPU computes on one thread, so its numbers do not depend on the machine's
core count (issue 25; engine versions 4 and 5, :mod:`rulelab.store.version`).

PyTorch's CPU kernels split a long reduction across threads — LayerNorm's weight and bias
gradients, the bias and weight gradients of a matmul over many rows — and each thread count
sums in another order: the same run trained with 1 and with 2 threads differed in every
gradient after one backward (measured: up to 6e-8 in ``W_pos``'s gradient of study S's 2L
model; forwards were equal). Nothing recorded the thread count, which was the machine's core
count by default, so the same config, seed and engine version gave other numbers on another
machine, or under Ray with ``--cpus-per-chunk 1``. A trainer therefore computes every step and
evaluation with one thread, and the cores train separate chunks side by side instead
(:class:`rulelab.sweep.executors.LocalExecutor`): at the small sizes of the studies that is
also faster than splitting each tiny op across threads (bench/parallel_chunks.py).

The thread count is set around the work and restored after it, so analyses and reports run in
the same process keep every core. CUDA numerics do not depend on it, and nothing changes there.
"""

from __future__ import annotations

import contextlib
import threading

import torch

TRAINING_THREADS = 1  # torch threads of a CPU training step: part of the engine's numerics
_depth = threading.local()  # nesting per Python thread (chunks may train side by side)
_lock = threading.Lock()
_active = 0  # training regions open in this process, across Python threads
_saved: int | None = None  # the thread count to restore when the last one closes


@contextlib.contextmanager
def training_threads(device: torch.device | str):
    """Compute on :data:`TRAINING_THREADS` torch threads inside (CPU only); the count in use
    before the first region opened is restored when the last one closes."""
    global _active, _saved
    if torch.device(device).type != "cpu" or getattr(_depth, "n", 0):
        yield  # CUDA, or nested inside a region this thread already holds
        return
    with _lock:
        if _active == 0:
            _saved = torch.get_num_threads()
        _active += 1
        torch.set_num_threads(TRAINING_THREADS)
    _depth.n = 1
    try:
        yield
    finally:
        _depth.n = 0
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                torch.set_num_threads(_saved)
                _saved = None
