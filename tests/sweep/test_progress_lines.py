"""Progress where output is not a terminal (issue 10: "a long run under nohup, a scheduler or
CI prints nothing for many minutes"): a plain line every ``$RULELAB_PROGRESS_SECONDS``
seconds and one at the end, never a bar.

The unit tests drive :class:`LineSweepProgress` with a fake clock; the end-to-end tests run
``rulelab train`` as a process with stdout and stderr sent to a file, as ``nohup`` does.
"""

from __future__ import annotations

import io
import re
import subprocess
import time
from types import SimpleNamespace

from cli_inproc import run_main
from labs import toy_cli, toy_env
from rulelab.engine.runner import EpochProgress
from rulelab.store import LabDir
from rulelab.sweep.live import ProgressFile, RemoteProgress, progress_path
from rulelab.sweep.progress import LineSweepProgress, clock_text

TINY = ["--n-train", "64", "--n-eval", "32", "--eval-every", "2", "--width", "16"]  # toy study
LINE = re.compile(r"progress (\S+): ([\d.]+)% of the estimated time \((\d+)/(\d+) "
                  r"member-epochs\) · runs (\d+)/(\d+) · "
                  r"generalized (\d+) · failed (\d+) · (?:chunks? .* · )?(\d+:\d\d:\d\d) elapsed · "
                  r"(ETA \d+:\d\d:\d\d|ETA unknown|finished)$")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def fake_plan(members=(4, 2), epochs=100):
    """Two chunks of ``members`` runs, ``epochs`` each, none resumed."""
    chunks = [SimpleNamespace(index=i, start_epoch=0,
                              configs=[SimpleNamespace(epochs=epochs)] * m)
              for i, m in enumerate(members)]
    return SimpleNamespace(experiment="exp", n_todo=sum(members), chunks=chunks,
                           seed_epochs=lambda: epochs * sum(members))


def outcome(status, generalized=False):
    return SimpleNamespace(status=status, summary={"generalized": generalized})


def test_lines_come_every_interval_with_counts_and_eta():
    clock, out = FakeClock(), io.StringIO()
    p = LineSweepProgress(out, every=30.0, clock=clock, heartbeat=False)
    plan = fake_plan()
    p.begin(plan)
    spec0 = SimpleNamespace(index=0, label="1L·1H × 4")
    p.chunk_started(spec0)
    cb = p.epoch_callbacks(spec0)
    cb.start("1L·1H × 4", 100, 0, 4)
    clock.now += 10
    cb.update(25, 1, 0)  # 10 s in: under the interval, nothing yet
    assert out.getvalue() == ""
    clock.now += 20
    cb.update(50, 2, 0)  # 30 s: 200 of 600 member-epochs
    (line,) = out.getvalue().splitlines()
    m = LINE.fullmatch(line)
    assert m, line
    # generalized counts finished runs only: 2 members of the running chunk are not yet runs
    assert m.groups()[:8] == ("exp", "33.3", "200", "600", "0", "6", "0", "0")
    assert m.group(9) == "0:00:30" and m.group(10) == "ETA 0:01:00"  # 400 left at 200 per 30 s
    assert "chunk 1/2 1L·1H × 4 epoch 50/100" in line
    clock.now += 5
    cb.update(75, 2, 0)  # 5 s after the last line: none
    assert len(out.getvalue().splitlines()) == 1
    clock.now += 30
    p.chunk_finished(spec0, [outcome("done", True)] * 3 + [outcome("failed")])
    last = out.getvalue().splitlines()[-1]
    assert "(400/600 member-epochs) · runs 4/6 · generalized 3 · failed 1 · 0:01:05" in last
    p.end()
    final = out.getvalue().splitlines()[-1]
    assert final.endswith("finished") and "runs 4/6" in final and "chunk" not in final
    p.end()  # a second end prints nothing more
    assert out.getvalue().splitlines()[-1] == final and out.getvalue().count("finished") == 1


