"""TransformerLens export against the installed package (issue 10): one member of an ensemble
as a TransformerLens model gives the same logits and the same activation on every hook name
both models have, for a 1-layer and a 2-layer model (and an attention-only one without
LayerNorm), with every weight — biases and LayerNorm gains included — away from its init.

TransformerLens 4.3's bridge fires ``attn.hook_attn_scores`` on the post-softmax pattern for
this architecture, so that one hook is compared as such: TransformerLens' reading equals its
own pattern and the softmax of ours. The largest differences are printed (``pytest -s``).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from rulelab.errors import UserError
from rulelab.models.member import MemberModel
from rulelab.models.tl_export import export_file, load_file
from rulelab.models.transformer import EnsembleTransformer
from shapes import transformer_shape

pytest.importorskip("transformer_lens")

SHAPES = {
    "1L": dict(layers=1, heads=2, d_mlp=32),
    "2L": dict(layers=2, heads=2, d_mlp=32, act="gelu"),
    "1L-attn-only-no-ln": dict(layers=1, heads=4, d_mlp=0, ln=False),
}
SCORES = "attn.hook_attn_scores"


def trained_ish(E: int = 3, **kw) -> EnsembleTransformer:
    """An ensemble whose every parameter is moved off its init (a few noisy 'steps')."""
    cfg = transformer_shape(seq_len=5, vocab=12, d_model=16, label_mod=3, **kw)
    model = EnsembleTransformer(cfg, E).init_weights(list(range(E)))
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.3)
    return model.eval()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_logits_and_every_shared_hook_match(shape):
    ensemble = trained_ish(**SHAPES[shape])
    member = MemberModel(ensemble, 1)  # not member 0: the export must pick its slot
    tl = member.to_transformer_lens()
    x = torch.randint(0, 12, (64, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours, cache = member.run_with_cache(x)
        theirs, tl_cache = tl.run_with_cache(ensemble.add_cls(x.unsqueeze(0))[0])
    d_logit = (theirs[:, 0] - ours).abs().max().item()
    shared = sorted(set(cache) & set(tl_cache.keys()))
    diffs = {n: (cache[n] - tl_cache[n]).abs().max().item() for n in shared
             if not n.endswith(SCORES)}
    print(f"\n{shape}: max |Δ logit| {d_logit:.2e}; max |Δ activation| over {len(diffs)} hooks "
          f"{max(diffs.values()):.2e} ({max(diffs, key=diffs.get)})")
    assert d_logit < 5e-5
    assert max(diffs.values()) < 5e-5, diffs
    # every hook of ours exists there, but hook_resid_mid of attention-only blocks
    missing = set(cache) - set(tl_cache.keys())
    assert missing <= {f"blocks.{i}.hook_resid_mid" for i in range(ensemble.cfg.layers)}
    assert len(shared) >= len(cache) - ensemble.cfg.layers
    for n in (n for n in shared if n.endswith(SCORES)):
        pattern = tl_cache[n.replace("hook_attn_scores", "hook_pattern")]
        assert torch.allclose(tl_cache[n], pattern)  # TL 4.3 reads the pattern here
        assert torch.allclose(cache[n].softmax(-1), pattern, atol=1e-6)
    assert ours.shape == (64, 3) and not torch.allclose(ours, ensemble(
        x.unsqueeze(0).expand(3, -1, -1))[0])  # member 1 differs from member 0


def test_a_hook_on_the_export_ablates_like_ours():
    ensemble = trained_ish(**SHAPES["2L"])
    member, tl = MemberModel(ensemble, 0), MemberModel(ensemble, 0).to_transformer_lens()
    x = torch.randint(0, 12, (32, 5), generator=torch.Generator().manual_seed(1))

    def zero_head_1(z, hook):
        z = z.clone()
        z[:, :, 1] = 0.0
        return z

    with torch.no_grad(), member.hooks([("blocks.1.attn.hook_z", zero_head_1)]):
        ours = member(x)
    with torch.no_grad():
        theirs = tl.run_with_hooks(ensemble.add_cls(x.unsqueeze(0))[0],
                                   fwd_hooks=[("blocks.1.attn.hook_z", zero_head_1)])
    assert (theirs[:, 0] - ours).abs().max().item() < 1e-5
    assert (ours - member(x)).abs().max().item() > 1e-3  # the ablation did something


def test_export_file_round_trips(tmp_path):
    ensemble = trained_ish(**SHAPES["1L"])
    path = export_file(ensemble, 2, tmp_path / "m.pt", {"run_id": "abc"})
    payload = torch.load(path, weights_only=True)  # plain tensors and numbers only
    assert payload["meta"] == {"run_id": "abc"} and payload["cls_token"] == 12
    x = torch.randint(0, 12, (16, 5))
    with torch.no_grad():
        theirs = load_file(path)(ensemble.add_cls(x.unsqueeze(0))[0])[:, 0]
        ours = MemberModel(ensemble, 2)(x)
    assert (theirs - ours).abs().max().item() < 1e-5
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(Exception, match="junk.pt|not a rulelab|Weights only|pickle"):
        load_file(tmp_path / "junk.pt")


def test_rulelab_works_without_transformer_lens(tmp_path):
    """Importing rulelab, its API, the export module and the CLI does not import
    transformer_lens; with it missing, the export is one line naming the install."""
    code = (
        "import sys\n"
        "import rulelab, rulelab.api, rulelab.models.tl_export, rulelab.cli.app\n"
        "rulelab.cli.app.build_app()\n"
        "assert 'transformer_lens' not in sys.modules, 'imported'\n"
        "sys.modules['transformer_lens'] = None  # as if not installed\n"
        "from rulelab.errors import UserError\n"
        "from rulelab.models.member import MemberModel\n"
        "from rulelab.models.transformer import EnsembleTransformer, TransformerShape\n"
        "cfg = TransformerShape(layers=1, heads=1, d_model=8, d_mlp=8, act='relu', ln=True,\n"
        "                       vocab=8, seq_len=4, label_mod=2)\n"
        "m = MemberModel(EnsembleTransformer(cfg, 1).init_weights([0]))\n"
        "try:\n"
        "    m.to_transformer_lens()\n"
        "except UserError as e:\n"
        "    print(e)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"OMP_NUM_THREADS": "1", "PATH": ""}, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "pip install transformer_lens" in res.stdout


def test_only_transformers_export():
    from toy_study.trainer import EnsembleToyMLP  # a network that is not a transformer

    with pytest.raises(UserError, match=r"only transformers \(EnsembleTransformer\)"):
        MemberModel(EnsembleToyMLP(1, 7, 4).init_weights([0])).to_transformer_lens()
