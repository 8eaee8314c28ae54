"""Chunks side by side as worker processes (:class:`rulelab.sweep.executors.LocalExecutor`
for a long plan, issue 25): each chunk runs :func:`~rulelab.sweep.chunk.run_chunk_plain` in a
process of a pool started with ``spawn`` (a fresh interpreter: no OpenMP state forked from
this one), one thread each.

A worker dies with the driver (Linux: ``PR_SET_PDEATHSIG``), so a killed command leaves no
process training its runs behind it, and ignores Ctrl-C, which the driver handles by killing
the workers: a chunk's checkpoints are its commit points, so a killed worker resumes as a
killed command does. Progress comes through the chunks' progress files
(:class:`~rulelab.sweep.live.RemoteProgress`), as from Ray workers. Studies registered at run
time (a test's toy study) are registered in each worker too. A worker does not import the
driver's ``__main__``: ``spawn`` would, and a researcher's script calling ``rulelab.train`` at
its top level, unguarded, would then train again in every worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import types

from rulelab.errors import UserError
from rulelab.sweep.chunk import ChunkSpec, RunOutcome, run_chunk_plain

POLL_SECONDS = 1.0  # how often the driver reads its workers' progress files
PR_SET_PDEATHSIG = 1  # prctl(2)


def _start_worker(studies: tuple[str, ...]) -> None:
    """A worker's first act: die with the driver, leave Ctrl-C to it, know its studies."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:  # the driver died before the line above: nothing to do
            os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import rulelab.study_registry as registry

    if studies != registry.STUDIES:
        registry.STUDIES = studies
        registry.studies.cache_clear()
        registry.tasks.cache_clear()


@contextlib.contextmanager
def _without_main():
    """While workers start: a ``__main__`` with no file, so ``spawn`` imports none in them."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def as_processes(queue: list[ChunkSpec], events, workers: int) -> None:
    """Run ``queue`` on ``workers`` processes; ``events`` as :class:`LocalExecutor`'s."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    import rulelab.study_registry as registry
    from rulelab.sweep.live import RemoteProgress

    live = RemoteProgress(queue[0].lab, events.chunk_progress)
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker, initargs=(registry.STUDIES,))
    running: dict = {}
    try:
        while queue or running:
            while queue and len(running) < workers:
                spec = queue.pop(0)
                events.started(spec)
                live.started(spec)
                with _without_main():  # submit starts the workers it needs
                    running[pool.submit(run_chunk_plain, spec)] = spec
            done, _ = wait(running, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
            live.poll()
            for future in done:
                spec = running.pop(future)
                live.ended(spec)
                try:
                    outcomes = [RunOutcome(**d) for d in future.result()]
                except BrokenProcessPool as err:  # a worker died (out of memory, killed)
                    raise UserError(f"a worker process of chunk {spec.index + 1} died ({err}); "
                                    "run the same command again to resume") from None
                events.finished(spec, outcomes)
    except BaseException:
        _kill(pool)  # a lab error, Ctrl-C: stop every chunk now
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _kill(pool) -> None:
    for process in list(getattr(pool, "_processes", {}).values()):  # no public handle
        with contextlib.suppress(Exception):
            process.kill()
