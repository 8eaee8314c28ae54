"""Build a C++ kernel source into a shared library once, and load it (engines 7 and 8, issue 25).

The transformer's eager engine on the CPU runs a few loops natively (attention's sums:
``attention_kernels.cpp``; LayerNorm: ``layer_norm_kernels.cpp``). Each source is compiled
with the C++ compiler (``$CXX``, else ``g++``/``c++``) into ``$RULELAB_KERNEL_CACHE``
(default ``~/.cache/rulelab/kernels``), once per source, flags, compiler and CPU, and loaded
with ctypes (which releases the GIL during a call). ``RULELAB_NATIVE=0`` builds nothing.
Every caller keeps a PyTorch path that computes the same numbers, used with one notice
(:func:`notice`) where nothing builds.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

# -march=native: the CPU's vector width; -ffp-contract=off: no fused multiply-add the source
# does not write (so an element rounds the same on any vector width); no errno: sqrt vectorizes.
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC")


def flags(march: str = "native") -> tuple[str, ...]:
    """:data:`FLAGS` with ``-march=march``: a build for another target than this CPU (the
    kernels' AVX2 build on an AVX-512 CPU, ``x86-64-v3``: the same fp32 bits, another speed)."""
    return tuple(f"-march={march}" if f == "-march=native" else f for f in FLAGS)
OFF = "RULELAB_NATIVE=0"
KEEP = 4  # built libraries kept per kernel family (other sources, compilers, CPUs)
STALE_TEMP_S = 3600  # a temporary build file older than this was left by a killed build
_BUILD_TIMEOUT_S = 120


def cache_dir() -> Path:
    """Where built kernels are kept: ``$RULELAB_KERNEL_CACHE``, else the user cache."""
    if env := os.environ.get("RULELAB_KERNEL_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rulelab" / "kernels"


def compiler() -> str | None:
    for name in (os.environ.get("CXX"), "g++", "c++"):
        if name and shutil.which(name):
            return name
    return None


def _cpu_key() -> str:
    """What ``-march=native`` compiles for: the CPU's model and flags."""
    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    keep = [ln for ln in info if ln.startswith(("model name", "flags"))][:2]
    return platform.machine() + "\n".join(keep)


def quoted_includes(text: str) -> list[str]:
    """The file names a C++ source includes in quotes (``#include "step_vectors.h"``), in order."""
    return re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M)


def local_headers(source: Path) -> list[Path]:
    """The headers ``source`` includes by a quoted name from its own folder, and theirs, in
    the order first included (``step_kernels.cpp``'s vectors, matmuls, …)."""
    found: list[Path] = []

    def visit(path: Path) -> None:
        for name in quoted_includes(path.read_text()):
            header = source.parent / name
            if header not in found:
                found.append(header)
                visit(header)

    visit(source)
    return found


def source_text(source: Path) -> str:
    """``source`` and every local header it includes: what a build of it compiles, so that
    its cache key changes with any of them."""
    return "\0".join(p.read_text() for p in [source, *local_headers(source)])


def load(source: Path, declare: Callable[[ctypes.CDLL], ctypes.CDLL]) -> ctypes.CDLL | str:
    """``source`` built (or found built) and loaded, its functions typed by ``declare``; or
    why not, in one line."""
    if os.environ.get("RULELAB_NATIVE", "1") == "0":
        return OFF
    cxx = compiler()
    if cxx is None:
        return "no C++ compiler found"
    try:
        # The compiler by its resolved file (no process started: every worker loads this).
        exe = Path(shutil.which(cxx) or cxx).resolve()
        stat = exe.stat()
        who = f"{exe}:{stat.st_size}:{stat.st_mtime_ns}"
        key = hashlib.sha256("\0".join([source_text(source), " ".join(FLAGS), who,
                                        _cpu_key()]).encode()).hexdigest()[:16]
        lib = cache_dir() / f"{source.stem.removesuffix('_kernels')}-{key}.so"
        if not lib.exists():
            lib.parent.mkdir(parents=True, exist_ok=True)
            # Built beside its final name and renamed: concurrent workers never load half a file.
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib.parent)
            os.close(fd)
            try:
                done = subprocess.run([cxx, *FLAGS, str(source), "-o", tmp], capture_output=True,
                                      text=True, timeout=_BUILD_TIMEOUT_S)
                if done.returncode != 0:
                    return f"{cxx} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
                os.replace(tmp, lib)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            prune(lib)
        return declare(ctypes.CDLL(str(lib)))
    except (OSError, subprocess.SubprocessError) as err:
        return f"{type(err).__name__}: {err}"


def why_not(built: ctypes.CDLL | str) -> str | None:
    """Why there is no library (what :func:`load` gave, where it is a reason), or None."""
    return built if isinstance(built, str) else None


def usable(built: ctypes.CDLL | str, what: str) -> ctypes.CDLL | None:
    """``built`` (what :func:`load` gave) where it is a library, else None, saying once why
    ``what`` runs as PyTorch ops (nothing said where ``RULELAB_NATIVE=0`` asked for that)."""
    if isinstance(built, str):
        if built != OFF:
            notice(what, built)
        return None
    return built


def fp32_cpu_rows(*tensors: torch.Tensor) -> bool:
    """Whether every tensor is float32 on the CPU with its innermost axis contiguous: what the
    native kernels read."""
    return all(t.device.type == "cpu" and t.dtype == torch.float32 and t.stride(-1) == 1
               for t in tensors)


def prune(built: Path) -> None:
    """After ``built`` was built: keep its family's :data:`KEEP` newest libraries and remove
    temporary files that killed builds left. Safe beside other processes: a library already
    loaded stays mapped, and one removed before it loads is rebuilt, or its PyTorch path runs —
    the same numbers either way."""
    family = built.name.rsplit("-", 1)[0]
    libs = sorted(built.parent.glob(f"{family}-*.so"), key=_mtime, reverse=True)
    stale = [p for p in built.parent.glob("tmp*.so") if time.time() - _mtime(p) > STALE_TEMP_S]
    for path in [p for p in libs[KEEP:] if p != built] + stale:
        with contextlib.suppress(OSError):
            path.unlink()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@functools.cache
def notice(what: str, why: str) -> None:
    """Say once per kernel family and reason that the PyTorch path runs instead."""
    warnings.warn(f"native {what} kernels unavailable ({why}): {what} runs as PyTorch ops, "
                  "the same numbers, slower", RuntimeWarning, stacklevel=5)
