"""Shared assertion: member ``e`` of an ensemble equals the same run trained alone.

``DEVICE`` is the device the equivalence tests train on: ``cpu`` unless the environment sets
``RULELAB_TEST_DEVICE`` (``bench/gpu_check.sh`` runs them with ``cuda`` on a lent GPU).
"""

import math
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


# What "equal" means on each device.
# - CPU: a member's slice is computed with the same sums in the same order whether the member
#   axis is 1 or 3 long, so a member equals its solo run to the last bit: weights and rows are
#   compared exactly (a tolerance would hide a summation-order change).
# - CUDA: cuBLAS and the reduction kernels may sum in another order for another member count.
#   Measured on an H200 (bench/gpu_member_drift.py, 2026-11-30, torch 2.11): after 30 epochs
#   weights drift by at most 9.2e-6 of their tensor's largest entry (study S; 3.5e-7 study M)
#   and metric rows by at most 4.8e-7, deterministic algorithms or not, while a solo run
#   repeated is bitwise the same. The exception is b_K: its exact gradient is zero (softmax
#   ignores a bias shared by every key), so Adam turns rounding noise into ±lr steps and a
#   member's b_K and its solo run's differ entirely (relative difference 1.7-3.6) without
#   changing any output. On CUDA b_K is therefore judged through the function: the loss and
#   accuracy rows, which must agree to 1e-5 (one flipped example of a 64-example split is
#   1.6e-2).
CUDA_WEIGHT_RTOL = 1e-4  # of the tensor's largest entry: 10x the drift measured
CUDA_ROW_ATOL = 1e-5


def assert_member_equals_alone(ens, e: int, alone, *, exact: bool = True) -> None:
    """Member ``e`` of ``ens`` equals the solo run ``alone``: every weight and every metric
    row (epoch, split, metric, value), as the device allows (see above). ``exact=False``
    allows the CPU a few ulp: only for a known, named defect."""
    ours, theirs = member_params(ens, e), member_params(alone, 0)
    cuda = ours and next(iter(ours.values())).is_cuda
    for n in ours:
        if not cuda and exact:  # bitwise (DESIGN §1): a tolerance would hide an order change
            assert torch.equal(ours[n], theirs[n]), n
        elif not cuda:
            torch.testing.assert_close(ours[n], theirs[n], rtol=1e-6, atol=1e-7, msg=n)
        elif not n.endswith("b_K"):
            scale = theirs[n].abs().max().item()
            drift = (ours[n] - theirs[n]).abs().max().item()
            assert drift <= CUDA_WEIGHT_RTOL * scale + 1e-7, f"{n}: |Δ| {drift:.2e} of {scale:.2e}"
    assert len(ens.rows[e]) == len(alone.rows[0])
    for a, b in zip(ens.rows[e], alone.rows[0], strict=True):
        assert a[:3] == b[:3]
        if cuda:
            assert a[3] == pytest.approx(b[3], rel=0, abs=CUDA_ROW_ATOL, nan_ok=True), a[:3]
        elif exact:
            assert a[3] == b[3] or (math.isnan(a[3]) and math.isnan(b[3])), a[:3]
        else:
            assert a[3] == pytest.approx(b[3], rel=1e-6, abs=1e-7, nan_ok=True), a[:3]


def check_on_device(members, micro_batch: int) -> None:
    """Train ``members`` as one ensemble and each alone on ``DEVICE`` (skipped where it is not
    here); every member must equal its solo run (:func:`assert_member_equals_alone`)."""
    from rulelab.engine.runner import trainer_class
    from rulelab.settings import Settings

    opts = Settings(device=skip_unless_device(), micro_batch=micro_batch)
    cls = trainer_class(members[0].task)
    ens = cls(members, opts)
    ens.fit()
    for e in range(len(members)):
        alone = cls([members[e]], opts)
        alone.fit()
        assert_member_equals_alone(ens, e, alone)
