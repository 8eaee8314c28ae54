"""Keep glibc from handing training's large tensors back to the kernel (issue 13, DESIGN §6).

glibc serves a block above its mmap threshold (128 KiB, rising to at most 32 MiB) with a fresh
``mmap`` and returns it with ``munmap`` on free, and trims the heap top above 2 × that
threshold. A training step allocates and frees the same activation sizes every micro-batch
(tens of MiB for an ensemble), so every step page-faults its working set in again: measured
135,000–227,000 minor page faults per epoch for 4 members of the paper's 2L config, 0 after
:func:`keep_heap`. It changes where memory comes from, never a value: results are bitwise the
same. The cost is that the process keeps its peak heap until it exits.

Applied once per process when the first trainer is built, unless the user set any
``MALLOC_*`` variable (their choice wins) or the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4
TRIM_THRESHOLD = 2**31 - 1  # the largest int: never trim the heap top in practice
TOP_PAD = 64 << 20  # grow the heap 64 MiB at a time

_applied: bool | None = None


def keep_heap() -> bool:
    """Turn glibc's mmap off for large blocks and its heap trimming off; True when applied."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if any(k.startswith("MALLOC_") for k in os.environ):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS, Windows)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _applied = all(mallopt(p, v) == 1 for p, v in ((M_MMAP_MAX, 0),
                                                    (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                                                    (M_TOP_PAD, TOP_PAD)))
    return _applied