def test_the_eta_weighs_each_chunk_by_its_estimated_cost():
    """A cheap chunk first must not promise the sweep in its own time: chunk 1 costs 3× per
    member-epoch (a 2-layer ensemble after a 1-layer one), so after chunk 0's 400 of 600
    member-epochs in 30 s, 60% of the time is left (45 s), not a third (15 s)."""
    clock, out = FakeClock(), io.StringIO()
    plan = fake_plan(members=(4, 2))
    plan.chunks[0].flops, plan.chunks[1].flops = 4.0e12, 6.0e12  # ×1.5 the work, ×3 per epoch
    p = LineSweepProgress(out, every=1.0, clock=clock, heartbeat=False)
    p.begin(plan)
    spec0 = SimpleNamespace(index=0, label="1L·2H × 4")
    p.chunk_started(spec0)
    clock.now += 30
    p.chunk_finished(spec0, [outcome("done")] * 4)
    m = LINE.fullmatch(out.getvalue().splitlines()[-1])
    assert m and m.group(3) == "400" and m.group(2) == "40.0", out.getvalue()
    assert m.group(10) == "ETA 0:00:45"  # 6e12 left at 4e12 per 30 s


def test_the_heartbeat_prints_while_no_event_comes():
    """A chunk that reports nothing for a while (on Ray: until it ends) still gets lines."""
    out = io.StringIO()
    p = LineSweepProgress(out, every=0.05)
    p.begin(fake_plan())
    time.sleep(0.5)
    quiet = out.getvalue().splitlines()
    p.end()
    assert len(quiet) >= 2 and all(LINE.fullmatch(line) for line in quiet), quiet
    assert all("(0/600 member-epochs)" in line and line.endswith("ETA unknown") for line in quiet)
    assert out.getvalue().splitlines()[-1].endswith("finished")
    n = len(out.getvalue().splitlines())
    time.sleep(0.2)  # ended: the heartbeat stopped with it
    assert len(out.getvalue().splitlines()) == n and p.beat is None


def test_chunks_running_at_once_add_up():
    """Two chunks on two Ray workers report at once: the counts are the sum of both, the line
    names both with their epochs, and one finishing leaves the other's share in place."""
    clock, out = FakeClock(), io.StringIO()
    p = LineSweepProgress(out, every=1.0, clock=clock, heartbeat=False)
    p.begin(fake_plan(members=(4, 2)))
    spec0, spec1 = SimpleNamespace(index=0, label="A × 4"), SimpleNamespace(index=1, label="B × 2")
    p.chunk_started(spec0)
    p.chunk_started(spec1)
    cb0, cb1 = p.epoch_callbacks(spec0), p.epoch_callbacks(spec1)
    cb0.start("A × 4", 100, 0, 4)
    cb1.start("B × 2", 100, 0, 2)
    clock.now += 10
    cb0.update(50, 1, 0)  # 200 member-epochs
    clock.now += 1
    cb1.update(20, 0, 1)  # 40
    m = LINE.fullmatch(out.getvalue().splitlines()[-1])
    assert m and m.groups()[2:8] == ("240", "600", "0", "6", "0", "1"), out.getvalue()
    assert "chunks 1/2 A × 4 epoch 50/100, 2/2 B × 2 epoch 20/100 · " in m.group(0)
    clock.now += 10
    p.chunk_finished(spec0, [outcome("done", True)] + [outcome("done")] * 3)
    m = LINE.fullmatch(out.getvalue().splitlines()[-1])
    assert m and m.groups()[2:8] == ("440", "600", "4", "6", "1", "1"), out.getvalue()
    assert " · chunk 2/2 B × 2 epoch 20/100 · " in m.group(0)


class Recorder(EpochProgress):
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def start(self, *args) -> None:
        self.calls.append(("start", *args))

    def update(self, *args) -> None:
        self.calls.append(("update", *args))


