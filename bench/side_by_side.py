"""Two chunks trained at once: in threads of one process (the local executor) or as two
processes (what the Ray executor with ``--cpus-per-chunk 1`` runs), any engine (eager: 8)
(issue 25). Steady state: each chunk (4 seeds of the ladder's 2k rung: 2L, 24/48, N 2,048)
warms up 2 epochs, then both train 20 epochs at once; prints seconds per epoch of all 8 seeds,
and an evaluation's seconds.

    python bench/side_by_side.py --mode threads --engine eager
    python bench/side_by_side.py --mode processes --engine compiled
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time

EPOCHS = 20


def trainer(seeds, engine: str):
    from rulelab.settings import Settings
    from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
    from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

    cfgs = [MPSPRunConfig(layers=2, d_model=24, d_mlp=48, n_train=2048, seed=s, epochs=10**6,
                          eval_every=25) for s in seeds]
    return MPSPTrainer(cfgs, Settings(engine=engine))


def both(trainers, work) -> float:
    threads = [threading.Thread(target=work, args=(t,)) for t in trainers]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def epochs(tr, n: int) -> None:
    for _ in range(n):
        tr.train_epoch()


def chunk_process(seeds: str, engine: str, go: str) -> None:
    """One chunk in this process: warm up, wait for ``go`` to exist, time, print."""
    import os

    tr = trainer([int(s) for s in seeds.split(",")], engine)
    epochs(tr, 2)
    open(go + ".ready" + seeds[0], "w").close()
    while not os.path.exists(go):
        time.sleep(0.01)
    start = time.perf_counter()
    epochs(tr, EPOCHS)
    print((time.perf_counter() - start) / EPOCHS, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("threads", "processes"), default="threads")
    ap.add_argument("--engine", default="eager", help="eager, compiled, or a version (4)")
    ap.add_argument("--chunk", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.chunk:
        return chunk_process(*args.chunk)
    if args.mode == "threads":
        trainers = [trainer(range(4), args.engine), trainer(range(4, 8), args.engine)]
        both(trainers, lambda t: epochs(t, 2))
        per_epoch = both(trainers, lambda t: epochs(t, EPOCHS)) / EPOCHS
        evaluation = both(trainers, lambda t: t.evaluate())
        print(f"threads, {args.engine}: {per_epoch:.3f} s an epoch of 8 seeds "
              f"({8 / per_epoch:.1f} seed-epochs/s); an evaluation of all 8: {evaluation:.3f} s")
        return
    import os
    import tempfile

    go = os.path.join(tempfile.mkdtemp(), "go")
    procs = [subprocess.Popen([sys.executable, __file__, "--chunk", seeds, args.engine, go],
                              stdout=subprocess.PIPE, text=True)
             for seeds in ("0,1,2,3", "4,5,6,7")]
    while not all(os.path.exists(go + ".ready" + s) for s in "04"):
        time.sleep(0.05)
    open(go, "w").close()  # both start their timed epochs together
    per_epoch = max(float(p.communicate()[0].split()[-1]) for p in procs)
    print(f"processes, {args.engine}: {per_epoch:.3f} s an epoch of 8 seeds "
          f"({8 / per_epoch:.1f} seed-epochs/s)")


if __name__ == "__main__":
    main()
