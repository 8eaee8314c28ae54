"""Sparse-parity trainer: a member equals the same run alone (SPEC "Cross-cutting"), resumes
exactly, and a tiny run learns its parity."""

import time

import pytest
import torch

from equivalence import DEVICE, assert_member_equals_alone, skip_unless_device
from rulelab.config.base import make_config
from rulelab.settings import Settings
from rulelab.studies.sparse_parity.config import SparseParityRunConfig
from rulelab.studies.sparse_parity.model import EnsembleParityMLP
from rulelab.studies.sparse_parity.trainer import SparseParityTrainer


def cfg(**kw):
    base = {"n_bits": 10, "k": 3, "batch_size": 16, "epochs": 12, "eval_every": 3,
            "n_eval": 256}
    if kw.get("model", "mlp") == "mlp":
        base["width"] = 32
    return make_config(SparseParityRunConfig, **{**base, **kw})


def assert_same_summary(a, b) -> None:
    """Steps exactly (they are what the study reports), floats to 1e-6 (the batched matmul of
    an ensemble rounds differently from a lone one's at 1e-9)."""
    da, db = a.as_dict(), b.as_dict()
    for key, va in da.items():
        if isinstance(va, float):
            assert va == pytest.approx(db[key], rel=1e-6, abs=1e-7, nan_ok=True), key
        else:
            assert va == db[key], key


def train(configs):
    t = SparseParityTrainer(configs, Settings(device=skip_unless_device()))
    t.fit()
    return t


MEMBERS = {
    "fresh sgd": [cfg(seed=1, lr=0.1), cfg(seed=2, lr=0.05, data_seed=4),
                  cfg(seed=3, lr=0.2, weight_decay=0.0, init_scale=0.5)],
    "fixed adam": [cfg(samples="fixed", n_train=40, optimizer="adam", lr=1e-3, seed=s,
                       data_seed=d, loss="logistic") for s, d in ((0, 0), (5, 1), (9, 0))],
    "sgd momentum": [cfg(momentum=0.9, nesterov=True, seed=s, lr=0.01) for s in (4, 5, 6)],
    "transformer": [cfg(model="transformer", layers=1, heads=2, d_model=8, d_mlp=16,
                        optimizer="adamw", lr=1e-3, seed=s, epochs=4, eval_every=2)
                    for s in (0, 1, 2)],
}


@pytest.mark.parametrize("kind", list(MEMBERS))
def test_member_equals_the_same_run_alone(kind):
    """Would fail if batches, init or data were drawn per ensemble rather than per member
    (e.g. one generator for all members), or if a metric reduced across members."""
    configs = MEMBERS[kind]
    ens = train(configs)
    assert len({tuple(r[3] for r in rows) for rows in ens.rows}) == 3  # members differ
    for e, c in enumerate(configs):
        alone = train([c])
        # Bitwise for the MLP too since its engine 6 (model.py): engines 1 and 4's readout,
        # torch.bmm(h [E, B, M], w2 [E, M, 1]), rounded otherwise for E = 1 than for E = 3.
        assert_member_equals_alone(ens, e, alone)
        assert_same_summary(ens.summaries[e], alone.summaries[0])


@pytest.mark.parametrize("shape", [dict(samples="fixed", n_train=256, batch_size=256),
                                   dict(samples="fixed", n_train=100, batch_size=7)],
                         ids=["full batch", "minibatch"])
def test_the_mlp_member_equals_its_solo_run_on_two_threads(shape):
    """Engine 6 (model.py; one thread a step since engine 4): at 2 threads MKL split a lone
    member's W₁ product (and its gradient) across threads but ran an ensemble's per member;
    engine 1 drifted here by
    1.5e-8 (full batch, 256 × 33 × 10) and 3e-8 (batches of 7) in weights and rows."""
    configs = [cfg(seed=s, width=33, optimizer="adam", lr=1e-3, **shape) for s in range(4)]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        ens = train(configs)
        for e in (0, 3):
            assert_member_equals_alone(ens, e, train([configs[e]]))
    finally:
        torch.set_num_threads(threads)


def test_fixed_samples_make_an_epoch_a_pass_over_the_set():
    c = cfg(samples="fixed", n_train=40, batch_size=16, epochs=2, eval_every=1)
    t = SparseParityTrainer([c])
    seen = []
    t.opt.step = lambda *a, **k: seen.append(1)  # count optimizer steps
    t.train_epoch()
    assert len(seen) == 3  # ⌈40 / 16⌉
    splits = {(s, m) for _, s, m, _ in train([c]).rows[0]}
    assert {("train", "acc"), ("train", "loss"), ("eval", "acc")} <= splits


class _Stop(Exception):
    pass


def test_resume_from_member_state_equals_an_uninterrupted_run():
    """Would fail if resuming lost the batch generators, the init copy behind ``rel_change``
    or the summary's init support mass."""
    configs = [cfg(seed=s, epochs=20, eval_every=5) for s in (0, 1)]
    full = train(configs)
    first = SparseParityTrainer(configs, Settings(device=DEVICE))

    def stop_at_10(trainer, evaluated):
        if trainer.epoch == 10:
            raise _Stop

    with pytest.raises(_Stop):
        first.fit(on_epoch=stop_at_10)
    states = [first.member_state(e) for e in range(2)]
    resumed = SparseParityTrainer(configs, Settings(device=DEVICE))
    for e, state in enumerate(states):
        resumed.load_member_state(e, state)
    resumed.fit()
    for (n, p), (_, q) in zip(resumed.model.named_parameters(), full.model.named_parameters(),
                              strict=True):
        assert torch.equal(p, q), n
    assert resumed.rows == full.rows
    for a, b in zip(resumed.summaries, full.summaries, strict=True):
        assert_same_summary(a, b)


def test_hook_points_cache_member_axis_activations():
    t = SparseParityTrainer([cfg(seed=0), cfg(seed=1)])
    out, cache = t.model.run_with_cache(t.data.eval_x[:, :7])
    assert out.shape == (2, 7)
    assert cache["hook_pre"].shape == cache["hook_post"].shape == (2, 7, 32)
    assert torch.equal(cache["hook_out"], out)
    assert (cache["hook_post"] >= 0).all()


def test_mlp_init_is_torch_linear_scaled_per_member():
    net = EnsembleParityMLP(2, 50, 400).init_weights([3, 3], scales=[1.0, 0.25])
    bound = 1 / 50**0.5
    assert net.W1[0].abs().max() <= bound and net.W1[0].abs().max() > 0.95 * bound
    torch.testing.assert_close(net.W1[1], 0.25 * net.W1[0])  # same seed, scaled
    assert net.w2[0].abs().max() <= 1 / 400**0.5


@pytest.mark.parametrize("n, k, width, epochs", [(6, 2, 64, 300), (8, 3, 128, 600)])
def test_a_tiny_run_learns_its_parity_and_its_weights_move_to_the_support(n, k, width, epochs):
    start = time.perf_counter()
    c = cfg(n_bits=n, k=k, width=width, batch_size=32, epochs=epochs, eval_every=5,
            n_eval=1024)
    s = train([c]).summaries[0]
    assert s.learned and s.final_eval_acc == 1.0 and s.steps_to_learn <= epochs
    assert s.final_support_mass > 1.3 * s.support_mass_init  # the weights went to the support
    assert s.mass_rise_step is not None
    # C(n − k, k) ≤ 10 off-support subsets: too few for a 5% band, so nothing is called
    assert s.hidden_band != s.hidden_band and s.hidden_progress_step is None
    assert s.fourier_step is not None and s.fourier_step <= s.steps_to_learn
    assert time.perf_counter() - start < 20
