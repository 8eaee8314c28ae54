"""Engines 11 and 12 in training (issue 25): study S's runs trained by default with the step
depth first (``models/tile_step.py``), evaluated through the same kernel's forward (engine 12;
engine 11 evaluates with engine 10's). A member equals its solo run bitwise; it trains the
model engine 10 trains (the same parameters to float rounding after a few steps); 12 trains
11's bits and evaluates to float rounding of 11's readings; an engine-10 or engine-11 run is
refused on resume under the default; where it cannot run, the default is engine 10 with one
notice, and ``--engine 11`` is refused in one line before any step."""

import dataclasses

import pytest
import torch

from rulelab.engine import compiled
from rulelab.engine.compiled import engines_for
from rulelab.engine.runner import train_chunk
from rulelab.errors import UserError
from rulelab.hardware import cpu_info
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
TEN = Settings(engine="10")


def _fit(configs, settings):
    trainer = MPSPTrainer(configs, settings)
    trainer.fit()
    return trainer


def _params(trainer, e: int = 0) -> dict:
    return {n: p[e].detach().clone() for n, p in trainer.model.named_parameters()}


def test_it_is_the_default_on_the_cpu_in_fp32():
    cfg = MPSPRunConfig(**SMALL)
    offered = engines_for(cfg)
    assert offered["eager"] == offered["12"] == TILE_ENGINE == 12
    assert offered["11"] == 11 and offered["10"] == SIZED_PASS_ENGINE
    assert engines_for(cfg, "cuda")["eager"] == 4 and not {"11", "12"} & set(engines_for(cfg,
                                                                                        "cuda"))
    assert MPSPTrainer([cfg]).engine_version == TILE_ENGINE


@pytest.mark.parametrize("has_it", [True, False])
def test_bf16_trains_with_it_where_the_cpu_has_avx512_bf16_else_with_10(monkeypatch, has_it):
    if has_it and not tile_step.computes_bf16():
        pytest.skip("this kernel was not built for AVX-512-BF16")
    info = cpu_info()
    flags = info.flags | {"avx512_bf16"} if has_it else info.flags - {"avx512_bf16"}
    monkeypatch.setattr(compiled, "cpu_info", lambda: dataclasses.replace(info, flags=flags))
    bf16 = MPSPTrainer([MPSPRunConfig(**SMALL)], Settings(precision="bf16"))
    assert bf16.engine_version == (TILE_ENGINE if has_it else SIZED_PASS_ENGINE)


def test_a_member_equals_its_solo_run_and_the_engine_is_recorded():
    configs = [MPSPRunConfig(**SMALL, n_train=700, epochs=3, seed=s, ratio=r)
               for s, r in ((0, 0.5), (1, 0.9), (2, 0.7))]
    ens = _fit(configs, Settings())
    assert ens.engine_version == TILE_ENGINE
    assert ens.member_state(1)["engine_version"] == TILE_ENGINE
    assert ens.member_state(1)["tile"] == tile_step.tile_examples(ens.model.cfg) == 48
    for e in (0, 2):
        alone = _fit([configs[e]], Settings())
        for name, p in _params(alone).items():
            assert torch.equal(p, _params(ens, e)[name]), name
        assert ens.rows[e] == alone.rows[0]


def test_it_trains_what_engine_10_trains_to_float_rounding():
    cfg = MPSPRunConfig(**SMALL, n_train=600, epochs=4, seed=3)
    ten, eleven = _fit([cfg], TEN), _fit([cfg], Settings())
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


def test_engine_12_trains_11s_bits_and_evaluates_through_the_kernel(tmp_path):
    configs = [MPSPRunConfig(**SMALL, n_train=300, epochs=4, seed=s, ratio=r)
               for s, r in ((0, 0.5), (1, 0.9))]
    eleven, twelve = _fit(configs, ELEVEN), _fit(configs, Settings())
    assert (eleven.engine_version, twelve.engine_version) == (11, 12)
    for e in range(2):
        for name, p in _params(eleven, e).items():
            assert torch.equal(p, _params(twelve, e)[name]), name
    # the readings: float rounding apart (the kernel's forward, not engine 10's), the same
    # accuracies; and the logits are the kernel's own, not engine 10's
    got, want = twelve.compute_metrics(), eleven.compute_metrics()
    for key, v in want.items():
        tol = 0.0 if key[1].endswith("acc") else 1e-6
        torch.testing.assert_close(got[key], v, rtol=0, atol=tol, msg=str(key))
    x = twelve.data.val_x
    with torch.no_grad():
        native = twelve.model(x)
        eleven.model.engine = 11
        lane = eleven.model(x)
        assert torch.equal(native, tile_step.tile_logits(twelve.model, x))
    torch.testing.assert_close(native, lane, rtol=0, atol=1e-5)
    assert not torch.equal(native, lane)
    # a lab begun under engine 11 resumes under --engine 11 only
    lab = Lab(tmp_path / "lab", create=True)
    cfg = configs[0].model_copy(update={"epochs": 6})
    state = eleven.member_state(0)
    lab.save_checkpoint(cfg.run_id, state)
    with pytest.raises(StoreError, match="engine version 11.*engine version 12"):
        train_chunk([cfg], {cfg.run_id: state}, lab, Settings())
    assert train_chunk([cfg], {cfg.run_id: state}, lab, ELEVEN)[0].get("failed_reason") is None


