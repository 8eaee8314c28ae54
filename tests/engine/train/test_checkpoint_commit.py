"""A checkpoint is the commit point of a chunk's writes (engine/runner.py ``checkpoint``): what
a kill interrupts before it is recomputed on resume, so tracked analyses end as in an
uninterrupted run. Before, checkpoints were written first: a kill between them and the tracked
tables lost the points tracked since the previous checkpoint (seen as 312 of 320 rows in the
SIGKILL test, tests/e2e/test_resume.py)."""

import pandas as pd
import pytest

from rulelab.settings import Settings
from rulelab.store import Lab, LabDir
from rulelab.sweep.driver import run_configs
from toy_study import ToyRunConfig

CONFIGS = dict(n_train=64, n_eval=32, width=8, epochs=60, eval_every=5)
SETTINGS = Settings(checkpoint_every=20, track=("weights",), track_every="5", quiet=True)


class Killed(BaseException):
    """A kill: nothing in the driver catches it, as nothing survives a SIGKILL."""


def _tables(lab: Lab) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted((lab.root / "analyses" / "weights").glob("*"))]
    return pd.concat(frames).sort_values(["run_id", "epoch", "module"]).reset_index(drop=True)


@pytest.mark.parametrize("kill_at_write", [5, 6, 8])  # inside the 2nd flush, and at its end
def test_a_kill_inside_a_checkpoints_writes_resumes_to_the_same_tracked_rows(
        tmp_path, toy, monkeypatch, kill_at_write):
    configs = [ToyRunConfig(**CONFIGS, noise=n, seed=s) for n in (0.0, 0.2) for s in (0, 1)]
    whole = Lab(tmp_path / "whole", create=True)
    run_configs(configs, whole, experiment="t", settings=SETTINGS)

    killed = Lab(tmp_path / "killed", create=True)
    write_table, calls = LabDir.write_table, [0]

    def dies(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == kill_at_write:  # 4 runs: writes 1–4 are the first flush, 5–8 the 2nd
            raise Killed
        return write_table(self, *args, **kwargs)

    monkeypatch.setattr(LabDir, "write_table", dies)
    with pytest.raises(Killed):
        run_configs(configs, killed, experiment="t", settings=SETTINGS)
    monkeypatch.setattr(LabDir, "write_table", write_table)
    assert set(killed.statuses([c.run_id for c in configs]).values()) != {"done"}

    run_configs(configs, Lab(tmp_path / "killed"), experiment="t", settings=SETTINGS)
    a, b = _tables(whole), _tables(Lab(tmp_path / "killed"))
    assert len(a) == 4 * len(range(0, 61, 5)) * 4  # runs × tracked epochs × modules
    pd.testing.assert_frame_equal(a, b, check_exact=True)