def test_a_workers_progress_file_is_replayed_into_the_drivers_callbacks(tmp_path):
    """What a Ray worker's chunk reports reaches the driver's callbacks through the lab: the
    file is written at start, at most every ``every`` seconds, and at finish; the driver
    replays only what changed, ignores a stale file of an earlier sweep, and removes the file
    when the chunk ends."""
    spec = SimpleNamespace(index=3)
    path = progress_path(LabDir(tmp_path), 3)
    path.parent.mkdir()
    path.write_text('{"start": ["old", 9, 0, 1], "update": [9, 0, 0]}')  # an earlier sweep's
    recorder = Recorder()
    driver = RemoteProgress(LabDir(tmp_path), lambda s: recorder)
    driver.started(spec)
    assert not path.exists()
    driver.poll()  # nothing written yet
    assert recorder.calls == []
    clock = FakeClock()
    worker = ProgressFile(path, every=5.0, clock=clock)
    worker.start("2L × 8", 1500, 500, 8)
    worker.update(510, 0, 0)  # the first update is written at once
    clock.now += 1
    worker.update(520, 1, 0)  # 1 s later: not yet
    driver.poll()
    driver.poll()  # unchanged: no second replay
    assert recorder.calls == [("start", "2L × 8", 1500, 500, 8), ("update", 510, 0, 0)]
    clock.now += 5
    worker.update(530, 1, 0)
    worker.finish()
    driver.poll()
    assert recorder.calls[2:] == [("update", 530, 1, 0)]
    worker.start("2L × 4", 1500, 530, 4)  # a second ensemble of the chunk (or a retry)
    driver.poll()
    assert recorder.calls[3:] == [("start", "2L × 4", 1500, 530, 4)]
    driver.ended(spec)
    assert not path.parent.exists() and driver.running == {}  # the last file takes the folder


def test_clock_text():
    assert [clock_text(s) for s in (0, 59.6, 3725.2, 90061)] == \
        ["0:00:00", "0:01:00", "1:02:05", "25:01:01"]


def _train_to_file(tmp_path, seconds: str | None, epochs: int):
    env = {k: v for k, v in toy_env().items() if k != "RULELAB_PROGRESS_SECONDS"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", COLUMNS="80")
    if seconds is not None:
        env["RULELAB_PROGRESS_SECONDS"] = seconds
    log = tmp_path / "nohup.out"
    with open(log, "w") as f:
        proc = subprocess.run(toy_cli("train", "toy", *TINY, "--epochs", str(epochs), "--seeds",
                                      "2", "--lab", tmp_path / "lab"),
                              stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=env, cwd=tmp_path, timeout=300)
    text = log.read_text()
    assert proc.returncode == 0, text
    return text


def test_train_into_a_log_file_prints_progress_lines(tmp_path):
    text = _train_to_file(tmp_path, "0.05", epochs=200)
    lines = text.splitlines()
    assert lines[0].startswith("toy: 2 runs → lab ") and lines[0].endswith("cpu)")  # one line
    progress = [line for line in lines if line.startswith("progress ")]
    assert len(progress) >= 3, text  # a 2 × 200-epoch run takes well over 0.15 s
    assert all(LINE.fullmatch(line) for line in progress), text
    done = [int(LINE.fullmatch(line).group(3)) for line in progress]
    assert done == sorted(done) and done[-1] == 400
    assert progress[-1].endswith("finished") and "runs 2/2" in progress[-1]
    # no bar, no escape codes: the only rules are the closing rate table's borders
    assert all(line[:1] in "┏┡└" for line in lines if "━" in line) and "\x1b[" not in text
    assert lines[1].startswith("estimate: ") and " for 2 runs (400 member-epochs) on " in lines[1]
    assert "generalized [95% CI] (k/n)" in text and "  rulelab runs --lab lab" in text  # the end


def test_the_default_interval_is_quiet_for_a_short_run(tmp_path):
    text = _train_to_file(tmp_path, None, epochs=20)
    progress = [line for line in text.splitlines() if line.startswith("progress ")]
    assert len(progress) == 1 and progress[0].endswith("finished"), text


def test_a_bad_interval_is_one_line_and_nothing_is_written(tmp_path, capsys, monkeypatch, toy):
    monkeypatch.chdir(tmp_path)
    for bad in ("abc", "0", "-3", "nan", "inf"):
        monkeypatch.setenv("RULELAB_PROGRESS_SECONDS", bad)
        res = run_main(["train", "toy", *TINY, "--epochs", "4", "--lab", tmp_path / "lab"],
                       capsys, monkeypatch)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert res.stderr.startswith("error: RULELAB_PROGRESS_SECONDS: ")
        assert not (tmp_path / "lab").exists()
