"""The native kernels' build cache (rulelab.models.native_build): a library is keyed by its
source and by every local header that source includes, so editing a header (the step's kernel
is a .cpp and five headers) rebuilds it, and nothing changed finds the same library again."""

from __future__ import annotations

import ctypes

import pytest

from rulelab.models import native_build


def _value(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.value.restype = ctypes.c_int
    return lib


@pytest.fixture
def probe(monkeypatch, tmp_path):
    """A source that returns a constant from a header it includes through another header."""
    if native_build.compiler() is None:
        pytest.skip("no C++ compiler here")
    monkeypatch.setenv("RULELAB_KERNEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("RULELAB_NATIVE", "1")
    src = tmp_path / "probe_kernels.cpp"
    (tmp_path / "outer.h").write_text('#pragma once\n#include "inner.h"\n')
    (tmp_path / "inner.h").write_text("#pragma once\nconstexpr int VALUE = 1;\n")
    src.write_text('#include <cstdint>\n#include "outer.h"\n'
                   'extern "C" int value() { return VALUE; }\n')
    return src


def test_the_local_headers_are_found_through_each_other_in_include_order(probe):
    assert native_build.local_headers(probe) == [probe.parent / "outer.h",
                                                 probe.parent / "inner.h"]


def test_a_change_in_a_header_it_includes_rebuilds_the_library(probe):
    first = native_build.load(probe, _value)
    assert not isinstance(first, str), first
    assert first.value() == 1
    cache = probe.parent / "cache"
    assert len(list(cache.glob("probe-*.so"))) == 1
    assert native_build.load(probe, _value).value() == 1  # nothing changed: the same library
    assert len(list(cache.glob("probe-*.so"))) == 1
    (probe.parent / "inner.h").write_text("#pragma once\nconstexpr int VALUE = 2;\n")
    assert native_build.load(probe, _value).value() == 2  # two headers down, still rebuilt
    assert len(list(cache.glob("probe-*.so"))) == 2


def test_the_step_kernels_key_covers_its_headers():
    from rulelab.models import tile_step

    names = [p.name for p in native_build.local_headers(tile_step.SOURCE)]
    assert names == ["step_vectors.h", "step_matmuls.h", "step_precision.h",
                     "step_layer_norm.h", "step_attention.h"]
    text = native_build.source_text(tile_step.SOURCE)
    assert all(p.read_text() in text for p in native_build.local_headers(tile_step.SOURCE))
