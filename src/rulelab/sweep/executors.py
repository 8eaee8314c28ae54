"""Executors: run chunk specs and report back to the driver (DESIGN §4).

Both share one interface, ``run(specs, events)``, and run the same function,
:func:`rulelab.sweep.chunk.run_chunk`, on the same :class:`ChunkSpec`. ``events`` is the
driver's: ``started(spec)``, ``finished(spec, outcomes)``, ``lost(spec, reason)`` and
``chunk_progress(spec)`` (per-epoch callbacks: called in-process by a local chunk, replayed
from the chunk's progress file for a Ray one, :mod:`rulelab.sweep.live`). Only the driver
writes the registry; chunks write their runs' files (checkpoints, metrics, progress) into the
lab directory.

- :class:`LocalExecutor` (default): chunks one after another in this process. A killed sweep
  is resumed by running it again.
- :class:`RayExecutor` (``pip install -e '.[ray]'``): each chunk is a Ray task with its CPU
  and GPU resources, at most as many in flight as the cluster can hold. A task whose worker
  dies is retried by Ray (``max_retries``) and resumes from its runs' last checkpoints. The
  workers must see the lab directory at the same path (one machine: nothing to do; a cluster:
  a shared filesystem for the lab's files; the registry is opened by the driver alone).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Sequence

from rulelab.store import StoreError
from rulelab.sweep.chunk import ChunkSpec, RunOutcome, run_chunk, run_chunk_plain

POLL_SECONDS = 2.0  # how often the driver reads its Ray chunks' progress files


class LocalExecutor:
    name = "local"

    def run(self, specs: Sequence[ChunkSpec], events) -> None:
        from rulelab.sweep.live import Both, ProgressFile, progress_path, remove_progress

        for spec in specs:
            events.started(spec)
            file = ProgressFile(progress_path(spec.lab, spec.index))  # for `rulelab status`
            try:
                outcomes = run_chunk(spec, Both(events.chunk_progress(spec), file))
            finally:
                remove_progress(spec.lab, spec.index)
            events.finished(spec, outcomes)


class RayUnavailable(RuntimeError):
    """Ray is not installed or cannot start (the message says which and what to do)."""


def import_ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable("Ray is not installed; install it with "
                             "pip install 'ray[default]>=2.9'") from None
    return ray


class RayExecutor:
    """Chunks as Ray tasks. ``address`` None starts a local runtime (``num_cpus`` CPUs, default
    all); ``host:port``, ``"auto"`` or ``ray://…`` joins a running cluster (a ``host:port``
    nobody answers at fails in seconds). A runtime already initialised in this process (e.g.
    by a test) is used as is and left running."""

    name = "ray"

    def __init__(self, address: str | None = None, *, cpus_per_chunk: float = 1,
                 gpus_per_chunk: float = 0, max_retries: int = 3,
                 num_cpus: int | None = None) -> None:
        self.address, self.num_cpus = address, num_cpus
        self.cpus_per_chunk, self.gpus_per_chunk = cpus_per_chunk, gpus_per_chunk
        self.max_retries = max_retries
        self._started_here = False

    def capacity(self, ray) -> int:
        """Chunks the cluster can run at once (more would only queue inside Ray)."""
        resources = ray.cluster_resources()
        slots = resources.get("CPU", 1) // max(self.cpus_per_chunk, 1e-9)
        if self.gpus_per_chunk:
            slots = min(slots, resources.get("GPU", 0) // self.gpus_per_chunk)
        return max(int(slots), 1)

    def start(self) -> None:
        """Start or join the Ray runtime (before anything is written: a bad --address fails
        first). Idempotent; :meth:`run` calls it too."""
        ray = import_ray()
        if ray.is_initialized():
            return
        if self.address:
            probe_address(ray, self.address)
        try:
            ray.init(address=self.address, num_cpus=None if self.address else self.num_cpus,
                     include_dashboard=False, log_to_driver=False, configure_logging=False)
        except Exception as err:  # no cluster at --address, …
            raise RayUnavailable(f"cannot start or join Ray (address {self.address or 'local'}"
                                 f"): {str(err).splitlines()[0]}") from None
        self._started_here = True

    def close(self) -> None:
        """Shut down a runtime this executor started; one it found running is left alone."""
        if self._started_here:
            import_ray().shutdown()
            self._started_here = False

    def run(self, specs: Sequence[ChunkSpec], events) -> None:
        ray = import_ray()
        owner = not ray.is_initialized()  # started for this run: shut down after it
        self.start()
        try:
            self._run(ray, list(specs), events)
        finally:
            if owner:
                self.close()

    def _run(self, ray, queue: list[ChunkSpec], events) -> None:
        from rulelab.sweep.live import RemoteProgress

        task = ray.remote(num_cpus=self.cpus_per_chunk, num_gpus=self.gpus_per_chunk,
                          max_retries=self.max_retries, retry_exceptions=False)(run_chunk_plain)
        task = task.options(name="rulelab-chunk")
        if not queue:
            return
        capacity, running = self.capacity(ray), {}
        live = RemoteProgress(queue[0].lab, events.chunk_progress)
        while queue or running:
            while queue and len(running) < capacity:
                spec = queue.pop(0)
                events.started(spec)
                live.started(spec)
                running[task.remote(spec)] = spec
            ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_SECONDS)
            live.poll()
            for ref in ready:
                spec = running.pop(ref)
                live.ended(spec)
                try:
                    outcomes = [RunOutcome(**d) for d in ray.get(ref)]
                except ray.exceptions.RayError as err:
                    if isinstance(getattr(err, "cause", None), StoreError | OSError):
                        raise err.cause from None  # the lab is in trouble: stop, as locally
                    events.lost(spec, _reason(err))
                    continue
                events.finished(spec, outcomes)


def probe_address(ray, address: str, timeout: float = 5.0) -> None:
    """Fail in seconds where no Ray cluster listens at ``host:port`` (``ray.init`` would retry
    for minutes). Probes the address Ray will connect to: it replaces a loopback host by this
    machine's address. ``auto`` and ``ray://`` (Ray Client) addresses are left to Ray."""
    if address in ("auto", "local") or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not (sep and host and port.isdigit()):
        raise RayUnavailable(f"--address: {address!r} is not allowed; use host:port (the head's "
                             "GCS address), auto or ray://host:port")
    target = address
    with contextlib.suppress(Exception):  # a private helper: where it moved, probe as given
        target = ray._private.services.canonicalize_bootstrap_address(address) or address
    host, _, port = target.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as err:
        via = f" (Ray connects to {target})" if target != address else ""
        raise RayUnavailable(f"--address: no Ray cluster answers at {address}{via}: "
                             f"{err.strerror or type(err).__name__}; start one with "
                             "`ray start --head` or pass its address") from None


def _reason(err: BaseException) -> str:
    cause = getattr(err, "cause", None)
    if cause is not None:
        err = cause
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


EXECUTORS = ("local", "ray")
