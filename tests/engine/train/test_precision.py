"""The engine's ``precision`` setting (issue 13): bf16 autocast for the training
forward/backward in every trainer, fp32 master weights, optimizer and evaluation.

Before issue 13 only ``rulelab sweep`` had bf16 (a trainer subclass in sweep/chunk.py) and the
engine's options had no ``precision``: these tests fail there. On the toy study
(tests/toy_study); study M's trainer, which overrides ``loss``, is checked in
tests/studies/coexistence/test_modular_precision.py.
"""

import pytest
import torch

from rulelab.engine.base import tf32_matmuls
from rulelab.engine.runner import trainer_class
from rulelab.settings import Settings
from toy_study import ToyRunConfig

TINY = dict(n_train=256, n_eval=64, width=32, eval_every=5, epochs=10)
pytestmark = pytest.mark.usefixtures("toy")  # trainer_class looks the task up


def _toy(seed: int, **kw) -> ToyRunConfig:
    return ToyRunConfig(**{**TINY, "seed": seed, **kw})


def _fit(configs, precision: str, cls=None):
    cls = cls or trainer_class(configs[0].task)
    tr = cls(configs, Settings(micro_batch=96, precision=precision))
    tr.fit()
    return tr


def _params(tr) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in tr.model.named_parameters()}


def test_fp32_is_the_default_and_unchanged():
    assert Settings().precision == "fp32"
    cfgs = [_toy(0), _toy(1, noise=0.2)]
    a, b = _fit(cfgs, "fp32"), trainer_class("toy")(cfgs, Settings(micro_batch=96))
    b.fit()
    assert a.rows == b.rows
    for n, p in _params(a).items():
        assert torch.equal(p, _params(b)[n]), n


def test_bf16_equals_the_sweep_autocast_it_replaces():
    """The old sweep-only path (a subclass autocasting ``loss``) is the oracle: the engine's
    option must give the same numbers bitwise."""
    base = trainer_class("toy")

    class OldSweepBF16(base):
        def loss(self, x, y, denom):
            with torch.autocast(self.device.type, dtype=torch.bfloat16):
                return super().loss(x, y, denom).float()

    cfgs = [_toy(0), _toy(1, noise=0.2)]
    new, old = _fit(cfgs, "bf16"), _fit(cfgs, "fp32", cls=OldSweepBF16)
    assert new.rows == old.rows
    for n, p in _params(new).items():
        assert torch.equal(p, _params(old)[n]), n


def test_bf16_changes_rounding_not_the_run():
    cfgs = [_toy(0), _toy(1, noise=0.2)]
    fp32, bf16 = _fit(cfgs, "fp32"), _fit(cfgs, "bf16")
    # master weights and optimizer state stay fp32
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())
    assert all(m.dtype == torch.float32 for m in bf16.opt.exp_avg + bf16.opt.exp_avg_sq)
    differs = False
    for (ea, sa, ma, va), (eb, sb, mb, vb) in zip(fp32.rows[0], bf16.rows[0], strict=True):
        assert (ea, sa, ma) == (eb, sb, mb)
        differs |= va != vb
        if ma == "loss":  # rounding-level differences after 10 steps, not another run
            assert vb == pytest.approx(va, rel=0.05, abs=0.02)
    assert differs  # bf16 really ran (the rows are not the fp32 rows)


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision"):
        trainer_class("toy")([_toy(0)], Settings(precision="fp16"))


def test_tf32_switches_cuda_matmuls_for_the_step_alone_and_restores_them():
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    tr = trainer_class("toy")([_toy(0)], Settings(precision="tf32"))
    with tr.autocast():
        assert matmul.fp32_precision == "tf32"
    assert matmul.fp32_precision == before
    with pytest.raises(RuntimeError, match="boom"), tf32_matmuls():
        raise RuntimeError("boom")
    assert matmul.fp32_precision == before  # restored after an error too


def test_tf32_leaves_cpu_numbers_as_fp32s():
    """The switch is CUDA's alone: a run computed on the CPU under it (the command line refuses
    tf32 there; a Settings object does not check the device) is the fp32 run, bit for bit."""
    cfgs = [_toy(0), _toy(1, noise=0.2)]
    fp32, tf32 = _fit(cfgs, "fp32"), _fit(cfgs, "tf32")
    assert tf32.rows == fp32.rows
    for n, p in _params(tf32).items():
        assert torch.equal(p, _params(fp32)[n]), n
