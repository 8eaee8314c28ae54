"""One ensemble member as a model without the member axis (issue 10): forward, cache and
hooks see ``[batch, …]`` and touch only that member's slot."""

import pytest
import torch

from rulelab.errors import UserError
from rulelab.models.member import MemberModel, member_data
from rulelab.models.transformer import EnsembleTransformer
from shapes import transformer_shape
from toy_study import ToyRunConfig
from toy_study.trainer import EnsembleToyMLP, ToyTrainer


def _ensemble(E=3):
    cfg = transformer_shape(seq_len=5, vocab=12, d_model=16, d_mlp=32, heads=2, layers=2)
    return EnsembleTransformer(cfg, E).init_weights([5, 6, 7]).eval(), cfg


def test_forward_and_cache_are_the_members_without_the_axis():
    ens, cfg = _ensemble()
    x = torch.randint(0, 12, (4, 5))
    full_logits, full_cache = ens.run_with_cache(x.unsqueeze(0).expand(3, -1, -1))
    model = MemberModel(ens, 2)
    logits, cache = model.run_with_cache(x)
    torch.testing.assert_close(logits, full_logits[2])
    torch.testing.assert_close(model(x), full_logits[2], rtol=1e-5, atol=1e-5)
    assert set(cache) == set(full_cache) and model.hook_names == ens.hook_names
    for name, act in cache.items():
        torch.testing.assert_close(act, full_cache[name][2])
    assert cache["blocks.1.attn.hook_pattern"].shape == (4, 2, 6, 6)


def test_a_hook_sees_one_member_and_patches_only_its_slot():
    ens, _ = _ensemble()
    x = torch.randint(0, 12, (4, 5))
    stacked = x.unsqueeze(0).expand(3, -1, -1)
    base = ens(stacked)
    seen = []

    def zero_head_0(z, hook):
        seen.append(z.shape)
        z = z.clone()
        z[:, :, 0] = 0.0
        return z

    model = MemberModel(ens, 1)
    with model.hooks([("blocks.0.attn.hook_z", zero_head_0)]):
        patched = ens(stacked)
        assert not torch.allclose(model(x), base[1])
    assert seen[0] == (4, 6, 2, 8)  # [batch, pos, head, d_head]: no member axis
    torch.testing.assert_close(patched[[0, 2]], base[[0, 2]], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(patched[1], base[1])
    assert not any(hp.has_hooks for hp in ens.hook_dict.values())  # removed on exit


def test_member_data_and_bad_members():
    ens, _ = _ensemble()
    cfgs = [ToyRunConfig(seed=s, data_seed=s) for s in range(3)]
    data = ToyTrainer(cfgs).data  # a dataclass of [E, …] tensors
    one = member_data(data, 1)
    torch.testing.assert_close(one.eval_x, data.eval_x[1])
    assert one.eval_x.shape == (cfgs[0].n_eval, cfgs[0].d)
    with pytest.raises(ValueError, match="member 3 is not in an ensemble of 3"):
        MemberModel(ens, 3)
    plain = MemberModel(EnsembleToyMLP(2, 4, 8).init_weights([0, 1]), 0)  # no hook points
    assert plain(torch.randn(5, 4)).shape == (5, 2)
    with pytest.raises(UserError, match="has no hook points"):
        plain.run_with_cache(torch.randn(5, 4))
