"""Shared assertion: member ``e`` of an ensemble equals the same run trained alone.

``DEVICE`` is the device the equivalence tests train on: ``cpu`` unless the environment sets
``RULELAB_TEST_DEVICE`` (``bench/gpu_check.sh`` runs them with ``cuda`` on a lent GPU).
"""

import os

import pytest
import torch

DEVICE = os.environ.get("RULELAB_TEST_DEVICE", "cpu")


def skip_unless_device() -> str:
    """``DEVICE``, or skip the test where that device is not available here."""
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip(f"RULELAB_TEST_DEVICE={DEVICE} but CUDA is not available")
    return DEVICE


def member_params(trainer, e: int) -> dict[str, torch.Tensor]:
    return {n: p[e].detach().clone() for n, p in trainer.model.named_parameters()}


def assert_member_equals_alone(ens, e: int, alone) -> None:
    """Weights to 1e-6 / 1e-7 and every metric row (epoch, split, metric, value)."""
    ours, theirs = member_params(ens, e), member_params(alone, 0)
    for n in ours:
        torch.testing.assert_close(ours[n], theirs[n], rtol=1e-6, atol=1e-7, msg=n)
    assert len(ens.rows[e]) == len(alone.rows[0])
    for a, b in zip(ens.rows[e], alone.rows[0], strict=True):
        assert a[:3] == b[:3]
        assert a[3] == pytest.approx(b[3], rel=1e-6, abs=1e-7, nan_ok=True)
