"""Activation ablation (SPEC S.4.3): the batched path against plain single-forward hooks, and
against oracles that do not use hooks at all (weights zeroed by hand, a hand-built model)."""

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rulelab.models.transformer import EnsembleTransformer
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.analyses.ablation import (
    Ablation,
    ablated_accuracy,
    ablated_logits,
    ablation_table,
    activation_means,
    components,
)
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.evaluate import evaluate
from rulelab.studies.shortcut_saturation.task import make_mpsp
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

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
    tr = MPSPTrainer(cfgs, Settings(micro_batch=256))
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
        # Δ against an oracle without hooks: zeroing hook_z of head h at every position is
        # W_O[h] = 0 (b_O kept); zeroing hook_mlp_out everywhere is W_out = b_out = 0.
        base = _plain_accuracy(tr.model, x, y)
        for layer, comp in components(tr.model):
            acc = _plain_accuracy(_zeroed(tr.model, layer, comp), x, y)
            rows = frame[(frame.layer == layer) & (frame.component == comp)
                         & (frame.method == "zero") & (frame["where"] == "all")]
            rows = rows.sort_values("member")
            assert rows[f"{split}_acc"].tolist() == pytest.approx(acc.tolist()), (layer, comp)
            assert rows[f"d_{split}_acc"].tolist() == pytest.approx((acc - base).tolist())


def _plain_accuracy(model, x, y):
    with torch.no_grad():
        return (model.eval()(x).argmax(-1) == y).double().mean(1)  # [E]


def _zeroed(model, layer, comp):
    """A copy of ``model`` with one head's W_O (or one MLP's W_out, b_out) set to zero."""
    m = copy.deepcopy(model)
    block = m.blocks[layer]
    with torch.no_grad():
        if comp == "mlp":
            block.mlp.W_out.zero_()
            block.mlp.b_out.zero_()
        else:
            block.attn.W_O[:, int(comp[4:])].zero_()
    return m


def _max_parity_model(E=2):
    """1L, 2 heads, attention-only, no LN, V = 16. Head 0 attends (one-hot, 25 logits apart)
    to the max and writes its parity: logit_1 − logit_0 = −4·(−1)^max, the max-parity shortcut
    exactly. Head 1 attends to x₁ and writes nothing."""
    cfg = MPSPRunConfig(seq_len=6, vocab=16, d_model=8, d_mlp=0, heads=2, layers=1, ln=False)
    m = EnsembleTransformer(cfg, E).init_weights(list(range(E)))
    v = torch.arange(16)
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.W_E[:, :16, 0], m.W_E[:, 16, 1], m.W_E[:, :16, 2] = v / 16, 1.0, (-1.0) ** v
        m.W_pos[:, 1, 4] = 1.0
        a = m.blocks[0].attn
        a.W_Q[:, 0, 1, 0], a.W_K[:, 0, 0, 0] = 400.0, 1.0
        a.W_Q[:, 1, 1, 0], a.W_K[:, 1, 4, 0] = 60.0, 1.0
        a.W_V[:, 0, 2, 0], a.W_O[:, 0, 0, 3] = 1.0, 1.0
        m.W_U[:, 3, 0], m.W_U[:, 3, 1] = 2.0, -2.0
    return m.eval()


def test_hand_built_shortcut_head_ablation_by_known_amounts():
    """Oracle: the model predicts the max-parity shortcut, so val accuracy is 1 and adv 0.
    Zeroing head 0 leaves equal logits → class 0 everywhere: accuracy = the share of label 0
    (counted with numpy). Mean-ablating it writes the training-mean parity: class 1 iff most
    training maxima are odd. Head 1 writes nothing: Δ = 0."""
    sp = [make_mpsp(label_mod=2, shortcut="max", ratio=0.5, seq_len=6, vocab=16, n_train=512,
                    n_eval=400, data_seed=d) for d in (0, 1)]
    stack = lambda split, a: torch.from_numpy(np.stack([getattr(s[split], a) for s in sp]))  # noqa: E731
    # Training sets (they only feed the means) with 70% / 30% odd maxima, so the mean write
    # is clearly signed: member 0 → class 1, member 1 → class 0.
    train = []
    for s, share in zip(sp, (0.7, 0.3), strict=True):
        x = s["train"].x
        odd, even = x[x.max(1) % 2 == 1], x[x.max(1) % 2 == 0]
        train.append(np.concatenate([odd[: int(200 * share)], even[: 200 - int(200 * share)]]))
    data = SimpleNamespace(train_x=torch.from_numpy(np.stack(train)), val_x=stack("val", "x"),
                           val_y=stack("val", "label"), adv_x=stack("adv", "x"),
                           adv_y=stack("adv", "label"))
    frame = ablation_table(_max_parity_model(), data, where=("cls", "all"))
    odd_max = (np.stack(train).max(-1) % 2).mean(1)  # [E] share of odd maxima
    mean_pred = (odd_max > 0.5).astype(int)  # logit_1 − logit_0 = 4·(2·odd − 1) on average
    for split, base in (("val", 1.0), ("adv", 0.0)):
        y = np.asarray(getattr(data, f"{split}_y"))
        for e in range(2):
            rows = frame[frame.member == e].set_index(["layer", "component", "method", "where"])
            assert (rows[f"base_{split}_acc"] == base).all()
            for where in ("cls", "all"):
                zero = rows.loc[(0, "head0", "zero", where)]
                assert zero[f"d_{split}_acc"] == pytest.approx((y[e] == 0).mean() - base)
                mean = rows.loc[(0, "head0", "mean", where)]
                assert mean[f"d_{split}_acc"] == pytest.approx((y[e] == mean_pred[e]).mean()
                                                               - base)
                for method in ("zero", "mean"):
                    assert rows.loc[(0, "head1", method, where)][f"d_{split}_acc"] == 0.0
    assert mean_pred.tolist() == [1, 0]  # both branches are exercised
