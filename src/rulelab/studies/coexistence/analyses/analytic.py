"""Gromov's (2023) analytic solution for the quadratic network (SPEC M.4.6).

For ``c = a + b mod P`` neuron ``m`` gets one frequency ``σ_m`` and random phases ``φ¹_m, φ²_m``:

    u_m(i) = A cos(2πσ_m i/P + φ¹_m)
    v_m(j) = A cos(2πσ_m j/P + φ²_m)
    w_m(q) = A cos(−2πσ_m q/P − φ¹_m − φ²_m)

With ``φ(z) = z²`` the cross term ``2 u_m(a) v_m(b)`` contains ``A² cos(2πσ_m(a+b)/P + φ¹+φ²)``;
times ``w_m(q)`` it leaves ``½A³ cos(2πσ_m(a+b−q)/P)``, whose phases cancel. Summed over neurons
this peaks at ``q ≡ a + b``; all other terms carry random phases and average out as ``M`` grows,
so the solution is exact in the limit and 100% accurate at moderate ``M`` (e.g. P = 23, M = 512).

Choices (not fixed by the paper):
- ``σ_m`` cycles through ``1..(P−1)/2``: ``σ_m = 1 + (m mod (P−1)/2)``, so all frequencies are
  used about equally (the coherent sum over frequencies is what makes the peak sharp).
- Phases: uniform in [0, 2π), drawn for all members at once as ``[E, M]`` from one CPU generator
  seeded with ``seed`` (member ``e`` is row ``e``).
- ``A = (2/M)^{1/3}`` by default, so the correct logit is ≈ ``A³M/2 = 1``.
- ``op="sub"`` (``c = a − b``): ``v_m(j) = A cos(−2πσ_m j/P + φ²_m)`` (``v`` reads ``−j``), so the
  cross term contains ``cos(2πσ_m(a−b)/P + φ¹+φ²)`` and ``w`` is unchanged. In the rfft phase
  convention of :mod:`.analyses.fourier` ``v̂`` then has phase ``−φ²`` and the sub residual
  ``φ_a − φ_b − φ_c`` is 0.
- ``op="mul"`` is not supported (the Fourier structure lives in discrete-log coordinates).
- No output bias: ``μ`` is returned as None.
"""

from __future__ import annotations

import math

import torch

from rulelab.studies.coexistence.analyses.fourier import n_frequencies


def analytic_solution(
    p: int,
    width: int,
    *,
    n_members: int = 1,
    op: str = "add",
    seed: int = 0,
    amplitude: float | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
    """``(U [E, M, P], V [E, M, P], W [E, P, M], μ = None)`` for the quadratic network."""
    if op == "mul":
        raise ValueError("analytic_solution: op 'mul' is not supported (use 'add' or 'sub')")
    if op not in ("add", "sub"):
        raise ValueError(f"analytic_solution: op must be 'add' or 'sub', got {op!r}")
    K = n_frequencies(p)
    if K < 1 or width < 1 or n_members < 1:
        raise ValueError(
            f"analytic_solution: need p ≥ 3, width ≥ 1, n_members ≥ 1 "
            f"(got p={p}, width={width}, n_members={n_members})"
        )
    E, M, P = n_members, width, p
    A = (2.0 / M) ** (1 / 3) if amplitude is None else float(amplitude)

    gen = torch.Generator().manual_seed(int(seed))
    phi1 = torch.rand(E, M, generator=gen, dtype=torch.float64) * (2 * math.pi)  # [E, M]
    phi2 = torch.rand(E, M, generator=gen, dtype=torch.float64) * (2 * math.pi)  # [E, M]
    sigma = 1 + torch.arange(M, dtype=torch.float64) % K  # [M]
    theta = 2 * math.pi * sigma[:, None] * torch.arange(P, dtype=torch.float64) / P  # [M, P]

    sign_b = 1.0 if op == "add" else -1.0
    U = A * torch.cos(theta + phi1[..., None])  # [E, M, P]
    V = A * torch.cos(sign_b * theta + phi2[..., None])  # [E, M, P]
    Wt = A * torch.cos(-theta - (phi1 + phi2)[..., None])  # [E, M, P]: row m is w_m(q)
    return U.to(dtype), V.to(dtype), Wt.transpose(1, 2).contiguous().to(dtype), None


def all_pairs(p: int, op: str = "add") -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair ``(a, b)`` with its label: ``x [P², 2]`` int64, ``y [P²]`` (add, sub or mul)."""
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    x = torch.stack((a.reshape(-1), b.reshape(-1)), dim=-1)  # [P², 2]
    ops = {"add": a + b, "sub": a - b, "mul": a * b}
    if op not in ops:
        raise ValueError(f"all_pairs: op must be one of {sorted(ops)}, got {op!r}")
    return x, ops[op].reshape(-1) % p
