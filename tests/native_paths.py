"""The two paths of a native-kernel module (``rulelab.models.attention_sums``,
``rulelab.models.layer_norm_lanes``) for its tests: the built library, or the PyTorch ops that
run where nothing builds (issue 25)."""

import contextlib

import pytest

from rulelab.models import native_build


def native_switch(monkeypatch, module):
    """``run(on, f)``: ``f()`` computed with ``module``'s native kernels (``on``) or its PyTorch
    path. Skips the test where the kernels do not build here."""
    def run(on: bool, f):
        monkeypatch.setenv("RULELAB_NATIVE", "1" if on else "0")
        module._build.cache_clear()
        try:
            return f()
        finally:
            module._build.cache_clear()
    if module.unavailable() is not None:
        pytest.skip(f"native kernels unavailable here: {module.unavailable()}")
    return run


@contextlib.contextmanager
def without_a_compiler(monkeypatch, module):
    """``module`` as on a machine with no C++ compiler, its one-time notice not yet given."""
    monkeypatch.setenv("RULELAB_NATIVE", "1")
    monkeypatch.setattr(native_build, "compiler", lambda: None)
    module._build.cache_clear()
    native_build.notice.cache_clear()
    try:
        yield
    finally:
        module._build.cache_clear()
