"""Executors: run chunk specs and report back to the driver (DESIGN §4).

Both share one interface, ``run(specs, events)``, and run the same function,
:func:`rulelab.sweep.chunk.run_chunk`, on the same :class:`ChunkSpec`. ``events`` is the
driver's: ``started(spec)``, ``finished(spec, outcomes)``, ``lost(spec, reason)`` and
``chunk_progress(spec)`` (per-epoch callbacks: called in-process by a local chunk, replayed
from the chunk's progress file for a Ray one, :mod:`rulelab.sweep.live`). Only the driver
writes the registry; chunks write their runs' files (checkpoints, metrics, progress) into the
lab directory.

- :class:`LocalExecutor` (default): chunks on this machine, ``workers`` of them side by side
  (one per CPU core by default: a CPU training step computes on one thread,
  :mod:`rulelab.engine.threads`) — in threads of this process for a short plan, as worker
  processes for a long one. A killed sweep is resumed by running it again.
- :class:`RayExecutor` (``pip install -e '.[ray]'``): each chunk is a Ray task with its CPU
  and GPU resources, at most as many in flight as the cluster can hold. A task whose worker
  dies is retried by Ray (``max_retries``) and resumes from its runs' last checkpoints. The
  workers must see the lab directory at the same path (one machine: nothing to do; a cluster:
  a shared filesystem for the lab's files; the registry is opened by the driver alone).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Sequence

from rulelab.store import StoreError
from rulelab.sweep.chunk import ChunkSpec, RunOutcome, run_chunk, run_chunk_plain

POLL_SECONDS = 2.0  # how often the driver reads its Ray chunks' progress files
SPAWN_WORTH_SECONDS = 60.0  # a plan estimated longer trains side by side as processes
NATIVE_STEP_EXAMPLES = 1024  # … unless its steps are native and at least this long


class LocalExecutor:
    """Chunks on this machine: one after another, or ``workers`` at once.

    Side by side, chunks train in threads of this process or in worker processes
    (``processes``; None: :meth:`prepare` decides by the plan's estimate). A CPU training step
    computes on one torch thread, so either keeps ``workers`` cores busy, and a member's numbers
    are the same either way. Threads cost nothing to start and suit short plans, but share the
    GIL: where a step runs much Python between its kernels (small minibatches; the compiled
    engine's wrappers) two threads wait on each other (bench/side_by_side.py: the compiled
    step 1.5× slower in threads). Processes pay a start-up (≈ 3 s: each imports torch) and
    report progress through the lab's progress files, as Ray workers do. Only this thread
    calls the driver's ``events``. On Ctrl-C or an error every chunk stops — a thread at its
    next epoch, a process at once (killed: its checkpoints are the commit points) — and the
    error is raised here once they have.
    """

    name = "local"

    def __init__(self, workers: int = 1, processes: bool | None = None) -> None:
        self.workers, self.processes = max(1, int(workers)), processes
        self.as_processes = bool(processes)  # this plan's choice (prepare)

    def prepare(self, plan, settings) -> None:
        """Choose threads or processes for ``plan`` where the caller did not: processes when
        its estimate exceeds :data:`SPAWN_WORTH_SECONDS` (the estimate counts FLOPs and
        passes; a start-up of seconds is noise there), unless every chunk's step runs
        natively with the GIL released (:func:`native_steps`): then threads, which train as
        fast and start at once."""
        if self.processes is not None:
            self.as_processes = self.processes
            return
        seconds = plan.seconds(speed_for(settings, plan.task))
        self.as_processes = seconds > SPAWN_WORTH_SECONDS and not native_steps(plan, settings)

    def run(self, specs: Sequence[ChunkSpec], events) -> None:
        if self.workers == 1 or len(specs) <= 1:
            for spec in specs:
                events.started(spec)
                events.finished(spec, _chunk_here(spec, events.chunk_progress(spec)))
            return
        if self.as_processes:
            from rulelab.sweep.worker_processes import as_processes

            as_processes(list(specs), events, self.workers)
        else:
            _side_by_side(list(specs), events, self.workers)


def speed_for(settings, task: str | None = None):
    """The planner's assumed speed for ``settings``' device and precision (on a GPU, ``task``'s
    measured rates where its study declares them)."""
    from rulelab.sweep.estimate import speed

    return speed(settings.device, settings.precision, task)


def native_steps(plan, settings) -> bool:
    """Whether every chunk of ``plan`` trains on the CPU with an engine whose step is one
    native call per member and pass (``STEP_ENGINES``: engine 11, which releases the GIL for
    the whole call) over steps of at least :data:`NATIVE_STEP_EXAMPLES` examples (its cost
    model's ``step_examples``), so the Python between the calls (the optimizer) is a small part
    of each step. Two such chunks train as fast in threads as in processes
    (``bench/side_by_side.py`` at the ladder's 2k rung, full batch: 0.075 against 0.077 s an
    epoch), and threads save each worker's start-up (≈ 3 s: the 4k rung's command, 8 seeds ×
    150 epochs, took 41.1–43.2 s in threads against 44.7–45.3 s as processes on an AMD EPYC).
    Small minibatches (the quick preset's 64) leave many short steps whose Python contends for
    the GIL: they keep the rule."""
    from rulelab.engine.compiled import engine_in_use
    from rulelab.store.version import STEP_ENGINES
    from rulelab.sweep.estimate import run_cost

    if not plan.chunks or not str(settings.device).startswith("cpu"):
        return False
    return all(engine_in_use(settings, c.configs[0]) in STEP_ENGINES
               and run_cost(c.configs[0]).step_examples >= NATIVE_STEP_EXAMPLES
               for c in plan.chunks)


def _chunk_here(spec: ChunkSpec, callbacks) -> list[RunOutcome]:
    """One chunk in this process, its progress also in the lab's file (`rulelab status`)."""
    from rulelab.sweep.live import Both, ProgressFile, progress_path, remove_progress

    file = ProgressFile(progress_path(spec.lab, spec.index))
    try:
        return run_chunk(spec, Both(callbacks, file))
    finally:
        remove_progress(spec.lab, spec.index)


class ChunkStopped(BaseException):
    """Raised inside a worker's epoch callback (its next epoch) when the sweep stops (an error
    elsewhere, Ctrl-C): a BaseException, so no chunk mistakes it for a member's failure."""


class _Guarded:
    """A worker's epoch callbacks, one at a time (they draw one display) and stoppable."""

    def __init__(self, inner, lock: threading.Lock, stop: threading.Event) -> None:
        self.inner, self.lock, self.stop = inner, lock, stop

    def _call(self, name: str, *args) -> None:
        if self.stop.is_set() and name != "finish":
            raise ChunkStopped
        with self.lock:
            getattr(self.inner, name)(*args)

    def start(self, *args) -> None:
        self._call("start", *args)

    def update(self, *args) -> None:
        self._call("update", *args)

    def beat(self) -> None:
        """Every epoch: a stopped sweep stops here (no lock: the display is not touched)."""
        if self.stop.is_set():
            raise ChunkStopped

    def finish(self) -> None:
        self._call("finish")


def _side_by_side(queue: list[ChunkSpec], events, workers: int) -> None:
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    lock, stop = threading.Lock(), threading.Event()
    running: dict = {}
    with ThreadPoolExecutor(workers, thread_name_prefix="rulelab-chunk") as pool:
        try:
            while queue or running:
                while queue and len(running) < workers:
                    spec = queue.pop(0)
                    with lock:
                        events.started(spec)
                        callbacks = _Guarded(events.chunk_progress(spec), lock, stop)
                    running[pool.submit(_chunk_here, spec, callbacks)] = spec
                done, _ = wait(running, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                for future in done:
                    spec = running.pop(future)
                    outcomes = future.result()  # a lab error stops the sweep, as in sequence
                    with lock:
                        events.finished(spec, outcomes)
        except BaseException:
            stop.set()  # the others stop at their next epoch; their checkpoints stay
            wait(running)
            raise


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
