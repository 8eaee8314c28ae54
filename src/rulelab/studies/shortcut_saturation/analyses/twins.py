"""Aligned twins of adversarial MPSP sequences, for cross-split patching (SPEC S.4.4).

For an adversarial sequence (shortcut ``s`` ≠ label ``y``) its *aligned twin* keeps the label
and moves the shortcut onto it:

- the shortcut element — the max (its first occurrence) for ``"max"``, ``x_1`` for ``"first"`` —
  is shifted by ``δ ≡ y − s (mod k)``, so the new shortcut is ``y``;
- one other element (the *compensator*) is shifted by ``ε ≡ −δ (mod k)``, so
  ``sum mod k`` — the label — is unchanged.

Every value stays in ``[0, V)``. For ``"max"`` the shifted element must be the twin's unique
maximum: strictly above the compensator and every untouched element (a downward ``δ`` may use
the compensator to lower a runner-up that would otherwise block it).

Choices (documented, deterministic given ``rng``):

- ``δ`` is tried in the order ``d, d − k, d + k`` with ``d = (y − s) mod k ∈ [1, k)``, i.e. the
  smallest upward shift, then the smallest downward one, then the next upward one; the first
  that admits a valid compensator in the smallest ε tier (below) is used.
- ``ε ≡ −δ (mod k)`` in tiers of growing size: tier ``t`` offers ``ε ∈ {r + t·k, r − (t+1)·k}``
  with ``r = (−δ) mod k`` (tier 0: one small step up or down, ``|ε| < k``). The smallest tier
  with any valid compensator is used — before any larger δ — and within it the compensator
  position and ``ε`` are drawn uniformly from all valid (position, ε) pairs. Larger tiers are
  needed when the compensator is a tied maximum that must drop below the shifted one
  (``[0, 0, 5, 5]``, V = 6, k = 2 → ``[0, 0, 4, 2]``).
- Larger ``|δ|`` are not tried: a shortcut value outside ``{d, d − k, d + k}`` is out of range
  or lower than one that is already blocked. A row gets ``ok = False`` when no twin exists that
  changes the shortcut element and one other element (tested against a brute-force search over
  every sequence of small spaces); its twin row is then an unchanged copy of ``x``, so shapes
  stay aligned: select ``x[ok], twins[ok]`` before patching.
"""

from __future__ import annotations

import numpy as np

from rulelab.studies.shortcut_saturation.task import SHORTCUTS, label_of, shortcut_of


def aligned_twins(
    x: np.ndarray, label_mod: int, shortcut_kind: str, vocab: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Aligned twins of adversarial sequences ``x [N, n]`` → ``(twins [N, n], ok [N] bool)``.

    SPEC S.4.4: same label, shortcut moved to equal the label, every value in ``[0, vocab)``,
    for ``"max"`` the shifted max stays the unique max. Raises if a row is not adversarial.
    Rows where ``ok`` is False are returned unchanged (see the module docstring).
    """
    if shortcut_kind not in SHORTCUTS:
        raise ValueError(f"shortcut_kind must be one of {SHORTCUTS}, got {shortcut_kind!r}")
    x = np.asarray(x, dtype=np.int64)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"x must be [N, n] with n ≥ 2, got shape {x.shape}")
    if x.size and (x.min() < 0 or x.max() >= vocab):
        raise ValueError(f"values of x must lie in [0, {vocab})")
    k = int(label_mod)
    N, n = x.shape
    y, s = label_of(x, k), shortcut_of(x, k, shortcut_kind)
    if np.any(y == s):
        raise ValueError("aligned_twins needs adversarial rows (shortcut ≠ label)")
    rows = np.arange(N)

    # Shortcut element p [N] and its value m [N].
    p = x.argmax(1) if shortcut_kind == "max" else np.zeros(N, dtype=np.int64)
    m = x[rows, p]
    d = (y - s) % k  # [N], in [1, k)
    deltas = d[:, None] + k * np.array([0, -1, 1])  # [N, C] candidate δ in preference order
    new_m = m[:, None] + deltas  # [N, C]
    shift_ok = (new_m >= 0) & (new_m < vocab)  # [N, C]

    r = (-d) % k  # [N]: ε ≡ −δ (mod k), the same residue for every candidate δ of a row
    tiers = np.arange(-(-vocab // k) + 1)  # enough for any in-range compensated value
    eps = np.stack([r[:, None] + tiers * k, r[:, None] - (tiers + 1) * k], axis=-1)  # [N, T, 2]
    new_q = x[:, None, :, None] + eps[:, :, None, :]  # [N, T, n, 2] compensated values
    comp_ok = (new_q >= 0) & (new_q < vocab)  # [N, T, n, 2]
    comp_ok &= np.arange(n)[None, None, :, None] != p[:, None, None, None]  # not the shortcut
    C = deltas.shape[1]
    comp_ok = np.broadcast_to(comp_ok[:, :, None], (N, len(tiers), C, n, 2))  # [N, T, C, n, 2]
    big_m = new_m[:, None, :, None, None]  # [N, 1, C, 1, 1]
    if shortcut_kind == "max":
        # The shifted element must be the unique max of the twin: above the compensator and
        # above every untouched element. With o1 ≥ o2 the two largest values besides p, the
        # largest untouched one is o2 if the compensator holds o1, else o1 (so lowering a
        # runner-up tied with the max can make room for a downward δ).
        srt = np.sort(x, axis=1)  # [N, n]; srt[:, -1] = m
        o1 = srt[:, -2]
        o2 = srt[:, -3] if n > 2 else np.full(N, -1)
        rest = np.where(x == o1[:, None], o2[:, None], o1[:, None])  # [N, n] max if q = j
        comp_ok = comp_ok & (new_q[:, :, None] < big_m)
        comp_ok = comp_ok & (rest[:, None, None, :, None] < big_m)
    valid = comp_ok & shift_ok[:, None, :, None, None]  # [N, T, C, n, 2]

    has = valid.any(axis=(3, 4)).reshape(N, -1)  # [N, T·C]: tier-major, then δ preference
    ok = has.any(1)  # [N]
    first = has.argmax(1)  # [N] smallest tier, then first valid δ in preference order
    t, c = first // C, first % C
    choice = valid[rows, t, c].reshape(N, n * 2)  # [N, n·2] valid (position, ε) pairs
    # Uniform pick among valid pairs: argmax of random scores restricted to the valid ones.
    pick = np.where(choice, rng.random((N, n * 2)), -1.0).argmax(1)  # [N]
    q, e = pick // 2, pick % 2

    twins = x.copy()
    sel = rows[ok]
    twins[sel, p[ok]] = new_m[sel, c[ok]]
    twins[sel, q[ok]] = new_q[sel, t[ok], q[ok], e[ok]]
    return twins, ok
