"""A transformer's shape for the models' tests (issue 22: the generic model is built from a
:class:`rulelab.models.transformer.TransformerShape`, so those tests name no study)."""

from rulelab.models.transformer import TransformerShape

DEFAULTS = dict(layers=2, heads=2, d_model=64, d_mlp=128, act="relu", ln=True, vocab=64,
                seq_len=10, label_mod=2)


def transformer_shape(**kw) -> TransformerShape:
    """:data:`DEFAULTS` with ``kw`` replacing some."""
    return TransformerShape(**{**DEFAULTS, **kw})
