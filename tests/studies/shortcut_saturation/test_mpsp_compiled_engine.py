"""The compiled engine (engine 3, issue 25): the forward it traces against engine 1's, its
version recorded and checked, the fallback where nothing compiles, and — the one test that
compiles — a member trained in an ensemble equal to its solo run to the last bit."""

import os
import warnings

import pytest
import torch
from pydantic import ValidationError

import rulelab.engine.compiled as compiled
from rulelab.errors import UserError
from rulelab.hardware import cpu_info
from rulelab.models import transformer
from rulelab.models.fused_forward import fused_forward
from rulelab.models.transformer import EnsembleTransformer
from rulelab.settings import Settings
from rulelab.store.version import COMPILED_ENGINE, ENGINE_VERSION, engine_refusal
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

TINY = dict(seq_len=5, vocab=12, n_train=96, n_eval=40, d_model=8, d_mlp=16, heads=2,
            layers=2, eval_every=3, epochs=3, lr=3e-3)


def test_fused_forward_and_its_gradient_equal_engine_1s():
    cfg = MPSPRunConfig(seq_len=6, vocab=10, d_model=16, d_mlp=24, heads=2, layers=2)
    model = EnsembleTransformer(cfg, 3).init_weights([0, 1, 2]).double()
    x = torch.randint(0, 10, (3, 37, 6))
    ours, theirs = fused_forward(model, x), model(x)  # model(x) eagerly: engine 1's layout
    assert ours.shape == (3, 37, 2)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(ours)
    params = list(model.parameters())
    for a, b in zip(torch.autograd.grad(ours, params, g), torch.autograd.grad(theirs, params, g),
                    strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_the_engine_setting_names_a_version_and_refuses_anything_else():
    assert COMPILED_ENGINE in transformer.COMPILED_ENGINES and COMPILED_ENGINE != ENGINE_VERSION
    assert compiled.engine_in_use(Settings()) == ENGINE_VERSION == 4
    # the transformer: eager 12 on the CPU (under bf16 10 where the CPU lacks AVX-512-BF16),
    # 11–4 kept, 4 on a GPU
    cfg = MPSPRunConfig(**TINY)
    assert compiled.engine_in_use(Settings(), cfg) == transformer.TILE_ENGINE == 12
    bf16_here = "avx512_bf16" in cpu_info().flags
    assert compiled.engine_in_use(Settings(precision="bf16"), cfg) == (12 if bf16_here else 10)
    assert compiled.engine_in_use(Settings(engine="11"), cfg) == 11
    assert compiled.engine_in_use(Settings(engine="10"), cfg) == transformer.SIZED_PASS_ENGINE
    assert compiled.engine_in_use(Settings(engine="9"), cfg) == 9
    assert compiled.engine_in_use(Settings(engine="8"), cfg) == 8
    assert compiled.engine_in_use(Settings(engine="7"), cfg) == 7
    assert compiled.engine_in_use(Settings(engine="4"), cfg) == 4
    on_gpu = compiled.engines_for(cfg, "cuda")
    assert on_gpu["eager"] == 4  # the CPU engines' loops: none of them on a GPU
    assert not {"7", "8", "9", "10", "11", "12"} & set(on_gpu)
    with pytest.raises(ValidationError, match="engine"):
        Settings(engine="fast")
    with pytest.raises(UserError, match=r"^--engine: 6 is not allowed for mpsp runs on cpu; "
                                        r"allowed: eager, compiled, 12, 5, 11, 10, 9, 8, 7, 4$"):
        compiled.engine_in_use(Settings(engine="6"), cfg)
    line = engine_refusal("abc", COMPILED_ENGINE, 40, ENGINE_VERSION)
    assert "engine version 5" in line and "engine version 4" in line
    assert "--engine compiled" in line and "\n" not in line


def test_without_a_compiler_the_eager_engine_trains_with_one_notice(monkeypatch):
    monkeypatch.setattr(compiled, "compile_unavailable", lambda device: "no C++ compiler found")
    compiled._notice.cache_clear()
    settings = Settings(engine="compiled")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert compiled.engine_in_use(settings, MPSPRunConfig(**TINY)) == 12
        trainer = MPSPTrainer([MPSPRunConfig(**TINY)], settings)
    assert len(caught) == 1 and "no C++ compiler found" in str(caught[0].message)
    # the eager engine: engine 12, whose step is the model's own (its kernel is no inductor's)
    assert trainer.engine_version == 12 and trainer.step_loss == trainer.model.step_loss
    assert trainer.member_state(0)["engines"] == [[0, 12]]


def test_an_unknown_device_has_no_compiler():
    assert compiled.compile_unavailable("mps") == "inductor does not compile for mps"


def test_a_lone_member_paired_with_its_copy_gets_its_own_gradient_only():
    trainer = MPSPTrainer([MPSPRunConfig(**TINY)], Settings())
    x, y = trainer.data.train_x[:, :32], trainer.data.train_y[:, :32]
    params = list(trainer.model.parameters())
    alone = trainer.loss(x, y, 32.0)
    pair = compiled.paired(trainer.model, trainer.loss)(x, y, 32.0)  # eager: no compile
    assert pair.shape == alone.shape == (1,)
    torch.testing.assert_close(pair, alone, rtol=0, atol=0)
    for a, b in zip(torch.autograd.grad(pair.sum(), params),
                    torch.autograd.grad(alone.sum(), params), strict=True):
        assert a.shape == b.shape and a.shape[0] == 1
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


# The one test that compiles (two graphs: 3 members, and one paired): 30–45 s here with
# inductor's on-disk cache warm, 4.5 min cold (g++ builds ~100 kernels; 273 s measured with the
# other core busy). Opt-in so the suite stays fast: RULELAB_COMPILE_TESTS=1.
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("RULELAB_COMPILE_TESTS") != "1",
                    reason="compiles with inductor (minutes cold): set RULELAB_COMPILE_TESTS=1")
@pytest.mark.skipif(compiled.compile_unavailable("cpu") is not None, reason="no C++ compiler")
def test_compiled_member_equals_alone_to_the_last_bit():
    # Two threads, so a reduction split across threads would show (the kernels must not be);
    # 96 examples in micro-batches of 48: one compiled shape per ensemble size.
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        configs = [MPSPRunConfig(**TINY, ratio=r, seed=s) for r, s in ((0.5, 0), (0.9, 1),
                                                                        (0.7, 2))]
        opts = Settings(micro_batch=48, eval_chunk=40, engine="compiled")
        ens = MPSPTrainer(configs, opts)
        assert ens.engine_version == ens.model.engine == COMPILED_ENGINE
        ens.fit()
        assert ens.member_state(1)["engine_version"] == COMPILED_ENGINE
        eager = MPSPTrainer(configs, Settings(micro_batch=48, eval_chunk=40))
        eager.fit()
        for e in (0, 2):
            alone = MPSPTrainer([configs[e]], opts)
            alone.fit()
            for name, p in ens.model.named_parameters():
                assert torch.equal(p[e], dict(alone.model.named_parameters())[name][0]), name
        # The compiled step really ran: the same function, other rounding than engine 1's.
        w, w1 = ens.model.blocks[0].attn.W_Q, eager.model.blocks[0].attn.W_Q
        assert not torch.equal(w, w1)
        torch.testing.assert_close(w, w1, rtol=1e-3, atol=1e-4)
    finally:
        torch.set_num_threads(threads)
