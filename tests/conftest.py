"""Test-wide settings: one thread, so results do not depend on OpenMP scheduling and a
test run does not stall when another process holds the second core."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_collection_modifyitems(items) -> None:
    """Every test under an ``e2e/`` folder (``tests/e2e/``, ``tests/studies/<study>/e2e/``) is
    marked ``e2e``: the slow end-to-end tests, so ``-m "not e2e"`` runs the rest."""
    import pytest

    for item in items:
        if "e2e" in item.path.parent.parts:
            item.add_marker(pytest.mark.e2e)
