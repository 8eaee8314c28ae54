// The step's weight matmuls in fp32 (step_kernels.cpp): products (gemm), their weights'
// gradients (gram), bias gradients, and the short dot-product chains, each in register blocks
// that never change a sum's order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "step_vectors.h"

namespace {

// Y[o][r] = (acc ? Y[o][r] : 0) + bias[o] + Σ_i A[o·ao + i·ai] · X[i][r], for o < m, r < R
// (R a multiple of 16); the sum over i in order, one fused multiply-add per term. A block of
// MO outputs × NV vectors of rows keeps MO·NV sums in registers.
template <int MO, int NV>
inline void gemm_block(const float* A, int64_t ao, int64_t ai, const float* X, int64_t ldx,
                       float* Y, int64_t ldy, int64_t o0, int64_t k, int64_t r,
                       const float* bias, bool acc) {
  vf c[MO][NV];
  for (int u = 0; u < MO; ++u) {
    const float b0 = bias ? bias[o0 + u] : 0.0f;
    for (int w = 0; w < NV; ++w)
      c[u][w] = (acc ? ld(Y + (o0 + u) * ldy + r + w * LW) : bc(0.0f)) + b0;
  }
  for (int64_t i = 0; i < k; ++i) {
    vf x[NV];
    for (int w = 0; w < NV; ++w) x[w] = ld(X + i * ldx + r + w * LW);
    for (int u = 0; u < MO; ++u) {
      const vf a = bc(A[(o0 + u) * ao + i * ai]);
      for (int w = 0; w < NV; ++w) c[u][w] = fma(a, x[w], c[u][w]);
    }
  }
  for (int u = 0; u < MO; ++u)
    for (int w = 0; w < NV; ++w) st(Y + (o0 + u) * ldy + r + w * LW, c[u][w]);
}

template <int N>
using Int = std::integral_constant<int, N>;

// f(Int<n>{}) for a block size 1 ≤ n ≤ MAX known only at run time
template <int MAX, class F>
inline void sized(int64_t n, F&& f) {
  if constexpr (MAX > 1) {
    if (n < MAX) return sized<MAX - 1>(n, f);
  }
  f(Int<MAX>{});
}

// 0 ≤ start < n in blocks of at most MAX, as even as may be (sizes differ by one at most: 32
// outputs as 6, 6, 5, 5, 5, 5, not 6 × 5 and two of one, which keep too few sums in flight):
// f(Int<size>{}, start) for each block in order.
template <int MAX, class F>
inline void even_blocks(int64_t n, F&& f) {
  const int64_t blocks = (n + MAX - 1) / MAX, base = n / std::max<int64_t>(blocks, 1),
                wide = n - base * blocks;  // the first `wide` blocks hold base + 1
  int64_t start = 0;
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t size = base + (j < wide ? 1 : 0);
    sized<MAX>(size, [&](auto sz) { f(sz, start); });
    start += size;
  }
}

// A product's register blocks over m outputs × R rows, in one fixed order:
// block(Int<MO>{}, Int<NV>{}, o0, r) for blocks of MO outputs × NV vectors of rows.
template <class Block>
inline void gemm_blocks(int64_t m, int64_t R, Block&& block) {
  int64_t r = 0;
  for (; r + GEMM_V * LW <= R; r += GEMM_V * LW)
    even_blocks<GEMM_O>(m, [&](auto mo, int64_t o) { block(mo, Int<GEMM_V>{}, o, r); });
  for (; r < R; r += LW)
    even_blocks<GEMM_O>(m, [&](auto mo, int64_t o) { block(mo, Int<1>{}, o, r); });
}

// A gram's register blocks over m × k sums: block(Int<MO>{}, Int<MI>{}, o0, i0).
template <class Block>
inline void gram_blocks(int64_t m, int64_t k, Block&& block) {
  even_blocks<GRAM_O>(m, [&](auto mo, int64_t o) {
    even_blocks<GRAM_I>(k, [&](auto mi, int64_t i) { block(mo, mi, o, i); });
  });
}

