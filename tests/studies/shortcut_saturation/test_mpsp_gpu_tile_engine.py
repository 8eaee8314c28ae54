"""Engine 13 (the transformer's step as one Triton kernel, for CUDA; rulelab.models.gpu_tile_step)
as study S's trainer uses it: offered on a GPU only, in passes of the whole batch, refused
where it cannot tile a shape or compute a precision, and training what engine 4 trains to float
rounding — run here by Triton's interpreter, with the engine offered on the CPU for the test."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from rulelab.engine import compiled  # noqa: E402
from rulelab.errors import UserError  # noqa: E402
from rulelab.models import gpu_tile_kernels  # noqa: E402
from rulelab.models.passes import GPU_TILE_ENGINE, pass_examples  # noqa: E402
from rulelab.settings import Settings  # noqa: E402
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig  # noqa: E402
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer  # noqa: E402

if not type(gpu_tile_kernels.step).__name__.startswith("Interpreted"):
    pytest.skip("Triton was imported before TRITON_INTERPRET was set", allow_module_level=True)

SMALL = dict(seq_len=5, vocab=12, n_eval=32, d_model=32, d_mlp=32, heads=2, layers=2,
             eval_every=2, lr=3e-3)


def test_it_is_offered_on_a_gpu_only_in_passes_of_the_whole_batch():
    cfg = MPSPRunConfig(**SMALL)
    assert "13" not in compiled.engines_for(cfg)
    on_gpu = compiled.engines_for(cfg, "cuda")
    assert on_gpu["13"] == GPU_TILE_ENGINE == 13 and on_gpu["eager"] == 4  # opt-in
    assert pass_examples(cfg, 13) == 16384
    with pytest.raises(UserError, match="allowed: eager, compiled, 12"):
        compiled.engine_in_use(Settings(engine="13"), cfg)


@pytest.fixture
def offered_here(monkeypatch):
    """Engine 13 offered on the CPU, where the interpreter runs its kernel."""
    real = compiled.engines_for
    monkeypatch.setattr(compiled, "engines_for",
                        lambda config=None, device="cpu": {**real(config, device), "13": 13})


def test_through_the_trainer_it_trains_what_engine_4_trains(offered_here):
    cfg = MPSPRunConfig(**SMALL, n_train=40, epochs=3, seed=3)
    four, thirteen = MPSPTrainer([cfg], Settings(engine="4")), MPSPTrainer([cfg],
                                                                             Settings(engine="13"))
    assert thirteen.engine_version == 13 and thirteen.tile == 16
    assert thirteen.micro_batch == 16384  # the whole step in one pass
    start = {n: p[0].detach().clone() for n, p in four.model.named_parameters()}
    four.fit()
    thirteen.fit()
    moved = 0.0
    for name, p in four.model.named_parameters():
        if name.endswith("b_K"):  # its true gradient is 0: Adam scales rounding noise to ±lr
            continue
        q = dict(thirteen.model.named_parameters())[name]
        torch.testing.assert_close(q[0], p[0], rtol=1e-4, atol=1e-5, msg=name)
        moved = max(moved, float((p[0].detach() - start[name]).abs().max()))
    assert moved > 1e-3  # three steps of Adam moved the weights well beyond the tolerance
    rows4 = {(r[0], r[1], r[2]): r[3] for r in four.rows[0]}
    rows13 = {(r[0], r[1], r[2]): r[3] for r in thirteen.rows[0]}
    assert rows4.keys() == rows13.keys()
    for key, v in rows4.items():
        assert abs(rows13[key] - v) < 1e-4, key


@pytest.mark.parametrize("change,why", [
    (dict(d_model=24, heads=2, d_mlp=32), "d_model 24: engine 13 needs powers of two ≥ 16"),
    (dict(act="gelu"), "act gelu"),
])
def test_a_shape_it_cannot_tile_is_refused_naming_the_field(offered_here, change, why):
    cfg = MPSPRunConfig(**{**SMALL, **change})
    with pytest.raises(UserError, match=f"--engine: 13 cannot train these mpsp runs .*{why}"):
        MPSPTrainer([cfg], Settings(engine="13"))


def test_bf16_is_refused(offered_here):
    with pytest.raises(UserError, match="--precision bf16: engine 13 computes fp32 and tf32"):
        MPSPTrainer([MPSPRunConfig(**SMALL)], Settings(engine="13", precision="bf16"))
