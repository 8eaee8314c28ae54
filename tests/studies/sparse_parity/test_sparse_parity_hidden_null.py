"""Hidden progress against its null band (issue 21): off-support subsets and frozen networks are
called at ≤ 5%, a run that learns has its support called, and the summary's online call is the
one re-read from the stored curves."""

import math

import numpy as np
import pandas as pd
import torch

from rulelab.config.base import make_config
from rulelab.studies.sparse_parity.config import SparseParityRunConfig
from rulelab.studies.sparse_parity.hidden_calibration import held_out_readings, hidden_check
from rulelab.studies.sparse_parity.hidden_null import (
    MAX_NULL_SUBSETS,
    conformal_band,
    null_subsets,
    subset_shares,
)
from rulelab.studies.sparse_parity.metrics import support_mass
from rulelab.studies.sparse_parity.steps_tables import progress_steps
from rulelab.studies.sparse_parity.trainer import SparseParityTrainer


def cfg(**kw):
    base = {"n_bits": 16, "k": 3, "width": 64, "batch_size": 32, "epochs": 300,
            "eval_every": 25, "n_eval": 1024}
    return make_config(SparseParityRunConfig, **{**base, **kw})


def test_null_subsets_are_disjoint_from_the_support_distinct_and_fixed():
    few = null_subsets(9, 3, [0, 4, 8])
    assert len(few) == math.comb(6, 3)  # all of them when there are few
    many = null_subsets(40, 3, [1, 2, 3], seed=7)
    assert many.shape == (MAX_NULL_SUBSETS, 3)
    assert len({tuple(t) for t in many.tolist()}) == MAX_NULL_SUBSETS
    assert not set(many.flatten().tolist()) & {1, 2, 3}
    assert np.array_equal(many, null_subsets(40, 3, [1, 2, 3], seed=7))


def test_subset_share_of_the_support_is_its_support_mass():
    W1 = torch.randn(2, 8, 12)  # [E, M, n]
    support = torch.tensor([[0, 5, 9], [1, 2, 3]])
    mass = W1.double().square().sum(1)
    shares = subset_shares(mass, support.unsqueeze(1))[:, 0]
    assert torch.allclose(shares, support_mass(W1, support), rtol=1e-12, atol=0)


def test_conformal_band_is_exceeded_by_at_most_five_percent_of_fresh_values():
    rng = np.random.default_rng(0)
    values = torch.from_numpy(rng.standard_normal((4000, 100)))  # 4,000 trials of 99 + 1
    band = conformal_band(values[:, :99])
    rate = float((values[:, 99] > band).double().mean())
    assert 0.035 < rate <= 0.06  # exactly 5/100 in expectation
    assert torch.isnan(conformal_band(values[:1, :18])).all()  # < 19: no 5% band


def synthetic_record(drift: float, members: int = 20, n: int = 24, T: int = 40) -> dict:
    """Coordinate masses as independent log-normal random walks (no signal: every subset is
    null); ``drift`` per evaluation added on the support's coordinates (a planted effect)."""
    rng = np.random.default_rng(1)
    log_mass = np.cumsum(rng.normal(0.0, 0.06, (T, members, n)), 0)
    configs = [cfg(n_bits=n, data_seed=e) for e in range(members)]
    support = torch.tensor([[e % n, (e + 5) % n, (e + 11) % n] for e in range(members)])
    for e in range(members):
        log_mass[:, e, support[e].numpy()] += drift * np.arange(T)[:, None]
    return {"steps": list(range(0, 25 * T, 25)), "mass": torch.from_numpy(np.exp(log_mass)),
            "acc": torch.full((T, members), 0.5, dtype=torch.float64), "support": support,
            "configs": configs}


def test_off_support_subsets_are_called_at_most_five_percent_and_a_planted_rise_is():
    null, old, hit = held_out_readings(synthetic_record(drift=0.0), per_member=20)
    assert len(null) == 400
    assert np.mean(null) <= 0.06  # the band: ≈ 4.7% at most by exchangeability (+10% floor)
    assert np.mean(old) > 0.3  # +10% alone: random walks of ±6% per evaluation cross it
    assert np.mean(hit) <= 0.1  # the support, no different from the others here
    _, _, planted = held_out_readings(synthetic_record(drift=0.03), per_member=20)
    assert np.mean(planted) >= 0.9  # +3% per evaluation on the support's bits: called


def test_a_frozen_network_calls_nothing():
    check = hidden_check([cfg(lr=1e-9)], n_sims=100, members=2)
    assert check.n_null >= 100 and check.false_positives == 0
    assert check.detected == 0 and check.within_bar


def test_a_run_that_learns_has_its_support_called_online_as_from_its_curves():
    configs = [cfg(n_bits=20, width=128, epochs=700, seed=s, data_seed=s) for s in (0, 1)]
    t = SparseParityTrainer(configs)
    t.fit()
    for s in t.summaries:
        assert s.max_eval_acc > 0.8 and s.hidden_called  # learning, and called
        assert 0.0 < s.hidden_band < 0.1 < s.hidden_rise
        assert s.hidden_progress_step < s.visible_step
    rows = [(c.run_id, *r) for c, rs in zip(configs, t.rows, strict=True) for r in rs]
    metrics = pd.DataFrame(rows, columns=["run_id", "epoch", "split", "metric", "value"])
    runs = pd.DataFrame([{**c.flat(), "run_id": c.run_id} for c in configs])
    reread = progress_steps(runs, metrics).set_index("run_id")
    for c, s in zip(configs, t.summaries, strict=True):
        assert reread.loc[c.run_id, "hidden_progress_step"] == s.hidden_progress_step
        assert reread.loc[c.run_id, "hidden_band"] == s.hidden_band