void gemm(const float* A, int64_t ao, int64_t ai, const float* X, int64_t ldx, float* Y,
          int64_t ldy, int64_t m, int64_t k, int64_t R, const float* bias, bool acc) {
  RL_CLOCK(rl_mm_cycles);
  gemm_blocks(m, R, [&](auto mo, auto nv, int64_t o, int64_t r) {
    gemm_block<decltype(mo)::value, decltype(nv)::value>(A, ao, ai, X, ldx, Y, ldy, o, k, r,
                                                         bias, acc);
  });
}

#if defined(__AVX512F__)
// Lanes 0–7 of the result: a's lanes summed pairwise (j + j+8), lanes 8–15: b's. Applied as a
// tree to 16 vectors, it leaves each one's sum over its lanes in one lane (sums16): sum16's
// tree, 16 sums at once.
static inline vf fold(vf a, vf b, int level) {
  switch (level) {
    case 0:
      return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
             __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    case 1:
      return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
             __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    case 2:
      return __builtin_shufflevector(a, b, 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
             __builtin_shufflevector(a, b, 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
    default:
      return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
             __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  }
}

// lane j of the result: the sum of c[j]'s 16 lanes (sum16's tree)
static inline vf sums16(vf* c) {
  vf a[8], b[4], d[2];
  for (int j = 0; j < 8; ++j) a[j] = fold(c[2 * j], c[2 * j + 1], 0);
  for (int j = 0; j < 4; ++j) b[j] = fold(a[2 * j], a[2 * j + 1], 1);
  for (int j = 0; j < 2; ++j) d[j] = fold(b[2 * j], b[2 * j + 1], 2);
  return fold(d[0], d[1], 3);
}
#else
// sum16's tree for 8-lane vectors, across pairs of sums by in-register shuffles (AVX2's
// gram blocks hold 12 sums; one at a time, each took ten instructions and a trip through the
// stack: a sixth of a gram at the ladder's widths). Lanes 0–3 of the result at level 0: a's
// lane j + lane j+4, lanes 4–7: b's; level 1: j + j+2; level 2: j + j+1.
static inline vf fold8(vf a, vf b, int level) {
  switch (level) {
    case 0:
      return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11) +
             __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15);
    case 1:
      return __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13) +
             __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15);
    default:
      return __builtin_shufflevector(a, b, 0, 8, 2, 10, 4, 12, 6, 14) +
             __builtin_shufflevector(a, b, 1, 9, 3, 11, 5, 13, 7, 15);
  }
}

// v[0, S) folded pairwise at `level` into v[0, ⌈S/2⌉) (an odd last one with itself)
template <int S>
static inline void fold8_all(vf* v, int level) {
  for (int m = 0; m < (S + 1) / 2; ++m)
    v[m] = fold8(v[2 * m], 2 * m + 1 < S ? v[2 * m + 1] : v[2 * m], level);
}

// After sums8<S>(a): sum j of a[j] (its 16 lanes as a[j] + the second vector, already added)
// lies in a[j / 8], lane SUMS8_LANE[j % 8] (j's three bits reversed).
constexpr int SUMS8_LANE[8] = {0, 4, 2, 6, 1, 5, 3, 7};
template <int S>
static inline void sums8(vf* a) {
  constexpr int S1 = (S + 1) / 2, S2 = (S1 + 1) / 2;
  fold8_all<S>(a, 0);
  fold8_all<S1>(a, 1);
  fold8_all<S2>(a, 2);
}
#endif