def test_an_engine_10_run_is_refused_under_the_default(tmp_path):
    lab = Lab(tmp_path / "lab", create=True)
    cfg = MPSPRunConfig(**SMALL, n_train=300, epochs=4, seed=0)
    done = _fit([cfg.model_copy(update={"epochs": 2})], TEN)
    state = done.member_state(0)
    lab.save_checkpoint(cfg.run_id, state)
    with pytest.raises(StoreError, match="engine version 10.*engine version 12"):
        train_chunk([cfg], {cfg.run_id: state}, lab, Settings())
    summaries = train_chunk([cfg], {cfg.run_id: state}, lab, TEN)  # under its own engine
    assert summaries[0].get("failed_reason") is None


def test_bf16_from_a_kernel_without_it_is_refused_naming_the_flag(monkeypatch):
    monkeypatch.setattr(tile_step, "computes_bf16", lambda: False)
    with pytest.raises(UserError, match="^--engine: 11 .*not built for AVX-512-BF16.*; use "
                                        "--engine 10$"):
        MPSPTrainer([MPSPRunConfig(**SMALL)], Settings(engine="11", precision="bf16"))


@pytest.mark.skipif(not tile_step.computes_bf16(),
                    reason="this kernel was not built for AVX-512-BF16")
def test_in_bf16_a_member_equals_its_solo_run_and_an_engine_10_bf16_run_is_refused(tmp_path):
    bf16 = Settings(precision="bf16")
    configs = [MPSPRunConfig(**SMALL, n_train=300, epochs=3, seed=s, ratio=r)
               for s, r in ((0, 0.5), (1, 0.9))]
    ens = _fit(configs, bf16)
    assert ens.engine_version == TILE_ENGINE
    alone = _fit([configs[1]], bf16)
    for name, p in _params(alone).items():
        assert torch.equal(p, _params(ens, 1)[name]), name
    assert ens.rows[1] == alone.rows[0]
    fp32 = _fit([configs[1]], Settings())  # bf16 is its own numbers
    assert any(not torch.equal(p, _params(fp32)[n]) for n, p in _params(alone).items())
    # a bf16 run begun under engine 10 (bf16's engine before) resumes under 10 only
    lab = Lab(tmp_path / "lab", create=True)
    cfg = configs[0].model_copy(update={"epochs": 4})
    state = _fit([configs[0].model_copy(update={"epochs": 2})],
                 Settings(engine="10", precision="bf16")).member_state(0)
    lab.save_checkpoint(cfg.run_id, state)
    with pytest.raises(StoreError, match="engine version 10.*engine version 12"):
        train_chunk([cfg], {cfg.run_id: state}, lab, bf16)


def test_a_gelu_model_trains_with_engine_10_and_says_so():
    cfg = MPSPRunConfig(**{**SMALL, "act": "gelu"})
    tile_step.notice_fallback.cache_clear()
    with pytest.warns(RuntimeWarning, match="engine 12 unavailable .*ReLU MLP only.*engine 10"):
        assert MPSPTrainer([cfg]).engine_version == SIZED_PASS_ENGINE
    with pytest.raises(UserError, match="^--engine: 11 is not allowed .*allowed: eager"):
        MPSPTrainer([cfg], ELEVEN)


def test_a_task_with_a_loss_of_its_own_is_refused():
    class OwnLoss(MPSPTrainer):
        def loss(self, x, y, denom):
            return super().loss(x, y, denom) * 2

    # the default is a step engine too: the line names the engine that computes any loss
    with pytest.raises(UserError, match="^--engine: 12 computes the cross-entropy only.*; use "
                                        "--engine 10$"):
        OwnLoss([MPSPRunConfig(**SMALL)])
    with pytest.raises(UserError, match="^--engine: 11 computes the cross-entropy only"):
        OwnLoss([MPSPRunConfig(**SMALL)], ELEVEN)
    assert OwnLoss([MPSPRunConfig(**SMALL)], TEN).engine_version == SIZED_PASS_ENGINE
    # sparse parity's transformer has its own loss: it keeps the lane engine, 11 not offered
    cfg = SparseParityRunConfig(n_bits=10, k=3, model="transformer", layers=1, heads=2,
                                d_model=8, d_mlp=16, batch_size=16, epochs=2, n_eval=64)
    assert SparseParityTrainer([cfg]).engine_version == SIZED_PASS_ENGINE
    with pytest.raises(UserError, match="^--engine: 11 is not allowed"):
        SparseParityTrainer([cfg], ELEVEN)


def test_without_its_kernel_engine_10_trains_with_one_notice(monkeypatch):
    monkeypatch.setenv("RULELAB_NATIVE", "0")
    tile_step.built.cache_clear()
    tile_step.notice_fallback.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="did not build: RULELAB_NATIVE=0.*engine 10"):
            trainer = MPSPTrainer([MPSPRunConfig(**SMALL)])
        assert trainer.engine_version == SIZED_PASS_ENGINE
        with pytest.raises(UserError, match="^--engine: 11 is not allowed"):
            MPSPTrainer([MPSPRunConfig(**SMALL)], ELEVEN)
    finally:
        monkeypatch.delenv("RULELAB_NATIVE")
        tile_step.built.cache_clear()
