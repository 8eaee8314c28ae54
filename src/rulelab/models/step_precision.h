// The step's weight matmuls in its precision (step_kernels.cpp): bf16 operands and their
// VDPBF16PS blocks (AVX-512-BF16 builds only), and MatMul, which a step calls for every
// product and gram in fp32 or bf16; with the operands, weights and scratch it hands them.
#pragma once

#include <cstdint>

#include "step_matmuls.h"

namespace {

// ---- bf16 operands (--precision bf16; AVX-512-BF16 builds only) -----------------------------
// A weight matmul in bf16 takes both operands rounded to bf16 (to nearest even, as
// VCVTNE2PS2BF16 rounds) and sums their products in fp32: VDPBF16PS adds two products to each
// of 16 fp32 lanes, the pair's high half first, each sum rounded (products of two bf16 are exact
// in fp32), denormals flushed. A product's input is held as feature pairs, word = bf16(x[i]) << 16
// | bf16(x[i+1]), so its sum over the features runs i, i+1, … as the fp32 chain does; a gram's
// operands as rows of bf16, where lane j sums rows 2j+1, 2j of every block of 32 (zero past R).
// Everything else (attention's core, LayerNorm, the loss, biases, Adam) stays fp32.
#if defined(__AVX512BF16__)
constexpr bool BF16_BUILD = true;
alignas(64) static const uint16_t PAIR_ORDER[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21,
                                                    6, 22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27,
                                                    12, 28, 13, 29, 14, 30, 15, 31};
// 16 words, lane j = bf16(hi[j]) << 16 | bf16(lo[j])
static inline __m512i pair_words(__m512 hi, __m512 lo) {
  const __m512i halves = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // 0–15: lo's, 16–31: hi's
  return _mm512_permutexvar_epi16(_mm512_load_si512(PAIR_ORDER), halves);
}
static inline uint32_t pair_word(float hi, float lo) {
  return static_cast<uint32_t>(
      _mm_cvtsi128_si32(_mm512_castsi512_si128(pair_words(_mm512_set1_ps(hi), _mm512_set1_ps(lo)))));
}

// P[j][r] = the pair (X[2j][r], X[2j+1][r]) for r < R, j < ⌈k/2⌉ (0 past k), rows ldx apart
void to_pairs(const float* X, int64_t ldx, int64_t k, int64_t R, uint32_t* P) {
  for (int64_t j = 0; 2 * j < k; ++j) {
    const float* hi = X + 2 * j * ldx;
    const float* lo = 2 * j + 1 < k ? hi + ldx : nullptr;
    for (int64_t r = 0; r < R; r += 16)
      _mm512_storeu_si512(P + j * ldx + r, pair_words(_mm512_loadu_ps(hi + r),
                                                      lo ? _mm512_loadu_ps(lo + r) : _mm512_setzero_ps()));
  }
}

// Q[i][r] = bf16(X[i][r]) for r < R, 0 for R ≤ r < ldq (a multiple of 32)
void to_rows(const float* X, int64_t ldx, int64_t k, int64_t R, uint16_t* Q, int64_t ldq) {
  for (int64_t i = 0; i < k; ++i)
    for (int64_t r = 0; r < ldq; r += 32) {
      const __m512 lo = r < R ? _mm512_loadu_ps(X + i * ldx + r) : _mm512_setzero_ps();
      const __m512 hi = r + 16 < R ? _mm512_loadu_ps(X + i * ldx + r + 16) : _mm512_setzero_ps();
      _mm512_storeu_si512(Q + i * ldq + r, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
}

// gemm's sum with feature pairs: Y[o][r] = (acc ? Y : 0) + bias[o] + Σ_j Ap[o][j] · X[j][r]
template <int MO, int NV>
inline void gemm_bf16_block(const uint32_t* Ap, int64_t kp, const uint32_t* X, int64_t ldx,
                            float* Y, int64_t ldy, int64_t o0, int64_t r, const float* bias,
                            bool acc) {
  __m512 c[MO][NV];
  for (int u = 0; u < MO; ++u) {
    const float b0 = bias ? bias[o0 + u] : 0.0f;
    for (int w = 0; w < NV; ++w)
      c[u][w] = (__m512)((acc ? ld(Y + (o0 + u) * ldy + r + w * LW) : bc(0.0f)) + b0);
  }
  for (int64_t j = 0; j < kp; ++j) {
    __m512bh x[NV];
    for (int w = 0; w < NV; ++w) x[w] = (__m512bh)_mm512_loadu_si512(X + j * ldx + r + w * LW);
    for (int u = 0; u < MO; ++u) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(Ap[(o0 + u) * kp + j]));
      for (int w = 0; w < NV; ++w) c[u][w] = _mm512_dpbf16_ps(c[u][w], a, x[w]);
    }
  }
  for (int u = 0; u < MO; ++u)
    for (int w = 0; w < NV; ++w) st(Y + (o0 + u) * ldy + r + w * LW, (vf)c[u][w]);
}

void gemm_bf16(const uint32_t* Ap, int64_t kp, const uint32_t* X, int64_t ldx, float* Y,
               int64_t ldy, int64_t m, int64_t R, const float* bias, bool acc) {
  RL_CLOCK(rl_mm_cycles);
  gemm_blocks(m, R, [&](auto mo, auto nv, int64_t o, int64_t r) {
    gemm_bf16_block<decltype(mo)::value, decltype(nv)::value>(Ap, kp, X, ldx, Y, ldy, o, r,
                                                              bias, acc);
  });
}

// gram's sum with rows of bf16: G[o·go + i·gi] += Σ_r D[o][r] · X[i][r], r < R (a multiple of
// 32), in 16 lanes, added across them by sum16's tree
template <int MO, int MI>
inline void gram_bf16_block(const uint16_t* D, int64_t ldd, const uint16_t* X, int64_t ldx,
                            int64_t R, float* G, int64_t go, int64_t gi, int64_t o0, int64_t i0) {
  __m512 c[MO * MI];
  for (int j = 0; j < MO * MI; ++j) c[j] = _mm512_setzero_ps();
  for (int64_t r = 0; r < R; r += 32) {
    __m512bh x[MI];
    __m512bh dv[MO];  // each operand loaded once, into a register (pinned, as in gram)
    for (int w = 0; w < MI; ++w)
      x[w] = pinned((__m512bh)_mm512_loadu_si512(X + (i0 + w) * ldx + r));
    for (int u = 0; u < MO; ++u)
      dv[u] = pinned((__m512bh)_mm512_loadu_si512(D + (o0 + u) * ldd + r));
    for (int u = 0; u < MO; ++u)
      for (int w = 0; w < MI; ++w) c[u * MI + w] = _mm512_dpbf16_ps(c[u * MI + w], dv[u], x[w]);
  }
  vf s[MO * MI];
  for (int j = 0; j < MO * MI; ++j) s[j] = (vf)c[j];
  if constexpr (MO * MI == 16) {
    const vf t = sums16(s);
    for (int u = 0; u < MO; ++u)
      for (int w = 0; w < MI; ++w) G[(o0 + u) * go + (i0 + w) * gi] += t[u * MI + w];
  } else {
    for (int u = 0; u < MO; ++u)
      for (int w = 0; w < MI; ++w) G[(o0 + u) * go + (i0 + w) * gi] += sum16(s + u * MI + w);
  }
}

void gram_bf16(const uint16_t* D, int64_t ldd, int64_t m, const uint16_t* X, int64_t ldx,
               int64_t k, int64_t R, float* G, int64_t go, int64_t gi) {
  RL_CLOCK(rl_mm_cycles);
  gram_blocks(m, k, [&](auto mo, auto mi, int64_t o, int64_t i) {
    gram_bf16_block<decltype(mo)::value, decltype(mi)::value>(D, ldd, X, ldx, R, G, go, gi, o,
                                                              i);
  });
}
#else
constexpr bool BF16_BUILD = false;
#endif

inline int64_t round32(int64_t n) { return (n + 31) / 32 * 32; }

// An operand of a weight matmul as the matmul reads it, rows `ld` elements apart: fp32 rows;
// in bf16, a product's input as feature pairs or a gram's as rows of bf16 (ld a multiple of 32)
struct Op {
  const void* p;
  int64_t ld;
};

// A weight as a product's A, A[o][i] = a[o·ao + i·ai]; in bf16 also its pairs [m][⌈k/2⌉]
// (word j of row o: A[o][2j], A[o][2j+1], 0 past k)
struct Weight {
  const float* a;
  int64_t ao, ai;
  const uint32_t* pairs;
};

// Scratch handed out in order, each piece a whole number of 64-byte lines
struct Arena {
  float* at;
  float* take(int64_t n) { float* p = at; at += (n + 15) / 16 * 16; return p; }
  uint16_t* take_halves(int64_t n) { return reinterpret_cast<uint16_t*>(take((n + 1) / 2)); }
  uint32_t* take_words(int64_t n) { return reinterpret_cast<uint32_t*>(take(n)); }
};

// The weight matmuls of a step in its precision: fp32 (gemm, gram) or bf16 (their bf16 forms
// on operands converted as each call needs them)
struct MatMul {
  bool bf16;
  // the weight as a product's A; in bf16 its pairs packed from `ar`
  Weight weight(const float* a, int64_t ao, int64_t ai, int64_t m, int64_t k, Arena& ar) const {
    Weight w{a, ao, ai, nullptr};
#if defined(__AVX512BF16__)
    if (bf16) {
      const int64_t kp = (k + 1) / 2;
      uint32_t* out = ar.take_words(m * kp);
      for (int64_t o = 0; o < m; ++o)
        for (int64_t j = 0; j < kp; ++j)
          out[o * kp + j] = pair_word(a[o * ao + 2 * j * ai],
                                      2 * j + 1 < k ? a[o * ao + (2 * j + 1) * ai] : 0.0f);
      w.pairs = out;
    }
#else
    (void)m, (void)k, (void)ar;
#endif
    return w;
  }
  // X [k][R] (rows ldx apart) as a product's input; in bf16 converted into `buf`
  Op input(const float* X, int64_t ldx, int64_t k, int64_t R, uint32_t* buf) const {
#if defined(__AVX512BF16__)
    if (bf16) {
      to_pairs(X, ldx, k, R, buf);
      return {buf, ldx};
    }
#else
    (void)k, (void)R, (void)buf;
#endif
    return {X, ldx};
  }
  // X [k][R] as a gram's operand; in bf16 converted into `buf` (k·round32(R) halves)
  Op rows(const float* X, int64_t ldx, int64_t k, int64_t R, uint16_t* buf) const {
#if defined(__AVX512BF16__)
    if (bf16) {
      to_rows(X, ldx, k, R, buf, round32(R));
      return {buf, round32(R)};
    }
#else
    (void)k, (void)R, (void)buf;
#endif
    return {X, ldx};
  }
  // Y[o][r] = (acc ? Y[o][r] : 0) + bias[o] + Σ_i A[o][i] · X[i][r], o < m, i < k, r < R
  void product(const Weight& w, Op x, float* Y, int64_t ldy, int64_t m, int64_t k, int64_t R,
               const float* bias, bool acc) const {
#if defined(__AVX512BF16__)
    if (bf16) {
      gemm_bf16(w.pairs, (k + 1) / 2, static_cast<const uint32_t*>(x.p), x.ld, Y, ldy, m, R,
                bias, acc);
      return;
    }
#endif
    gemm(w.a, w.ao, w.ai, static_cast<const float*>(x.p), x.ld, Y, ldy, m, k, R, bias, acc);
  }
  // G[o·go + i·gi] += Σ_r D[o][r] · X[i][r], o < m, i < k, r < R
  void gram(Op D, int64_t m, Op X, int64_t k, int64_t R, float* G, int64_t go,
            int64_t gi) const {
#if defined(__AVX512BF16__)
    if (bf16) {
      gram_bf16(static_cast<const uint16_t*>(D.p), D.ld, m, static_cast<const uint16_t*>(X.p),
                X.ld, k, round32(R), G, go, gi);
      return;
    }
#endif
    ::gram(static_cast<const float*>(D.p), D.ld, m, static_cast<const float*>(X.p), X.ld, k, R,
           G, go, gi);
  }
};

}  // namespace