// G[o·go + i·gi] += Σ_r D[o][r] · X[i][r] for o < m, i < k: each tile's sum formed in 16 lanes
// over the rows in order, then added across the lanes by sum16's tree.
template <int MO, int MI>
inline void gram_block(const float* D, int64_t ldd, const float* X, int64_t ldx, int64_t R,
                       float* G, int64_t go, int64_t gi, int64_t o0, int64_t i0) {
  vf c[MO * MI * NH];
  for (int h = 0; h < NH; ++h) {  // one vector of the 16 lanes at a time: lanes h·LW, …
    vf s[MO * MI];
    for (int j = 0; j < MO * MI; ++j) s[j] = bc(0.0f);
    for (int64_t r = h * LW; r < R; r += RL) {
      vf x[MI];  // each operand loaded once, into a register (pinned)
      for (int w = 0; w < MI; ++w) x[w] = pinned(ld(X + (i0 + w) * ldx + r));
      for (int u = 0; u < MO; ++u) {
        const vf dv = pinned(ld(D + (o0 + u) * ldd + r));
        for (int w = 0; w < MI; ++w) s[u * MI + w] = fma(dv, x[w], s[u * MI + w]);
      }
    }
    for (int j = 0; j < MO * MI; ++j) c[j * NH + h] = s[j];
  }
#if defined(__AVX512F__)
  if constexpr (MO * MI == 16) {
    const vf s = sums16(c);
    for (int u = 0; u < MO; ++u)
      for (int w = 0; w < MI; ++w) G[(o0 + u) * go + (i0 + w) * gi] += s[u * MI + w];
    return;
  }
#else
  if constexpr (MO * MI > 1) {
    vf a[MO * MI];  // lane j + lane j+8: the first step of sum16's tree
    for (int j = 0; j < MO * MI; ++j) a[j] = c[j * NH] + c[j * NH + 1];
    sums8<MO * MI>(a);
    for (int u = 0; u < MO; ++u)
      for (int w = 0; w < MI; ++w) {
        const int j = u * MI + w;
        G[(o0 + u) * go + (i0 + w) * gi] += a[j / 8][SUMS8_LANE[j % 8]];
      }
    return;
  }
#endif
  for (int u = 0; u < MO; ++u)
    for (int w = 0; w < MI; ++w) G[(o0 + u) * go + (i0 + w) * gi] += sum16(c + (u * MI + w) * NH);
}

void gram(const float* D, int64_t ldd, int64_t m, const float* X, int64_t ldx, int64_t k,
          int64_t R, float* G, int64_t go, int64_t gi) {
  RL_CLOCK(rl_mm_cycles);
  gram_blocks(m, k, [&](auto mo, auto mi, int64_t o, int64_t i) {
    gram_block<decltype(mo)::value, decltype(mi)::value>(D, ldd, X, ldx, R, G, go, gi, o, i);
  });
}

// g[o] += Σ_r D[o][r]
void bias_grad(const float* D, int64_t ldd, int64_t m, int64_t R, float* g) {
  for (int64_t o = 0; o < m; ++o) {
    vf c[NH];
    for (int h = 0; h < NH; ++h) c[h] = bc(0.0f);
    for (int64_t r = 0; r < R; r += RL)
      for (int h = 0; h < NH; ++h) c[h] += ld(D + o * ldd + r + h * LW);
    g[o] += sum16(c);
  }
}

// The attention's sums over a few positions or features, NB of them side by side:
// out[b] = Σ_j a[j·as] · x[j·xs + b·bs] for b < NB, each an fma chain from 0 in j order. One
// chain at a time waits on each FMA's latency (4 cycles on Zen 4, a quarter of its rate);
// side by side, each chain adds the same products in the same order: the same bits.
template <int NB>
inline void chains(const float* a, int64_t as, const float* x, int64_t xs, int64_t bs,
                   int64_t n, va* out) {
  va c[NB];
  for (int b = 0; b < NB; ++b) c[b] = bca(0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const va av = lda(a + j * as);
    for (int b = 0; b < NB; ++b) c[b] = fma(av, lda(x + j * xs + b * bs), c[b]);
  }
  for (int b = 0; b < NB; ++b) out[b] = c[b];
}

// out[b] for every b < m, in blocks of 4, then 2, then 1 (chains<NB> for each)
inline void chains_all(const float* a, int64_t as, const float* x, int64_t xs, int64_t bs,
                       int64_t n, int64_t m, va* out) {
  int64_t b = 0;
  for (; b + 4 <= m; b += 4) chains<4>(a, as, x + b * bs, xs, bs, n, out + b);
  for (; b + 2 <= m; b += 2) chains<2>(a, as, x + b * bs, xs, bs, n, out + b);
  for (; b < m; ++b) chains<1>(a, as, x + b * bs, xs, bs, n, out + b);
}

}  // namespace
