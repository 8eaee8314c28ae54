"""What this machine can do, detected at run time (DESIGN §6, issue 13).

Machines differ: an AVX2-only EPYC, an AVX-512 Xeon without bf16 instructions, a Xeon with AMX,
a GPU. Everything here is measured or read on the machine the code runs on, never assumed:

- :func:`cpu_info` — the CPU model and its flags (``/proc/cpuinfo``; torch's own probes where
  that file does not exist), and :func:`cpu_extensions`, the vector / matrix extensions that
  matter for training speed (AVX2, AVX-512, AVX-512-BF16, AMX);
- :func:`native_bf16` — whether bf16 matmuls run on bf16 hardware (AMX or AVX-512-BF16 on a CPU,
  compute capability ≥ 8.0 on CUDA). Elsewhere bf16 autocast is emulated and slower than fp32;
- :func:`matmul_peak` — a short timed square matmul (GFLOP/s, best of a few), and
  :func:`memory_bandwidth` — a timed large copy (GB/s, read + write), each cached per process;
- :func:`describe` — the lines benchmarks print first.
"""

from __future__ import annotations

import functools
import os
import platform
import time
from dataclasses import dataclass

import torch

PRECISIONS = ("fp32", "bf16", "tf32")  # Settings.precision

# Flags worth naming, in the order they are printed (/proc/cpuinfo spelling).
EXTENSIONS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
              "amx_bf16", "amx_fp16", "asimd", "sve")


@dataclass(frozen=True)
class CpuInfo:
    """The CPU model name, its feature flags (lower case, as /proc/cpuinfo spells them) and its
    vendor (``GenuineIntel``, ``AuthenticAMD``; empty where not stated)."""

    model: str
    flags: frozenset[str]
    vendor: str = ""


def _parse_cpuinfo(text: str) -> CpuInfo:
    model, flags, vendor = "", frozenset(), ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model") and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:  # x86 "flags", arm "Features"
            flags = frozenset(value.split())
        elif key == "vendor_id" and not vendor:
            vendor = value.strip()
    return CpuInfo(model, flags, vendor)


def _torch_flags() -> frozenset[str]:
    """The flags torch's own CPU probes report (where /proc/cpuinfo is missing)."""
    probes = {"avx2": "_is_avx2_supported", "avx512f": "_is_avx512_supported",
              "avx512_vnni": "_is_vnni_supported", "avx512_bf16": "_is_avx512_bf16_supported",
              "amx_tile": "_is_amx_tile_supported", "amx_fp16": "_is_amx_fp16_supported"}
    found = set()
    for flag, name in probes.items():
        probe = getattr(torch.cpu, name, None)
        if probe is not None and probe():
            found.add(flag)
    if "amx_tile" in found:  # torch probes AMX tiles; every AMX CPU with tiles has AMX-BF16
        found.add("amx_bf16")
    return frozenset(found)


@functools.cache
def cpu_info() -> CpuInfo:
    """This machine's CPU (read once per process)."""
    try:
        with open("/proc/cpuinfo") as f:
            info = _parse_cpuinfo(f.read())
    except OSError:
        info = CpuInfo("", frozenset())
    flags = info.flags or _torch_flags()
    return CpuInfo(info.model or platform.processor() or platform.machine(), flags, info.vendor)


@functools.cache
def cpu_kernels() -> str:
    """The kind of CPU a run's numbers are bitwise reproducible on, e.g. ``"GenuineIntel
    AVX512"``: its vendor and the widest vector kernels PyTorch dispatches to. MKL and PyTorch
    pick their matmul and reduction kernels by these, and kernels of another width or vendor
    path add in another order: the same config, seed and engine give other numbers on another
    kind of CPU (docs/running.md, "The kind of CPU is part of the numbers too")."""
    vendor = cpu_info().vendor or platform.machine()
    return f"{vendor} {torch.backends.cpu.get_cpu_capability()}"


def cpu_extensions(info: CpuInfo | None = None) -> tuple[str, ...]:
    """The vector / matrix extensions of :data:`EXTENSIONS` this CPU has."""
    info = info or cpu_info()
    return tuple(x for x in EXTENSIONS if x in info.flags)


def cpu_bf16_kind(info: CpuInfo | None = None) -> str | None:
    """``"AMX"``, ``"AVX-512-BF16"`` or None: the bf16 matmul hardware of this CPU."""
    flags = (info or cpu_info()).flags
    if "amx_bf16" in flags:
        return "AMX"
    if "avx512_bf16" in flags:
        return "AVX-512-BF16"
    return None


