"""One member of an :class:`~rulelab.models.transformer.EnsembleTransformer` as a
TransformerLens model (issue 10 "TransformerLens interop").

What the installed TransformerLens offers decides the class:

- TransformerLens ≥ 4 (tested: 4.3.0) removed ``HookedTransformer``; its TL-native model is
  ``TransformerBridge.boot_native(TransformerBridgeConfig(...))`` (no Hugging Face download),
  which loads HookedTransformer-format weights through
  ``transformer_lens.utilities.tl_checkpoint_conversion.convert_tl_checkpoint``. That is
  what :func:`to_transformer_lens` returns there.
- Older TransformerLens (2.x, 3.x): ``HookedTransformer(HookedTransformerConfig(...))`` with
  the same HookedTransformer-format weights (not exercised by this repository's tests, which
  run 4.3.0).

Both are configured as our model is (SPEC S.2): bidirectional attention
(``attention_dir="bidirectional"``), pre-LayerNorm (``normalization_type="LN"``, eps 1e-5) or
none, ``relu`` / exact ``gelu``, attention-only when ``d_mlp = 0``, vocabulary ``V + 1`` (the
CLS token is id ``V``), ``n_ctx = n + 1`` and ``d_vocab_out = k``. The TransformerLens model
takes the tokens *with* CLS (``ensemble.add_cls(x)``) and its logits at position 0 are ours.
Every hook name both models have carries the same activation, with one exception in
TransformerLens 4.3: the bridge fires ``attn.hook_attn_scores`` on the post-softmax pattern
for this model (its ``AttentionBridge`` reads the wrapped module's second output as
attention weights), while ours holds the pre-softmax scores, as ``HookedTransformer`` did.

``transformer_lens`` is imported only inside these functions: it is heavy (seconds), and
rulelab works without it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from rulelab.errors import UserError

FORMAT = "rulelab-transformer-lens/1"  # the layout of a file written by export_file
RENAMES = {"W_E": "embed.W_E", "W_pos": "pos_embed.W_pos", "W_U": "unembed.W_U",
           "b_U": "unembed.b_U"}  # our top-level names → HookedTransformer's


def require_transformer_lens():
    """The ``transformer_lens`` module, or one line saying how to install it."""
    try:
        import transformer_lens
    except ImportError:
        raise UserError("TransformerLens is not installed: pip install transformer_lens "
                        "(or this project's tl extra: pip install -e '.[tl]')") from None
    return transformer_lens


def tl_config(cfg) -> dict:
    """The TransformerLens config fields of a transformer config (``cfg.layers``, …)."""
    return dict(
        d_model=cfg.d_model, n_layers=cfg.layers, n_heads=cfg.heads,
        d_head=cfg.d_model // cfg.heads, d_mlp=cfg.d_mlp, attn_only=cfg.d_mlp == 0,
        n_ctx=cfg.seq_len + 1, d_vocab=cfg.vocab + 1, d_vocab_out=cfg.label_mod,
        act_fn=cfg.act, normalization_type="LN" if cfg.ln else None, eps=1e-5,
        attention_dir="bidirectional", positional_embedding_type="standard",
    )


def tl_state_dict(ensemble, member: int = 0) -> dict[str, torch.Tensor]:
    """Member ``member``'s weights under HookedTransformer's names and layouts (ours are those
    with a leading member axis, :mod:`rulelab.models.components`)."""
    return {RENAMES.get(name, name): p.detach()[member].clone().cpu()
            for name, p in ensemble.named_parameters()}


def to_transformer_lens(ensemble, member: int = 0):
    """Member ``member`` of ``ensemble`` as a TransformerLens model in eval mode (see the
    module docstring for which class)."""
    from rulelab.models.transformer import EnsembleTransformer

    if not isinstance(ensemble, EnsembleTransformer):
        raise UserError(f"only transformers (EnsembleTransformer) have a TransformerLens "
                        f"counterpart here; this model is a {type(ensemble).__name__}")
    return build(tl_config(ensemble.cfg), tl_state_dict(ensemble, member))


def build(config: dict, weights: dict[str, torch.Tensor]):
    """A TransformerLens model of ``config`` (:func:`tl_config`) holding ``weights``
    (HookedTransformer format)."""
    require_transformer_lens()
    if _has_hooked_transformer():  # TransformerLens < 4
        from transformer_lens import HookedTransformer, HookedTransformerConfig

        model = HookedTransformer(HookedTransformerConfig(**config))
        model.load_state_dict(weights, strict=False)
        return model.eval()
    import transformer_lens.model_bridge.sources.native  # noqa: F401  attaches boot_native
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge
    from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint

    cfg = TransformerBridgeConfig(**config, architecture="TransformerLensNative", seed=0)
    bridge = TransformerBridge.boot_native(cfg)
    bridge.load_state_dict(convert_tl_checkpoint(weights, cfg), strict=True)
    return bridge.eval()


def _has_hooked_transformer() -> bool:
    try:
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError:  # TransformerLens ≥ 4 raises ImportError with a migration note
        return False
    return True


def export_file(ensemble, member: int, out: Path, meta: dict) -> Path:
    """Write member ``member`` as ``{format, config, weights, meta}`` with ``torch.save``
    (tensors, numbers and strings only: it loads with ``weights_only=True``); read it back
    with :func:`load_file`."""
    payload = {"format": FORMAT, "config": tl_config(ensemble.cfg),
               "weights": tl_state_dict(ensemble, member),
               "cls_token": int(ensemble.cls_token), "read_position": 0, "meta": meta}
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, out)
    return out


def load_file(path: str | Path):
    """The TransformerLens model of a file :func:`export_file` (``rulelab export tl``) wrote:
    a ``TransformerBridge`` with TransformerLens ≥ 4, else a ``HookedTransformer``. Feed it
    tokens ``[batch, n + 1]`` with the CLS token (``payload
    ["cls_token"]``, id ``V``) first — ``lab.model(run).to_tokens(x)`` builds them — and read
    the logits at position 0 (``payload["read_position"]``)::

        from rulelab.models.tl_export import load_file
        tl = load_file("run-tl.pt")
        logits = tl(tokens)[:, 0]          # [batch, k], the run's own logits

    The file is a ``torch.save`` dict ``{format, config, weights, cls_token, read_position,
    meta}`` (``meta``: run id, epoch, lab) that loads with ``weights_only=True``; anything
    else is one :class:`UserError` line."""
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UserError(f"{path} is not a rulelab TransformerLens export ({FORMAT})")
    return build(payload["config"], payload["weights"])
