"""The engine's per-example scores (issue 22: one copy for every study): chunked forwards give
the unchunked values, several label sets share them, an empty set gives empty scores whose
masked means are NaN."""

import math

import pytest
import torch

from rulelab.engine.per_example import cross_entropy, masked_mean, scores


class Batched(torch.nn.Module):
    """``x [E, b, d] → [E, b, k]`` with per-member weights, counting its forwards."""

    def __init__(self, E: int = 2, d: int = 3, k: int = 4) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.W = torch.nn.Parameter(torch.randn(E, d, k, generator=g))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.einsum("ebd,edk->ebk", x, self.W)


@pytest.mark.parametrize("chunk", [1, 4, 7, 100])
def test_chunked_scores_are_the_unchunked_values(chunk):
    model, g = Batched(), torch.Generator().manual_seed(1)
    x, y = torch.randn(2, 10, 3, generator=g), torch.randint(0, 4, (2, 10), generator=g)
    flipped = (y + 1) % 4
    [(loss, correct), (loss_f, correct_f)], pred = scores(model, x, [y, flipped], chunk)
    assert model.calls == math.ceil(10 / chunk)  # both label sets share each forward
    logits = model(x)
    assert torch.equal(pred, logits.argmax(-1))
    assert torch.equal(correct, pred == y) and torch.equal(correct_f, pred == flipped)
    assert not (correct & correct_f).any()  # a prediction matches one label set at most
    torch.testing.assert_close(loss, cross_entropy(logits, y), rtol=0, atol=1e-6)
    torch.testing.assert_close(loss_f, cross_entropy(logits, flipped), rtol=0, atol=1e-6)
    assert loss.shape == (2, 10) and correct.dtype == torch.bool


def test_a_custom_loss_and_an_empty_set():
    model = Batched()
    x, y = torch.randn(2, 5, 3), torch.zeros(2, 5, dtype=torch.long)
    [(loss, _)], _ = scores(model, x, [y], 2, loss=lambda logits, y: logits.square().sum(-1))
    torch.testing.assert_close(loss, model(x).square().sum(-1))
    [(empty, hit)], pred = scores(model, x[:, :0], [y[:, :0]], 2)
    assert empty.shape == hit.shape == pred.shape == (2, 0) and hit.dtype == torch.bool
    assert masked_mean(empty.double(), hit).isnan().all()  # nobody in the set: NaN, not 0