def native_bf16(device: str | torch.device = "cpu") -> bool:
    """Whether bf16 matmuls run on bf16 hardware on ``device`` (so bf16 autocast pays off)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return _ampere_or_newer(dev)
    if dev.type == "cpu":
        return cpu_bf16_kind() is not None
    return False


def _ampere_or_newer(dev: torch.device) -> bool:
    """A CUDA GPU of compute capability ≥ 8.0: bf16 and TF32 tensor cores."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability(dev) >= (8, 0)


def native_tf32(device: str | torch.device = "cpu") -> bool:
    """Whether ``device`` multiplies fp32 matrices on TF32 tensor cores (a CUDA GPU of compute
    capability ≥ 8.0; no CPU has them)."""
    dev = torch.device(device)
    return dev.type == "cuda" and _ampere_or_newer(dev)


def precision_error(precision: str, device: str | torch.device = "cpu") -> str | None:
    """Why ``precision`` cannot be used on ``device`` (one line), or None when it can."""
    if precision not in PRECISIONS:
        return f"{precision!r} is not allowed; use {', '.join(PRECISIONS[:-1])} or {PRECISIONS[-1]}"
    on_cpu = torch.device(device).type == "cpu"
    if precision == "bf16" and not native_bf16(device):
        where = (f"this CPU ({cpu_info().model or 'unknown'}) has neither AMX nor AVX-512-BF16"
                 if on_cpu else
                 f"{device} has no native bf16 matmul (needs compute capability ≥ 8.0)")
        return f"bf16 is not native here: {where}; use fp32"
    if precision == "tf32" and not native_tf32(device):
        where = ("TF32 is a CUDA GPU's matmul mode and a CPU has none" if on_cpu else
                 f"{device} has no TF32 tensor cores (needs compute capability ≥ 8.0)")
        return f"tf32 is not available here: {where}; use fp32"
    return None


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _best_seconds(fn, dev: torch.device, reps: int) -> float:
    fn()  # warm-up
    _sync(dev)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        _sync(dev)
        best = min(best, time.perf_counter() - t)
    return best


@functools.cache
def _matmul_peak(dtype: torch.dtype, device: str, n: int, reps: int, threads: int) -> float:
    dev = torch.device(device)
    a = torch.randn(n, n, device=dev).to(dtype)
    b = torch.randn(n, n, device=dev).to(dtype)
    return 2 * n**3 / _best_seconds(lambda: a @ b, dev, reps) / 1e9


def matmul_peak(dtype: torch.dtype = torch.float32, device: str = "cpu", *, n: int | None = None,
                reps: int = 5) -> float:
    """Measured ``n × n × n`` matmul rate in GFLOP/s (best of ``reps``), cached per process and
    thread count. ``n`` defaults to 2048 on a CPU and 8192 on a GPU."""
    n = n or (8192 if torch.device(device).type == "cuda" else 2048)
    return _matmul_peak(dtype, str(device), n, reps, torch.get_num_threads())


@functools.cache
def _bandwidth(device: str, mib: int, reps: int, threads: int) -> float:
    dev = torch.device(device)
    src = torch.ones(mib << 18, device=dev)  # float32: 4 bytes each
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / _best_seconds(lambda: dst.copy_(src), dev, reps) / 1e9


def memory_bandwidth(device: str = "cpu", *, mib: int = 256, reps: int = 5) -> float:
    """Measured copy bandwidth in GB/s (bytes read + written, best of ``reps``), cached."""
    return _bandwidth(str(device), mib, reps, torch.get_num_threads())


def describe(device: str = "cpu", *, peaks: bool = True) -> list[str]:
    """Lines naming the machine: CPU model and extensions, bf16 status, measured peaks."""
    info, dev = cpu_info(), torch.device(device)
    lines = [f"CPU: {info.model or 'unknown'} ({os.cpu_count()} logical CPUs, torch "
             f"{torch.__version__}, {torch.get_num_threads()} threads, capability "
             f"{torch.backends.cpu.get_cpu_capability()})",
             f"extensions: {' '.join(cpu_extensions(info)) or 'none of ' + ', '.join(EXTENSIONS)}"]
    kind = cpu_bf16_kind(info)
    lines.append(f"bf16 matmul on the CPU: {'native (' + kind + ')' if kind else 'not native'}")
    if dev.type == "cuda":
        lines.append(f"GPU: {torch.cuda.get_device_name(dev)}, compute capability "
                     f"{'.'.join(map(str, torch.cuda.get_device_capability(dev)))}, bf16 "
                     f"{'native' if native_bf16(dev) else 'not native'}")
    if peaks:
        lines.append(f"measured {dev.type} peaks: fp32 matmul "
                     f"{matmul_peak(torch.float32, device):,.0f} GFLOP/s"
                     + (f", bf16 matmul {matmul_peak(torch.bfloat16, device):,.0f} GFLOP/s"
                        if native_bf16(dev) else "")
                     + f", copy bandwidth {memory_bandwidth(device):,.1f} GB/s")
    return lines
