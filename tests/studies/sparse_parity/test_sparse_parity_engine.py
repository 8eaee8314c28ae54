"""Sparse parity's MLP under its own engine version 6 (issue 25, ``model.py``): every op of its
forward and backward gives a member the same bits whatever the ensemble's size, at 1 and 2
threads (in the trainer's one-thread region); its runs record engine 6 while its transformer's
and study S's record 4; and a run engine 1 trained is refused on resume, with a hint that claims
no engine that still gives 1."""

import pytest
import torch

from labs import state_at
from rulelab.engine.compiled import eager_engine, engine_in_use, engines_for
from rulelab.engine.threads import training_threads
from rulelab.settings import Settings
from rulelab.store import Lab, StoreError
from rulelab.store.version import COMPILED_ENGINE, ENGINE_VERSION, engine_refusal
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.sparse_parity.config import SparseParityRunConfig
from rulelab.studies.sparse_parity.metrics import aligned_rows
from rulelab.studies.sparse_parity.model import EnsembleParityMLP
from rulelab.studies.sparse_parity.trainer import SparseParityTrainer
from rulelab.sweep.driver import run_configs

MLP = SparseParityRunConfig(n_bits=10, k=3, width=16, batch_size=16, epochs=6, eval_every=3,
                            n_eval=64, seed=1)
TRANSFORMER = SparseParityRunConfig(n_bits=10, k=3, model="transformer", layers=1, heads=2,
                                    d_model=8, d_mlp=16, batch_size=16, epochs=2, n_eval=64)
ENGINE_MLP = EnsembleParityMLP.eager_engine  # (6: asserted once below, named as a constant)
S_RUN = MPSPRunConfig(seq_len=5, vocab=12, n_train=96, n_eval=40, d_model=8, d_mlp=16, heads=2,
                      layers=1, epochs=2)


def _member0(E: int, B: int, M: int, n: int) -> list[torch.Tensor]:
    """Member 0's output and every gradient in an ensemble of ``E`` (the same member 0)."""
    g = torch.Generator().manual_seed(0)
    model = EnsembleParityMLP(8, n, M).init_weights(range(8))
    x = torch.randint(0, 2, (8, B, n), generator=g).float() * 2 - 1
    grad = torch.randn(8, B, generator=g)
    with torch.no_grad():
        part = EnsembleParityMLP(E, n, M)
        for p, q in zip(part.parameters(), model.parameters(), strict=True):
            p.copy_(q[:E])
    out = part(x[:E])
    grads = torch.autograd.grad(out, list(part.parameters()), grad[:E])
    return [out.detach()[0], *(gr[0] for gr in grads)]


