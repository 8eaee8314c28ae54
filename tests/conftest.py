"""Test-wide settings: one thread, so results do not depend on OpenMP scheduling and a
test run does not stall when another process holds the second core; the ``e2e`` mark; the
``toy`` fixture; Triton's kernels (engine 13's step, written for CUDA) run by its interpreter,
which Triton decides when it is first imported (``torch._dynamo`` imports it)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
if not os.environ.get("RULELAB_TEST_DEVICE", "cpu").startswith("cuda"):
    os.environ.setdefault("TRITON_INTERPRET", "1")  # on a GPU the device tests compile them

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_collection_modifyitems(items) -> None:
    """Every test under an ``e2e/`` folder (``tests/e2e/``, ``tests/studies/<study>/e2e/``) is
    marked ``e2e``: the slow end-to-end tests, so ``-m "not e2e"`` runs the rest."""
    for item in items:
        if "e2e" in item.path.parent.parts:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def toy():
    """The test-only toy study (``tests/toy_study``) in the registry while a test runs: the
    engine's tests train it, so they name no real study (issue 22 item 5)."""
    from toy_study import registered

    with registered() as study:
        yield study
