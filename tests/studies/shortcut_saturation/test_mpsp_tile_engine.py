"""Engine 11 in training (issue 25, opt-in ``--engine 11``): study S's runs trained with the
step depth first (``models/tile_step.py``). Recorded as engine 11; a member equals its solo run
bitwise; it trains the model engine 10 trains (the same parameters to float rounding after a
few steps); an engine-10 run is refused on resume; what it cannot run is refused in one line
naming ``--engine`` before any step."""

import pytest
import torch

from rulelab.engine.compiled import engines_for
from rulelab.engine.runner import train_chunk
from rulelab.errors import UserError
from rulelab.models import tile_step
from rulelab.models.passes import SIZED_PASS_ENGINE
from rulelab.models.tile_step import TILE_ENGINE
from rulelab.settings import Settings
from rulelab.store import Lab, StoreError
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer
from rulelab.studies.sparse_parity.config import SparseParityRunConfig
from rulelab.studies.sparse_parity.trainer import SparseParityTrainer

pytestmark = pytest.mark.skipif(tile_step.native() is None,
                                reason="engine 11's kernel did not build here")

SMALL = dict(seq_len=5, vocab=12, n_eval=32, d_model=16, d_mlp=32, heads=2, layers=2,
             eval_every=2, lr=3e-3)
ELEVEN = Settings(engine="11")


def _fit(configs, settings):
    trainer = MPSPTrainer(configs, settings)
    trainer.fit()
    return trainer


def _params(trainer, e: int = 0) -> dict:
    return {n: p[e].detach().clone() for n, p in trainer.model.named_parameters()}


def test_it_is_offered_on_the_cpu_only():
    cfg = MPSPRunConfig(**SMALL)
    assert engines_for(cfg)["11"] == TILE_ENGINE
    assert "11" not in engines_for(cfg, "cuda")
    assert engines_for(cfg)["eager"] == SIZED_PASS_ENGINE  # opt-in: not the default


def test_a_member_equals_its_solo_run_and_the_engine_is_recorded():
    configs = [MPSPRunConfig(**SMALL, n_train=700, epochs=3, seed=s, ratio=r)
               for s, r in ((0, 0.5), (1, 0.9), (2, 0.7))]
    ens = _fit(configs, ELEVEN)
    assert ens.engine_version == TILE_ENGINE
    assert ens.member_state(1)["engine_version"] == TILE_ENGINE
    for e in (0, 2):
        alone = _fit([configs[e]], ELEVEN)
        for name, p in _params(alone).items():
            assert torch.equal(p, _params(ens, e)[name]), name
        assert ens.rows[e] == alone.rows[0]


def test_it_trains_what_engine_10_trains_to_float_rounding():
    cfg = MPSPRunConfig(**SMALL, n_train=600, epochs=4, seed=3)
    ten, eleven = _fit([cfg], Settings()), _fit([cfg], ELEVEN)
    moved = 0.0
    for name, p in _params(ten).items():
        if name.endswith("b_K"):
            # its true gradient is 0 and Adam scales either engine's rounding noise there to
            # steps of ≈ lr: no engine's b_K means anything (test_tile_step's oracle)
            continue
        q = _params(eleven)[name]
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=name)
        moved = max(moved, (p - MPSPTrainer([cfg]).model.state_dict()[name][0]).abs().max())
    assert moved > 1e-3  # four steps of Adam moved the weights well beyond the tolerance
    # its numbers are its own: not engine 10's bits
    assert any(not torch.equal(p, _params(eleven)[n]) for n, p in _params(ten).items())


def test_an_engine_10_run_is_refused_under_engine_11(tmp_path):
    lab = Lab(tmp_path / "lab", create=True)
    cfg = MPSPRunConfig(**SMALL, n_train=300, epochs=4, seed=0)
    done = _fit([cfg.model_copy(update={"epochs": 2})], Settings())
    state = done.member_state(0)
    lab.save_checkpoint(cfg.run_id, state)
    with pytest.raises(StoreError, match="engine version 10.*engine version 11"):
        train_chunk([cfg], {cfg.run_id: state}, lab, ELEVEN)


@pytest.mark.parametrize(("settings", "cfg", "match"), [
    (Settings(engine="11", precision="bf16"), MPSPRunConfig(**SMALL), "fp32 only"),
    (ELEVEN, MPSPRunConfig(**{**SMALL, "act": "gelu"}), "ReLU MLP only"),
])
def test_what_it_cannot_run_is_refused_naming_the_flag(settings, cfg, match):
    with pytest.raises(UserError, match=f"^--engine: 11 .*{match}.*--engine eager"):
        MPSPTrainer([cfg], settings)


def test_a_task_with_a_loss_of_its_own_is_refused():
    cfg = SparseParityRunConfig(n_bits=10, k=3, model="transformer", layers=1, heads=2,
                                d_model=8, d_mlp=16, batch_size=16, epochs=2, n_eval=64)
    with pytest.raises(UserError, match="^--engine: 11 .*--engine eager"):
        SparseParityTrainer([cfg], ELEVEN)


def test_without_its_kernel_it_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("RULELAB_NATIVE", "0")
    tile_step.built.cache_clear()
    try:
        with pytest.raises(UserError, match="native kernel did not build: RULELAB_NATIVE=0"):
            MPSPTrainer([MPSPRunConfig(**SMALL)], ELEVEN)
    finally:
        monkeypatch.delenv("RULELAB_NATIVE")
        tile_step.built.cache_clear()