@pytest.mark.parametrize("threads", [1, 2])
def test_every_op_of_the_mlp_is_member_size_invariant(threads):
    """Engine 1 fails here: its bmm readout at any thread count (~2e-7 in the output), and at
    2 threads a lone member's W₁ product (~2e-7) and gradient (~2e-6) at these shapes — which
    the trainer's one-thread region (engine 4, rulelab.engine.threads) rules out."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with training_threads("cpu"):
            _check_member_size_invariance()
    finally:
        torch.set_num_threads(before)


def _check_member_size_invariance() -> None:
    for B, M, n in [(7, 32, 8), (17, 33, 11), (256, 32, 10), (100, 33, 10)]:
        ref = _member0(1, B, M, n)
        for E in (2, 3, 8):
            for a, b in zip(ref, _member0(E, B, M, n), strict=True):
                assert torch.equal(a, b), (B, M, n, E)


def test_aligned_rows_give_a_member_the_same_softplus_in_any_ensemble():
    t = torch.randn(5, 77) * 3
    alone = aligned_rows(torch.nn.functional.softplus, t[:1])
    for E in (2, 3, 5):
        together = aligned_rows(torch.nn.functional.softplus, t[:E])
        assert together.shape == (E, 77) and torch.equal(together[0], alone[0])
    torch.testing.assert_close(alone, torch.nn.functional.softplus(t[:1]))  # same function


def test_the_mlp_has_engine_6_its_transformer_10_and_study_s_12():
    # study S's runs train with engine 12, whose step is the transformer's own with the
    # cross-entropy; sparse parity's transformer, with a loss of its own, keeps the lane engine
    assert ENGINE_MLP == 6 != ENGINE_VERSION == 4
    assert eager_engine(MLP) == 6 and eager_engine(TRANSFORMER) == 10 and eager_engine(S_RUN) == 12
    assert engines_for(MLP) == {"eager": 6, "compiled": COMPILED_ENGINE, "6": 6, "5": 5}
    assert engine_in_use(Settings(), MLP) == 6 and engine_in_use(Settings(), S_RUN) == 12
    trainer = SparseParityTrainer([MLP])
    assert trainer.engine_version == trainer.model.engine == 6 and trainer.aligned_loss
    assert trainer.member_state(0)["engines"] == [[0, 6]]
    transformer = SparseParityTrainer([TRANSFORMER])
    assert transformer.engine_version == transformer.model.engine == 10
    assert not transformer.aligned_loss


def test_the_compiled_engine_still_traces_engine_1s_forward():
    """The compiled engine's numbers do not move with engine 6: under it the MLP computes the
    bmm readout, as engines 1 and 4 do."""
    x = torch.randint(0, 2, (1, 17, 11), generator=torch.Generator().manual_seed(0)).float() * 2 - 1
    model = EnsembleParityMLP(1, 11, 33).init_weights([0])
    W1, b1, w2, b2 = model.W1, model.b1, model.w2, model.b2
    pre = torch.relu(torch.bmm(x, W1.transpose(1, 2)) + b1.unsqueeze(1))
    engine_1 = torch.bmm(pre, w2.unsqueeze(-1)).squeeze(-1) + b2.unsqueeze(1)
    model.engine = COMPILED_ENGINE
    assert torch.equal(model(x), engine_1)
    model.engine = ENGINE_MLP
    assert not torch.equal(model(x), engine_1)  # the elementwise readout rounds otherwise here
    torch.testing.assert_close(model(x), engine_1)  # the same function


def test_runs_record_their_models_engine_version(tmp_path):
    lab = Lab(tmp_path / "lab", create=True)
    run_configs([MLP, TRANSFORMER], lab, experiment="t")
    run_configs([S_RUN], lab, experiment="s")
    rows = {r["run_id"]: r for r in lab.runs_json()}
    assert {rid: r["status"] for rid, r in rows.items()} == dict.fromkeys(rows, "done")
    assert rows[MLP.run_id]["engine_version"] == ENGINE_MLP
    assert rows[TRANSFORMER.run_id]["engine_version"] == 10
    assert rows[S_RUN.run_id]["engine_version"] == 12
    assert lab.load_checkpoint(MLP.run_id)["engine_version"] == ENGINE_MLP


def _engine_1_run_killed_at(lab: Lab, epoch: int) -> dict:
    """``lab`` as a kill at ``epoch`` of an engine-1 MLP run leaves it (trained here by engine
    6, its checkpoint relabelled: the refusal reads only the label)."""
    saved = state_at(SparseParityTrainer([MLP]), epoch)
    saved.update(engine_version=1, engines=[[0, 1]])
    lab.register([(MLP.run_id, MLP.flat())], "t")
    lab.save_checkpoint(MLP.run_id, saved)
    return saved


def test_an_engine_1_mlp_run_is_refused_on_resume_unless_allowed(tmp_path):
    lab = Lab(tmp_path / "lab", create=True)
    _engine_1_run_killed_at(lab, 3)
    ckpt = lab.checkpoints_dir / f"{MLP.run_id}.pt"
    before = ckpt.read_bytes()
    with pytest.raises(StoreError) as err:
        run_configs([MLP], lab, experiment="t")
    line = str(err.value)
    assert line == engine_refusal(MLP.run_id, 1, 3, ENGINE_MLP, engines_for(MLP))
    assert "engine version 1" in line and f"engine version {ENGINE_MLP}" in line
    assert "\n" not in line
    # --engine eager trains this model with engine 6 now: no name brings engine 1 back
    assert "--engine" not in line and "--allow-engine-change" in line
    assert ckpt.read_bytes() == before and lab.status(MLP.run_id) == "pending"
    # allowed: trained on by engine 6, the switch recorded
    run_configs([MLP], lab, experiment="t", settings=Settings(allow_engine_change=True))
    (row,) = lab.runs_json()
    assert row["status"] == "done" and row["engine_version"] == ENGINE_MLP
    assert row["engine_switch"] == f"1 from epoch 0, {ENGINE_MLP} from epoch 3"
    assert lab.load_checkpoint(MLP.run_id)["engines"] == [[0, 1], [3, ENGINE_MLP]]


def test_the_hint_names_the_engine_that_still_gives_the_recorded_version():
    # an MLP run the compiled engine trained (5), resumed eagerly (6): --engine compiled
    line = engine_refusal("abc", COMPILED_ENGINE, 40, ENGINE_MLP, engines_for(MLP))
    assert "resume it with --engine compiled" in line
    # a transformer run at 10 resumed under 5: --engine eager still gives it 10
    assert "--engine eager" in engine_refusal("abc", 10, 40, 5, engines_for(TRANSFORMER))
    # at 9, 8, 7 or 4 (before engine 10) resumed eagerly: the transformer keeps them by number
    for old in (9, 8, 7, 4):
        line = engine_refusal("abc", old, 40, 10, engines_for(TRANSFORMER))
        assert f"resume it with --engine {old}," in line


def test_the_transformer_computes_engine_10_eagerly_and_engine_1s_forward_when_compiled():
    """Its network computes the engine the trainer sets, except under the compiled engine,
    whose traced forward stays engine 1's, as it was before engine 7 (version 5's numbers)."""
    model = SparseParityTrainer([TRANSFORMER]).model
    assert model.engine == model.net.engine == 10
    model.engine = COMPILED_ENGINE
    assert model.engine == COMPILED_ENGINE and model.net.engine == 1
