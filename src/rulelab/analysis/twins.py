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
  that admits a valid compensator is used.
- ``ε ∈ {r, r − k}`` with ``r = (−δ) mod k`` (one small step up or down, ``|ε| < k``); the
  compensator position and ``ε`` are drawn uniformly from all valid (position, ε) pairs.
- Rows with no valid twin get ``ok = False`` and their twin row is an unchanged copy of ``x``,
  so shapes stay aligned; select ``x[ok], twins[ok]`` before patching.
"""

from __future__ import annotations

import numpy as np

from rulelab.tasks.mpsp import SHORTCUTS, label_of, shortcut_of


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
    eps = np.stack([r, r - k], axis=1)  # [N, 2]
    new_q = x[:, :, None] + eps[:, None, :]  # [N, n, 2] compensated values
    comp_ok = (new_q >= 0) & (new_q < vocab)  # [N, n, 2]
    comp_ok &= np.arange(n)[None, :, None] != p[:, None, None]  # not the shortcut element
    comp_ok = np.broadcast_to(comp_ok[:, None], (N, deltas.shape[1], n, 2))  # [N, C, n, 2]
    if shortcut_kind == "max":
        # The shifted element must be the unique max of the twin: above the compensator and
        # above every untouched element. With o1 ≥ o2 the two largest values besides p, the
        # largest untouched one is o2 if the compensator holds o1, else o1 (so lowering a
        # runner-up tied with the max can make room for a downward δ).
        srt = np.sort(x, axis=1)  # [N, n]; srt[:, -1] = m
        o1 = srt[:, -2]
        o2 = srt[:, -3] if n > 2 else np.full(N, -1)
        rest = np.where(x == o1[:, None], o2[:, None], o1[:, None])  # [N, n] max if q = j
        comp_ok = comp_ok & (new_q[:, None] < new_m[:, :, None, None])
        comp_ok = comp_ok & (rest[:, None, :, None] < new_m[:, :, None, None])
    valid = comp_ok & shift_ok[:, :, None, None]  # [N, C, n, 2]

    has = valid.any(axis=(2, 3))  # [N, C]
    ok = has.any(1)  # [N]
    c = has.argmax(1)  # [N] first valid δ in preference order
    choice = valid[rows, c].reshape(N, n * 2)  # [N, n·2] valid (position, ε) pairs for that δ
    # Uniform pick among valid pairs: argmax of random scores restricted to the valid ones.
    pick = np.where(choice, rng.random((N, n * 2)), -1.0).argmax(1)  # [N]
    q, e = pick // 2, pick % 2

    twins = x.copy()
    sel = rows[ok]
    twins[sel, p[ok]] = new_m[sel, c[ok]]
    twins[sel, q[ok]] = new_q[sel, q[ok], e[ok]]
    return twins, ok
