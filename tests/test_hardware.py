"""Run-time hardware detection (rulelab.hardware, issue 13): CPU flags → bf16 status, peaks."""

import time

import pytest

from rulelab import hardware
from rulelab.hardware import CpuInfo

# Abridged /proc/cpuinfo of the three kinds of machine issue 13 names.
AMX = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 amx_bf16 amx_tile
"""
EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13 64-Core Processor
flags\t\t: fpu sse4_2 avx avx2 fma
processor\t: 1
model name\t: AMD EPYC 7B13 64-Core Processor
flags\t\t: fpu sse4_2 avx avx2 fma
"""
AVX512_NO_BF16 = """model name\t: Intel(R) Xeon(R) Processor @ 2.80GHz
flags\t\t: fpu avx avx2 fma avx512f avx512_vnni
"""
ARM = """processor\t: 0
Features\t: fp asimd evtstrm aes sve
CPU part\t: 0xd40
"""


@pytest.fixture
def cpu(monkeypatch):
    """Pretend to run on the CPU described by a /proc/cpuinfo text."""

    def use(text: str) -> CpuInfo:
        info = hardware._parse_cpuinfo(text)
        monkeypatch.setattr(hardware, "cpu_info", lambda: info)
        return info

    return use


def test_cpuinfo_is_parsed_per_kind_of_machine():
    amx = hardware._parse_cpuinfo(AMX)
    assert amx.model.startswith("Intel(R) Xeon(R) Platinum 8481C")
    assert hardware.cpu_extensions(amx) == ("avx2", "fma", "avx512f", "avx512_vnni",
                                            "avx512_bf16", "amx_tile", "amx_bf16")
    epyc = hardware._parse_cpuinfo(EPYC)
    assert epyc.model == "AMD EPYC 7B13 64-Core Processor"  # the first processor's line
    assert hardware.cpu_extensions(epyc) == ("avx2", "fma")
    assert hardware.cpu_extensions(hardware._parse_cpuinfo(ARM)) == ("asimd", "sve")
    assert (epyc.vendor, amx.vendor) == ("AuthenticAMD", "")  # the Xeon text states none


def test_the_kind_of_cpu_is_its_vendor_and_torchs_vector_width(cpu, monkeypatch):
    """hardware.cpu_kernels, recorded per stretch of epochs in every checkpoint."""
    import platform

    import torch

    width = torch.backends.cpu.get_cpu_capability()
    cpu(EPYC)
    hardware.cpu_kernels.cache_clear()
    assert hardware.cpu_kernels() == f"AuthenticAMD {width}"
    cpu(ARM)  # no vendor line: the machine's architecture instead
    hardware.cpu_kernels.cache_clear()
    assert hardware.cpu_kernels() == f"{platform.machine()} {width}"
    hardware.cpu_kernels.cache_clear()  # the real machine's for the tests after


@pytest.mark.parametrize(("text", "kind"), [(AMX, "AMX"), (EPYC, None), (AVX512_NO_BF16, None),
                                            (ARM, None)])
def test_bf16_is_native_only_with_amx_or_avx512_bf16(cpu, text, kind):
    cpu(text)
    assert hardware.cpu_bf16_kind() == kind
    assert hardware.native_bf16("cpu") is (kind is not None)
    error = hardware.precision_error("bf16", "cpu")
    assert (error is None) is (kind is not None)
    if error:
        assert error.startswith("bf16 is not native here") and "\n" not in error
    assert hardware.precision_error("fp32", "cpu") is None


def test_avx512_bf16_without_amx_is_native(cpu):
    cpu("model name : x\nflags : avx2 avx512f avx512_bf16\n")
    assert hardware.cpu_bf16_kind() == "AVX-512-BF16" and hardware.native_bf16()


def test_unknown_precision_is_refused_in_one_line():
    assert hardware.precision_error("fp16") == "'fp16' is not allowed; use fp32, bf16 or tf32"


def test_tf32_is_refused_on_every_cpu(cpu):
    cpu(AMX)  # even the CPU that multiplies bf16 natively
    assert not hardware.native_tf32("cpu")
    error = hardware.precision_error("tf32", "cpu")
    assert error.startswith("tf32 is not available here") and "CUDA" in error
    assert error.endswith("use fp32") and "\n" not in error


def test_this_machine_is_described():
    info = hardware.cpu_info()
    assert info.model and info.flags  # /proc/cpuinfo or torch's probes
    lines = hardware.describe(peaks=False)
    assert lines[0].startswith(f"CPU: {info.model}")
    assert ("not native" in lines[2]) is (not hardware.native_bf16())


def test_torch_probes_agree_with_cpuinfo_on_this_machine():
    flags = hardware.cpu_info().flags
    if "avx2" not in flags and "avx512f" not in flags:
        pytest.skip("not an x86 CPU with AVX")
    probed = hardware._torch_flags()
    for flag in ("avx2", "avx512f", "avx512_bf16", "amx_tile"):
        assert (flag in probed) == (flag in flags), flag


def test_peaks_are_measured_once_per_process():
    t = time.perf_counter()
    peak = hardware.matmul_peak(n=256, reps=2)
    first = time.perf_counter() - t
    assert peak > 0.1  # GFLOP/s
    t = time.perf_counter()
    assert hardware.matmul_peak(n=256, reps=2) == peak  # cached: same value, no new timing
    assert time.perf_counter() - t < first
    assert hardware.memory_bandwidth(mib=8, reps=2) > 0.1  # GB/s
