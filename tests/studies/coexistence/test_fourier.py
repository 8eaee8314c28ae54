"""Frequency filtering (SPEC M.4.3): DFT conventions, projection, FF evaluation, phase check."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rulelab.studies.coexistence.analyses import fourier
from rulelab.studies.coexistence.analyses.analytic import all_pairs, analytic_solution
from rulelab.studies.coexistence.analyses.fourier import (
    dominant_frequency,
    evaluate_ff,
    filter_network,
    masked_accuracy,
    network_accuracy,
    phase_sum_error,
    phases,
    project_onto_frequency,
    spectrum,
)


def _random(E=3, M=16, P=13, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    U, V = (torch.randn(E, M, P, generator=g, dtype=dtype) for _ in range(2))
    W = torch.randn(E, P, M, generator=g, dtype=dtype)
    mu = torch.randn(E, P, generator=g, dtype=dtype)
    return U, V, W, mu


def _cos(P, freq, phase, amp=1.0):
    return amp * torch.cos(2 * math.pi * freq * torch.arange(P, dtype=torch.float64) / P + phase)


def test_spectrum_matches_numpy():
    U, _, _, _ = _random()
    np.testing.assert_allclose(spectrum(U).numpy(), np.fft.rfft(U.numpy(), axis=-1), atol=1e-12)


def test_dominant_frequency_matches_numpy_full_fft_with_folding():
    U, V, W, _ = _random(P=13)
    P = 13
    power = sum(
        np.abs(np.fft.fft(t, axis=-1)) ** 2
        for t in (U.numpy(), V.numpy(), W.transpose(1, 2).numpy())
    )  # [E, M, P]
    folded = power[..., 1 : (P - 1) // 2 + 1] + power[..., P - 1 : P // 2 : -1]  # k and P−k
    expected = folded.argmax(-1) + 1
    np.testing.assert_array_equal(dominant_frequency(U, V, W).numpy(), expected)


def test_pure_cosine_frequency_and_phase_recovered():
    P, E, M = 17, 2, 3
    freqs = torch.tensor([[3, 1, 8], [5, 2, 7]])
    ph = torch.tensor([[0.7, -2.1, 3.0], [1.5, 0.0, -0.4]], dtype=torch.float64)
    U = torch.stack(
        [
            torch.stack([_cos(P, int(freqs[e, m]), float(ph[e, m])) for m in range(M)])
            for e in range(E)
        ]
    )
    # V, W hold the same frequency with other amplitudes / phases; W is [E, P, M].
    V = 0.5 * U.roll(1, dims=-1)
    W = (2.0 * U.roll(3, dims=-1)).transpose(1, 2)
    freq = dominant_frequency(U, V, W)
    assert torch.equal(freq, freqs)
    torch.testing.assert_close(phases(U, freq), ph, atol=1e-12, rtol=0)
    # G of a pure cosine is the cosine itself.
    torch.testing.assert_close(project_onto_frequency(U, freq), U, atol=1e-12, rtol=0)


def test_projection_is_least_squares_on_cos_sin():
    U, _, _, _ = _random(E=2, M=5, P=11)
    P = 11
    freq = torch.tensor([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])
    G = project_onto_frequency(U, freq)
    i = np.arange(P)
    for e in range(2):
        for m in range(5):
            B = np.stack(
                [
                    np.cos(2 * np.pi * freq[e, m].item() * i / P),
                    np.sin(2 * np.pi * freq[e, m].item() * i / P),
                ],
                1,
            )
            coef, *_ = np.linalg.lstsq(B, U[e, m].numpy(), rcond=None)
            np.testing.assert_allclose(G[e, m].numpy(), B @ coef, atol=1e-12)
    torch.testing.assert_close(project_onto_frequency(G, freq), G)  # idempotent


def test_filter_separates_dominant_from_other_frequency():
    # Analytic neurons plus a weaker component at another frequency: G = analytic, R = the rest.
    P, M = 23, 64
    U, V, W, _ = analytic_solution(P, M, n_members=2, dtype=torch.float64)
    freq = dominant_frequency(U, V, W)
    other = (freq % ((P - 1) // 2)) + 1  # a different frequency per neuron
    i = torch.arange(P, dtype=torch.float64)
    extra = 0.1 * torch.cos(2 * math.pi * other[..., None] * i / P + 0.3)  # [E, M, P]
    (UG, VG, WG, _), (UR, VR, WR, muR) = filter_network(U + extra, V + extra, W, None)
    torch.testing.assert_close(UG, U)
    torch.testing.assert_close(VG, V)
    torch.testing.assert_close(UR, extra)
    torch.testing.assert_close(WR, torch.zeros_like(W), atol=1e-12, rtol=0)
    assert muR is None


def test_ff_leaves_analytic_solution_unchanged():
    P = 23
    U, V, W, mu = analytic_solution(P, 256, n_members=2)
    x, y = all_pairs(P)
    (UG, VG, WG, _), (UR, VR, WR, _) = filter_network(U, V, W, mu)
    for G, orig in ((UG, U), (VG, V), (WG, W)):
        torch.testing.assert_close(G, orig, atol=1e-5, rtol=0)
    for R in (UR, VR, WR):
        assert R.abs().max() < 1e-5
    res = evaluate_ff(U, V, W, mu, x, y, None, "quadratic")
    assert set(res) == {"original", "G", "G_no_mu", "R", "R_mu"}
    for net in ("original", "G", "G_no_mu"):
        assert torch.equal(res[net]["all"], torch.ones(2))
    assert (res["R"]["all"] < 0.2).all()


def test_phase_sum_error_zero_for_analytic_and_large_for_random():
    for op in ("add", "sub"):
        U, V, W, _ = analytic_solution(23, 128, n_members=3, op=op)
        err = phase_sum_error(U, V, W, op=op)
        assert err.shape == (3,) and (err < 1e-5).all()
        other = "sub" if op == "add" else "add"
        assert (phase_sum_error(U, V, W, op=other) > 0.5).all()  # op (sign) matters
    U, V, W, _ = _random(E=3, M=256, P=23)
    err = phase_sum_error(U, V, W)
    assert ((err > 1.2) & (err < 1.9)).all()  # uniform residual: mean |r| = π/2
    with pytest.raises(ValueError, match="op"):
        phase_sum_error(U, V, W, op="mul")


def test_masked_accuracy_by_hand():
    correct = torch.tensor([[True, False, True, True], [False, False, True, False]])
    masks = {
        "a": torch.tensor([[True, True, False, False], [True, True, True, True]]),
        "empty": torch.zeros(2, 4, dtype=torch.bool),
    }
    out = masked_accuracy(correct, masks)
    torch.testing.assert_close(out["a"], torch.tensor([0.5, 0.25]))
    assert torch.isnan(out["empty"]).all()
    torch.testing.assert_close(masked_accuracy(correct, None)["all"], torch.tensor([0.75, 0.25]))
    shared = masked_accuracy(correct, {"a": torch.tensor([True, True, False, False])})
    torch.testing.assert_close(shared["a"], torch.tensor([0.5, 0.0]))


def test_chunked_predictions_match_one_shot(monkeypatch):
    U, V, W, mu = _random(E=2, M=8, P=11, dtype=torch.float32)
    x, y = all_pairs(11)
    full = network_accuracy(U, V, W, mu, x, y, None, "relu")
    monkeypatch.setattr(fourier, "_CHUNK_ELEMS", 8 * 2 * 7)  # 7 rows per chunk
    torch.testing.assert_close(network_accuracy(U, V, W, mu, x, y, None, "relu"), full)


def test_vectorized_matches_per_member_loop():
    E, P = 3, 13
    U, V, W, mu = _random(E=E, M=24, P=P, dtype=torch.float32)
    x, y = all_pairs(P)
    g = torch.Generator().manual_seed(1)
    y = torch.randint(0, P, (E, P * P), generator=g)  # per-member labels
    masks = {
        "even": (torch.arange(P * P) % 2 == 0).expand(E, -1).clone(),
        "rand": torch.rand(E, P * P, generator=g) < 0.3,
    }
    freq = dominant_frequency(U, V, W)
    err = phase_sum_error(U, V, W)
    ff = evaluate_ff(U, V, W, mu, x, y, masks, "relu")
    for e in range(E):
        s = slice(e, e + 1)
        assert torch.equal(dominant_frequency(U[s], V[s], W[s]), freq[s])
        torch.testing.assert_close(phase_sum_error(U[s], V[s], W[s]), err[s])
        ff_e = evaluate_ff(U[s], V[s], W[s], mu[s], x, y[s], {k: m[s] for k, m in masks.items()})
        for net, by_subset in ff_e.items():
            for subset, acc in by_subset.items():
                torch.testing.assert_close(acc, ff[net][subset][s])


def test_keep_dc_keeps_a_constant_offset_so_g_equals_the_network():
    # Analytic neurons plus a constant per neuron (its DC term). Without keep_dc, G drops the
    # offset (G = the analytic part); with it, G is the whole network — weights and predictions
    # exactly. Fails on the old code, which had no keep_dc.
    P, M = 23, 256
    U, V, W, _ = analytic_solution(P, M, n_members=2, dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    cu, cv = (0.3 * torch.randn(2, M, 1, generator=g, dtype=torch.float64) for _ in range(2))
    cw = 0.3 * torch.randn(2, 1, M, generator=g, dtype=torch.float64)
    Uo, Vo, Wo = U + cu, V + cv, W + cw
    (UG, VG, WG, _), (UR, VR, WR, _) = filter_network(Uo, Vo, Wo, None, keep_dc=True)
    for G, orig in ((UG, Uo), (VG, Vo), (WG, Wo)):
        torch.testing.assert_close(G, orig, atol=1e-12, rtol=0)
    for R in (UR, VR, WR):
        assert R.abs().max() < 1e-12
    (UG0, VG0, _, _), _ = filter_network(Uo, Vo, Wo, None)
    torch.testing.assert_close(UG0, U, atol=1e-12, rtol=0)  # the default drops the offset
    assert (UG0 - Uo).abs().max() > 0.1
    x, y = all_pairs(P)
    pred = fourier.predictions(Uo, Vo, Wo, None, x.expand(2, -1, -1), "relu")
    kept = fourier.predictions(UG, VG, WG, None, x.expand(2, -1, -1), "relu")
    assert torch.equal(kept, pred)
    res = evaluate_ff(Uo, Vo, Wo, None, x, y, None, "relu", keep_dc=True)
    torch.testing.assert_close(res["G"]["all"], res["original"]["all"])


def test_weighted_phase_error_ignores_dead_neurons_with_random_phases():
    # 64 analytic neurons (phase residual 0) and 64 dead ones: amplitude 1e-4 at a frequency,
    # with phases whose residual is far from 0. The unweighted mean counts them as much as the
    # live ones; the power-weighted one gives them ~1e-8 of the weight. Fails on the old code
    # (no weighted option).
    P, M = 23, 64
    U, V, W, _ = analytic_solution(P, M, n_members=2, dtype=torch.float64)
    g = torch.Generator().manual_seed(7)
    i = torch.arange(P, dtype=torch.float64)
    freq = torch.randint(1, (P - 1) // 2 + 1, (2, M, 1), generator=g)
    ph = 2 * math.pi * torch.rand(3, 2, M, 1, generator=g, dtype=torch.float64)
    dead = [1e-4 * torch.cos(2 * math.pi * freq * i / P + p) for p in ph]  # [E, M, P] each
    Ud, Vd, Wd = torch.cat((U, dead[0]), 1), torch.cat((V, dead[1]), 1), torch.cat(
        (W, dead[2].transpose(1, 2)), 2)
    plain = phase_sum_error(Ud, Vd, Wd)
    weighted = phase_sum_error(Ud, Vd, Wd, weighted=True)
    assert (plain > 0.3).all()  # ≈ half of π/2: the dead half is random
    assert (weighted < 1e-6).all()
    torch.testing.assert_close(phase_sum_error(U, V, W, weighted=True), phase_sum_error(U, V, W))
    zero = torch.zeros_like(U)
    assert torch.isnan(phase_sum_error(zero, zero, torch.zeros_like(W), weighted=True)).all()


def test_frequency_power_is_the_dominant_bin_power():
    U, V, W, _ = _random(E=2, M=5, P=13)
    freq = dominant_frequency(U, V, W)
    spec = sum(np.abs(np.fft.rfft(t, axis=-1)) ** 2
               for t in (U.numpy(), V.numpy(), W.transpose(1, 2).numpy()))
    want = np.take_along_axis(spec, freq.numpy()[..., None], -1)[..., 0]
    np.testing.assert_allclose(fourier.frequency_power(U, V, W).numpy(), want, rtol=1e-12)
