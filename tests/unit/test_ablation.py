"""Activation ablation (SPEC S.4.3): the batched path against plain single-forward hooks."""

import pytest
import torch

from rulelab.analysis.ablation import (
    Ablation,
    ablated_accuracy,
    ablated_logits,
    ablation_table,
    activation_means,
    components,
)
from rulelab.config import MPSPRunConfig
from rulelab.models.transformer import EnsembleTransformer
from rulelab.train.ensemble import EnsembleTrainer, TrainOptions
from rulelab.train.evaluate import evaluate

SHAPE = dict(seq_len=5, vocab=12, d_model=16, d_mlp=32, heads=2, layers=2)


def _model(E=3):
    cfg = MPSPRunConfig(**SHAPE)
    return EnsembleTransformer(cfg, E).init_weights([10 + e for e in range(E)]).eval(), cfg


def _direct(model, x, ab, means=None):
    """Oracle: one ordinary forward with one hand-written hook (no batch replication)."""
    pos = 0 if ab.where == "cls" else slice(None)

    def fn(act, hook):
        act = act.clone()
        h = () if ab.component == "mlp" else (int(ab.component[4:]),)
        if ab.method == "zero":
            act[(slice(None), slice(None), pos, *h)] = 0.0
        elif ab.method == "mean":
            m = means[ab.hook_name][(slice(None), pos, *h)]  # [E, (T,) …]
            act[(slice(None), slice(None), pos, *h)] = m.unsqueeze(1)
        return act

    with torch.no_grad(), model.hooks([(ab.hook_name, fn)]):
        return model(x)


def test_components_list_every_head_and_mlp():
    model, _ = _model()
    assert components(model) == [(0, "head0"), (0, "head1"), (0, "mlp"),
                                 (1, "head0"), (1, "head1"), (1, "mlp")]


def test_batched_ablations_equal_one_direct_hook_each():
    model, cfg = _model()
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, cfg.vocab, (3, 9, cfg.seq_len), generator=g)
    train = torch.randint(0, cfg.vocab, (3, 40, cfg.seq_len), generator=g)
    means = activation_means(model, train, chunk=16)
    abl = [Ablation(0, "head0", "zero", "cls"), Ablation(0, "head1", "mean", "all"),
           Ablation(0, "mlp", "zero", "all"), Ablation(1, "head1", "zero", "all"),
           Ablation(1, "mlp", "mean", "cls"), Ablation(0, "head0", "none", "all"),
           Ablation(0, "mlp", "mean", "cls"), Ablation(1, "head0", "mean", "cls")]
    batched = ablated_logits(model, x, abl, means)  # [E, C, b, k]
    assert batched.shape == (3, len(abl), 9, cfg.label_mod)
    base = model(x)
    for c, ab in enumerate(abl):
        torch.testing.assert_close(batched[:, c], _direct(model, x, ab, means),
                                   rtol=1e-5, atol=1e-5, msg=str(ab))
        if ab.method == "none":  # ablating nothing changes nothing
            torch.testing.assert_close(batched[:, c], base, rtol=1e-5, atol=1e-5)
        elif ab.where == "all" or ab.layer == 1:  # these visibly move the CLS logits
            assert (batched[:, c] - base).abs().max() > 1e-3, ab
    assert not any(hp.has_hooks for hp in model.hook_dict.values())


def test_activation_means_are_per_member_per_position_means():
    model, cfg = _model()
    x = torch.randint(0, cfg.vocab, (3, 50, cfg.seq_len))
    means = activation_means(model, x, chunk=7)
    assert set(means) == {f"blocks.{layer}.{h}" for layer in (0, 1)
                          for h in ("attn.hook_z", "hook_mlp_out")}
    _, cache = model.run_with_cache(x)
    for name, m in means.items():
        assert m.shape == (3,) + cache[name].shape[2:]
        torch.testing.assert_close(m, cache[name].mean(1), rtol=1e-5, atol=1e-6)


def test_mean_ablation_of_a_constant_input_changes_nothing():
    model, cfg = _model()
    seqs = torch.randint(0, cfg.vocab, (3, 1, cfg.seq_len))
    x = seqs.expand(3, 12, cfg.seq_len)  # every example of a member is the same sequence
    means = activation_means(model, x)
    abl = [Ablation(layer, comp, "mean", w) for layer, comp in components(model)
           for w in ("cls", "all")]
    batched = ablated_logits(model, x, abl, means)
    base = model(x)
    for c in range(len(abl)):
        torch.testing.assert_close(batched[:, c], base, rtol=1e-5, atol=1e-5)
    zero = ablated_logits(model, x, [Ablation(0, "mlp", "zero", "all")])
    assert (zero[:, 0] - base).abs().max() > 1e-3  # while zero ablation does move it


def test_bad_ablations_are_refused():
    model, cfg = _model()
    x = torch.randint(0, cfg.vocab, (3, 2, cfg.seq_len))
    with pytest.raises(ValueError, match="method"):
        ablated_logits(model, x, [Ablation(0, "head0", "random")])
    with pytest.raises(ValueError, match="activation_means"):
        ablated_logits(model, x, [Ablation(0, "head0", "mean")])
    assert ablated_accuracy(model, x, x[..., 0], []).shape == (3, 0)


def test_table_rows_match_direct_hooks_for_every_member():
    cfgs = [MPSPRunConfig(**SHAPE, n_train=256, n_eval=64, ratio=r, seed=s, epochs=25, lr=3e-3)
            for s, r in enumerate([0.9, 0.5])]
    tr = EnsembleTrainer(cfgs, TrainOptions(micro_batch=256))
    tr.fit()
    frame = ablation_table(tr.model, tr.data, max_batch=100)  # several chunks per split
    assert len(frame) == 2 * 6 * 2 * 2
    assert tr.model.training  # mode restored
    metrics = evaluate(tr.model, tr.data)
    means = activation_means(tr.model, tr.data.train_x)
    for split in ("val", "adv"):
        x, y = getattr(tr.data, f"{split}_x"), getattr(tr.data, f"{split}_y")
        for e in range(2):
            rows = frame[frame.member == e]
            assert rows[f"base_{split}_acc"].eq(metrics[split, "acc"][e].item()).all()
        for _, row in frame[frame.member == 0].drop_duplicates(
                ["layer", "component", "method", "where"]).iterrows():
            ab = Ablation(row.layer, row.component, row.method, row["where"])
            acc = (_direct(tr.model.eval(), x, ab, means).argmax(-1) == y).double().mean(1)
            tr.model.train()
            got = frame[(frame.layer == ab.layer) & (frame.component == ab.component)
                        & (frame.method == ab.method) & (frame["where"] == ab.where)]
            assert got.sort_values("member")[f"{split}_acc"].tolist() == pytest.approx(
                acc.tolist()), ab
            d = got[f"d_{split}_acc"] - (got[f"{split}_acc"] - got[f"base_{split}_acc"])
            assert d.abs().max() < 1e-12
