"""Engine 10, the transformer's eager engine on the CPU (issue 25): engine 9's kernels with each
step cut into passes sized to the model (``models.passes.pass_examples``) where
``--micro-batch`` is not given. The pass is part of the numbers: recorded, refused on resume
when it would change, and engine 9's numbers come back with ``--engine 9`` or
``--micro-batch 512``."""

import pytest
import torch

from rulelab.engine.compiled import micro_batch_for
from rulelab.engine.runner import train_chunk
from rulelab.models.passes import (
    PASS_BYTES,
    PASS_MAX,
    SIZED_PASS_ENGINE,
    TILE_ENGINE,
    TILE_PASS,
    activation_bytes,
    pass_examples,
)
from rulelab.models.transformer import FUSED_LANE_ENGINE
from rulelab.settings import DEFAULT_MICRO_BATCH, Settings
from rulelab.store import Lab, StoreError
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

TEN = Settings(engine="10")  # engine 10 on request: the default is 11 (test_mpsp_tile_engine.py)
WIDE = dict(seq_len=5, vocab=12, n_eval=32, d_model=128, d_mlp=256, heads=2, layers=2,
            eval_every=2, lr=3e-3)  # 6 positions: 87 KB of activations an example, passes of 256


def _ladder(d_model: int, d_mlp: int, layers: int = 2) -> MPSPRunConfig:
    return MPSPRunConfig(seq_len=10, vocab=64, d_model=d_model, d_mlp=d_mlp, heads=2,
                         layers=layers)


@pytest.mark.parametrize(("d_model", "d_mlp", "layers", "want"),
                         [(24, 48, 2, 512), (32, 64, 2, 512), (48, 96, 2, 256),
                          (64, 128, 2, 256), (64, 128, 1, 512), (128, 256, 2, 128),
                          (256, 1024, 4, 16)])
def test_the_pass_is_the_largest_power_of_two_whose_activations_fit(d_model, d_mlp, layers,
                                                                     want):
    cfg = _ladder(d_model, d_mlp, layers)
    got = pass_examples(cfg, SIZED_PASS_ENGINE)
    assert got == want
    per = activation_bytes(cfg)
    assert per == 4 * layers * 11 * (10 * d_model + 2 * d_mlp + 2 * 2 * 11)
    # within the budget (or at the floor of one attention block), and double it would not be
    assert got * per <= PASS_BYTES or got == 16
    assert got == PASS_MAX or 2 * got * per > PASS_BYTES
    for engine in (FUSED_LANE_ENGINE, 8, 7, 4, 5):  # the engines before size nothing
        assert pass_examples(cfg, engine) is None
    assert pass_examples(cfg, TILE_ENGINE) == TILE_PASS  # 11 keeps no activations


def test_the_settings_pick_the_pass():
    cfg = _ladder(64, 128)  # the paper's widths: 256 under engine 10
    assert micro_batch_for(TEN, cfg) == 256
    assert micro_batch_for(Settings(), cfg) == TILE_PASS  # engine 11, the default
    assert micro_batch_for(Settings(engine="9"), cfg) == DEFAULT_MICRO_BATCH
    assert micro_batch_for(Settings(micro_batch=300), cfg) == 300  # --micro-batch wins
    assert micro_batch_for(Settings(engine="compiled"), cfg) == DEFAULT_MICRO_BATCH


def _fit(configs, settings):
    trainer = MPSPTrainer(configs, settings)
    trainer.fit()
    return trainer


def _params(trainer, e: int = 0) -> dict:
    return {n: p[e].detach().clone() for n, p in trainer.model.named_parameters()}


def test_engine_10_trains_in_its_passes_and_with_512_gives_engine_9s_numbers():
    cfg = MPSPRunConfig(**WIDE, n_train=600, epochs=3, seed=4)  # full batch: 600 per step
    ten = _fit([cfg], TEN)
    assert ten.engine_version == SIZED_PASS_ENGINE and ten.micro_batch == 256
    state = ten.member_state(0)
    assert state["micro_batch"] == 256 and state["engine_version"] == SIZED_PASS_ENGINE
    nine = _fit([cfg], Settings(engine="9"))
    assert nine.engine_version == FUSED_LANE_ENGINE and nine.micro_batch == 512
    ten_512 = _fit([cfg], Settings(engine="10", micro_batch=512))
    for name, p in _params(nine).items():  # the same kernels in the same passes: every bit
        assert torch.equal(p, _params(ten_512)[name]), name
    assert nine.rows[0] == ten_512.rows[0]
    # passes of 256, 256, 88 sum the gradient in another order: other numbers (a new engine)
    assert any(not torch.equal(p, _params(ten)[n]) for n, p in _params(nine).items())


def test_under_engine_10_a_member_equals_its_solo_run():
    configs = [MPSPRunConfig(**WIDE, n_train=600, epochs=3, seed=s, ratio=r)
               for s, r in ((0, 0.5), (1, 0.9), (2, 0.7))]
    ens = _fit(configs, Settings(engine="10", eval_chunk=48))
    assert ens.micro_batch == 256  # the shape's pass, whatever the ensemble's size
    for e in (0, 2):
        alone = _fit([configs[e]], Settings(engine="10", eval_chunk=48))
        for name, p in _params(alone).items():
            assert torch.equal(p, _params(ens, e)[name]), name
        assert ens.rows[e] == alone.rows[0]


def test_an_engine_9_run_resumes_under_engine_9_and_is_refused_otherwise(tmp_path):
    lab = Lab(tmp_path / "lab", create=True)
    cfg = MPSPRunConfig(**WIDE, n_train=600, epochs=4, seed=0)
    half = cfg.model_copy(update={"epochs": 2})
    done = _fit([half], Settings(engine="9"))
    state = done.member_state(0)
    lab.save_checkpoint(cfg.run_id, state)
    states = {cfg.run_id: state}
    with pytest.raises(StoreError, match="engine version 9.*--engine 9"):
        train_chunk([cfg], states, lab, TEN)
    # allowed to change engine, its passes would still change: refused, naming the pass
    with pytest.raises(StoreError, match="micro-batches of 512.*--micro-batch 512"):
        train_chunk([cfg], states, lab, Settings(engine="10", allow_engine_change=True))
    summaries = train_chunk([cfg], states, lab, Settings(engine="9"))
    assert summaries[0].get("failed_reason") is None
    whole = _fit([cfg], Settings(engine="9"))
    resumed = lab.load_checkpoint(cfg.run_id)  # resumed under engine 9: its numbers, bitwise
    for name, p in _params(whole).items():
        assert torch.equal(p, resumed["params"][name]), name


def test_where_a_step_fits_in_one_pass_engine_10_trains_engine_9s_numbers():
    """Minibatches of 64 (the quick preset's) fit one pass of either engine: the same bits."""
    cfg = MPSPRunConfig(**WIDE, n_train=256, batch_size=64, epochs=2, seed=1)
    ten, nine = _fit([cfg], TEN), _fit([cfg], Settings(engine="9"))
    assert (ten.micro_batch, nine.micro_batch) == (256, 512)
    for name, p in _params(nine).items():
        assert torch.equal(p, _params(ten)[name]), name
    assert nine.rows[0] == ten.rows[0]
