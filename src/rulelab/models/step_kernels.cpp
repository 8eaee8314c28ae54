// The transformer's whole training step, depth first (engine 11, issue 25): the forward, the
// loss and the backward of one tile of a few dozen examples of one member run to the end
// before the next tile starts, so every activation of the tile stays in L2 between the ops
// that write and read it. Engines 7–10 ran each op over a pass of hundreds of examples; there
// every op read operands written megabytes earlier, from L3 or memory (bench/cold_kernels.py),
// and the step was bound by memory traffic, not by its arithmetic.
//
// Layout: every activation of a tile is [features][rows] with the rows (position p, example b)
// as r = p·Bt + b, examples innermost, Bt a multiple of 16 (the last tile of a pass padded with
// copies of its first example, which carry no loss and no gradient). A weight matmul is then a sum of
// scalar × vector products over the rows, and every sum runs in one fixed order: within a
// tile in feature order, across tiles in tile order. A member's numbers depend on its own
// weights, data and Bt alone (Bt is fixed by the shape): a member equals its solo run.
//
// The model (rulelab/models/transformer.py, engine 4's numbers to float rounding): CLS at
// position 0, pre-LayerNorm blocks (or none), bidirectional attention with scores
// (q·k)/√d_head, a ReLU MLP (or none), the last block computed for the CLS position alone past
// its keys and values, the final LayerNorm'd CLS row unembedded; the loss is the cross-entropy
// summed over the examples and divided by `denom`.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <type_traits>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

// The CPU's vectors: 16 floats with AVX-512, else 8. Every sum over rows (a weight's gradient,
// a bias's, a LayerNorm's affine weights') runs in RL = 16 lanes whatever the width — lane l
// adds the rows r ≡ l (mod 16) in order, and the lanes are added by one fixed tree — so a build
// for either width computes the same bits (tests/engine/models/test_tile_step.py).
#if defined(__AVX512F__)
typedef float vf __attribute__((vector_size(64)));
constexpr int LW = 16;
#else
typedef float vf __attribute__((vector_size(32)));
constexpr int LW = 8;
#endif
constexpr int RL = 16;       // lanes of every sum over rows
constexpr int NH = RL / LW;  // vectors holding them

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
static inline vf bc(float x) {  // every lane x (a broadcast; `vf{} + x` would add a +0.0)
#if defined(__AVX512F__)
  return (vf){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
#else
  return (vf){x, x, x, x, x, x, x, x};
#endif
}
static inline vf fma(vf a, vf b, vf c) {  // a·b + c rounded once
#if defined(__AVX512F__)
  return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__)
  return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else  // lane by lane: the C library's fmaf (rounded once, as the FMA units round)
  vf r;
  for (int l = 0; l < LW; ++l) r[l] = __builtin_fmaf(a[l], b[l], c[l]);
  return r;
#endif
}
// Register blocks of the weight matmuls, at most: outputs × vectors of rows (gemm), outputs ×
// inputs (gram). AVX-512's 32 vector registers hold 8 × 2 and 4 × 4 sums. AVX2's 16 hold 6 × 2
// for gemm (12 sums, 2 rows of X and a broadcast weight: 15 registers) and, for gram, 4 × 3 of
// one vector of lanes at a time (12 sums, 3 rows of X and one of D: 16). Twelve chains of
// fused multiply-adds are what two FMA units of 5 cycles' latency (Zen 2) need in flight:
// 4 × 2 gemm blocks ran at 36 GFLOP/s of one Zen 2 core's 88, 6 × 2 at 80; 2 × 2 gram blocks
// over both vectors of lanes at 46–58, 4 × 3 over one at a time at 68–71. The blocking never
// changes a sum's order.
// RL_ONE_BY_ONE (tests/engine/models/test_tile_step.py's build only): every block one sum.
#if defined(RL_ONE_BY_ONE)
constexpr int GEMM_O = 1, GEMM_V = 1, GRAM_O = 1, GRAM_I = 1;
#elif defined(__AVX512F__)
constexpr int GEMM_O = 8, GEMM_V = 2, GRAM_O = 4, GRAM_I = 4;
#else
constexpr int GEMM_O = 6, GEMM_V = 2, GRAM_O = 4, GRAM_I = 3;
#endif
// The sum of 16 lanes held in NH vectors, by a fixed tree: lane j + lane j+8, then j + j+4,
// j + j+2, j + j+1.
static inline float sum16(const vf* c) {
  typedef float v8 __attribute__((vector_size(32)));
  typedef float v4 __attribute__((vector_size(16)));
#if defined(__AVX512F__)
  const v8 a = __builtin_shufflevector(c[0], c[0], 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(c[0], c[0], 8, 9, 10, 11, 12, 13, 14, 15);
#else
  const v8 a = c[0] + c[1];
#endif
  const v4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (b[0] + b[2]) + (b[1] + b[3]);
}
// v, held in a register: the compiler may no longer fold its load into every FMA that reads it.
// In a gram it did (each D row reloaded for each of the MI products it enters, 20 loads to 16
// FMAs), which halved the FMA rate: 53 against 106 GFLOP/s for the gram alone on Zen 4 at the
// ladder's and the paper's shapes. The value, and so every bit, is unchanged.
template <class V>
static inline V pinned(V v) {
#if defined(__AVX512F__)
  asm("" : "+v"(v));  // any of the 32 vector registers
#elif defined(__AVX__)
  asm("" : "+x"(v));
#endif
  return v;
}
static inline vf vmaxf(vf a, vf b) { return a > b ? a : b; }

// The attention's vectors: 16 examples on every build (two registers on AVX2), so that each of
// its loads reads whole 64-byte lines and the scratch it takes is the same on every vector width.
// Every op is lane by lane: the same bits as 8-lane vectors.
constexpr int AW = 16;
#if defined(__AVX512F__)
typedef vf va;
static inline va lda(const float* p) { return ld(p); }
static inline void sta(float* p, va v) { st(p, v); }
static inline va bca(float x) { return bc(x); }
#else
struct va {  // 16 lanes as two AVX2 vectors
  vf lo, hi;
};
static inline va lda(const float* p) { return {ld(p), ld(p + LW)}; }
static inline void sta(float* p, va v) { st(p, v.lo); st(p + LW, v.hi); }
static inline va bca(float x) { return {bc(x), bc(x)}; }
static inline va fma(va a, va b, va c) { return {fma(a.lo, b.lo, c.lo), fma(a.hi, b.hi, c.hi)}; }
static inline va vmaxf(va a, va b) { return {vmaxf(a.lo, b.lo), vmaxf(a.hi, b.hi)}; }
static inline va operator+(va a, va b) { return {a.lo + b.lo, a.hi + b.hi}; }
static inline va operator-(va a, va b) { return {a.lo - b.lo, a.hi - b.hi}; }
static inline va operator*(va a, va b) { return {a.lo * b.lo, a.hi * b.hi}; }
static inline va operator*(va a, float b) { return {a.lo * b, a.hi * b}; }
static inline va operator/(va a, va b) { return {a.lo / b.lo, a.hi / b.hi}; }
static inline va& operator+=(va& a, va b) { return a = a + b; }
static inline va& operator-=(va& a, va b) { return a = a - b; }
static inline va& operator/=(va& a, va b) { return a = a / b; }
#endif

typedef void (*vexp_fn)(int n, const float* a, float* r, long long mode);

// RL_TIMING (bench/tile_profile.py's build only): cycles spent in the weight matmuls (gemm
// and gram: products, their gradients) and in the whole step, read by rl_step_cycles. The
// arithmetic is the same.
#ifdef RL_TIMING
#include <x86intrin.h>
static unsigned long long rl_mm_cycles = 0, rl_all_cycles = 0, rl_attn_cycles = 0,
                          rl_ln_cycles = 0;
struct Clock {
  unsigned long long* acc;
  unsigned long long t0;
  explicit Clock(unsigned long long* a) : acc(a), t0(__rdtsc()) {}
  ~Clock() { *acc += __rdtsc() - t0; }
};
#define RL_CLOCK(acc) Clock rl_clock_(&acc)
#else
#define RL_CLOCK(acc)
#endif

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

// y = LayerNorm(x) over the d features of each row; mean and 1/σ kept per row. The 16 rows of
// NH vectors at a time (R is a multiple of 16): each vector's sums are chains of their own, in
// the same order, so two chains run side by side where AVX2 has two vectors.
void ln_forward(const float* x, int64_t ldx, float* y, int64_t ldy, float* mean, float* rstd,
                const float* w, const float* b, int64_t d, int64_t R, float eps) {
  RL_CLOCK(rl_ln_cycles);
  const float inv = 1.0f / static_cast<float>(d);
  for (int64_t r0 = 0; r0 < R; r0 += RL) {
    vf s[NH], mu[NH], v[NH], rs[NH];
    for (int h = 0; h < NH; ++h) s[h] = v[h] = bc(0.0f);
    for (int64_t i = 0; i < d; ++i)
      for (int h = 0; h < NH; ++h) s[h] += ld(x + i * ldx + r0 + h * LW);
    for (int h = 0; h < NH; ++h) mu[h] = s[h] * inv;
    for (int64_t i = 0; i < d; ++i)
      for (int h = 0; h < NH; ++h) {
        vf c = ld(x + i * ldx + r0 + h * LW) - mu[h];
        v[h] = fma(c, c, v[h]);
      }
    for (int h = 0; h < NH; ++h) {
      vf sd = v[h] * inv + eps;
      for (int l = 0; l < LW; ++l) rs[h][l] = 1.0f / std::sqrt(sd[l]);
      st(mean + r0 + h * LW, mu[h]);
      st(rstd + r0 + h * LW, rs[h]);
    }
    for (int64_t i = 0; i < d; ++i)
      for (int h = 0; h < NH; ++h)
        st(y + i * ldy + r0 + h * LW,
           fma((ld(x + i * ldx + r0 + h * LW) - mu[h]) * rs[h], bc(w[i]), bc(b[i])));
  }
}

// dx += the gradient of LayerNorm at x given dy; dw, db += the affine weights' gradients
// (sums in 16 lanes over the rows, `lanes`: 2·d·NH vectors, added across lanes at the end).
// The 16 rows of NH vectors at a time, as ln_forward.
void ln_backward(const float* x, int64_t ldx, const float* mean, const float* rstd,
                 const float* dy, int64_t lddy, const float* w, int64_t d, int64_t R,
                 float* dx, int64_t lddx, float* dw, float* db, vf* lanes) {
  RL_CLOCK(rl_ln_cycles);
  const float inv = 1.0f / static_cast<float>(d);
  for (int64_t i = 0; i < 2 * d * NH; ++i) lanes[i] = bc(0.0f);
  for (int64_t r0 = 0; r0 < R; r0 += RL) {
    vf mu[NH], rs[NH], c1[NH], c2[NH];
    for (int h = 0; h < NH; ++h) {
      mu[h] = ld(mean + r0 + h * LW);
      rs[h] = ld(rstd + r0 + h * LW);
      c1[h] = c2[h] = bc(0.0f);
    }
    for (int64_t i = 0; i < d; ++i)
      for (int h = 0; h < NH; ++h) {  // vector h of the rows adds into vector h of the lanes
        const int64_t r = r0 + h * LW;
        vf xh = (ld(x + i * ldx + r) - mu[h]) * rs[h], g = ld(dy + i * lddy + r);
        vf gw = g * w[i];
        c1[h] += gw;
        c2[h] = fma(gw, xh, c2[h]);
        lanes[i * NH + h] = fma(g, xh, lanes[i * NH + h]);
        lanes[(d + i) * NH + h] += g;
      }
    for (int h = 0; h < NH; ++h) {
      c1[h] *= inv;
      c2[h] *= inv;
    }
    for (int64_t i = 0; i < d; ++i)
      for (int h = 0; h < NH; ++h) {
        const int64_t r = r0 + h * LW;
        vf xh = (ld(x + i * ldx + r) - mu[h]) * rs[h], gw = ld(dy + i * lddy + r) * w[i];
        st(dx + i * lddx + r, ld(dx + i * lddx + r) + rs[h] * (gw - c1[h] - xh * c2[h]));
      }
  }
  for (int64_t i = 0; i < d; ++i) {
    dw[i] += sum16(lanes + i * NH);
    db[i] += sum16(lanes + (d + i) * NH);
  }
}

constexpr int64_t MAX_HEADS = 16, MAX_LAYERS = 16;  // tile_step.py's MAX_HEADS, MAX_LAYERS

struct Shape {
  int64_t L, H, dh, d, f, T, V, k, Bt;
  int64_t ln;
  float eps;
};

// parameters (and their gradients) in this order, per member
enum { P_WE, P_WPOS, P_BLOCK0 };
enum { B_LN1W, B_LN1B, B_WQ, B_WK, B_WV, B_BQ, B_BK, B_BV, B_WO, B_BO, B_LN2W, B_LN2B, B_WIN,
       B_BIN, B_WOUT, B_BOUT, B_N };
enum { F_LNW, F_LNB, F_WU, F_BU };

struct BlockActs {  // one block's activations of a tile (Tq query positions)
  float *xin, *a, *mean1, *rstd1, *q, *kk, *v, *p, *z, *xm, *m, *mean2, *rstd2, *hid, *xo;
  Op ga, gz, gm, ghid;  // a, z, m and hid as the weight gradients' grams read them
};

// One block's weights as products' A: each forward, and transposed (_t) for the backward's
// input gradients. qkv[0–2][h]: head h's W_Q, W_K, W_V.
struct BlockWeights {
  Weight qkv[3][MAX_HEADS], qkv_t[3][MAX_HEADS], o, o_t, in, in_t, out, out_t;
};

inline bool last_block(const Shape& s, int64_t l) { return l == s.L - 1; }

}  // namespace

extern "C" {

// The vector width this build computes in with fused multiply-adds, in bits: 512 with
// AVX-512, 256 with AVX2 and FMA (the same numbers either way), 0 where each lane calls the C
// library's fmaf (the same numbers, many times slower: the caller trains with engine 10).
int64_t rl_step_vector_bits() {
#if defined(__AVX512F__)
  return 512;
#elif defined(__FMA__)
  return 256;
#else
  return 0;
#endif
}

// Whether this build computes bf16 weight matmuls (AVX-512-BF16): rl_step's `bf16`.
int64_t rl_step_bf16() { return BF16_BUILD ? 1 : 0; }

// Floats of scratch rl_step needs: one tile's, and in bf16 (`bf16` ≠ 0) the weights' pairs and
// the bf16 forms of a tile's matmul operands.
int64_t rl_step_scratch(int64_t L, int64_t H, int64_t dh, int64_t d, int64_t f, int64_t T,
                        int64_t k, int64_t Bt, int64_t bf16) {
  const int64_t R = T * Bt, n = H * dh, pad = 16;
  int64_t total = d * R + T * T * AW + dh * AW + 3 * pad;  // embedding, a block's scores, z
  for (int64_t l = 0; l < L; ++l) {
    const int64_t Rq = (l == L - 1 ? 1 : T) * Bt, Tq = l == L - 1 ? 1 : T;
    total += d * R + 2 * R + n * Rq + 2 * n * R + H * Tq * T * Bt + n * Rq + d * Rq + d * Rq +
             2 * Rq + f * Rq + d * Rq + 16 * pad;
  }
  total += d * Bt + 2 * Bt + k * Bt + k * Bt;               // final LayerNorm, logits, dlogits
  total += 3 * d * R + d * Bt + 4 * n * R + f * R + T * T * AW + 2 * d * RL + 12 * pad;
  if (bf16) {
    auto pairs = [](int64_t m, int64_t kk) { return m * ((kk + 1) / 2) + 16; };
    const int64_t dp = (dh + 1) / 2;
    // weights: q, k, v per head both ways; W_O, W_in, W_out both ways; W_U both ways
    total += L * (3 * H * (pairs(dh, d) + pairs(d, dh)) + pairs(d, n) + pairs(n, d) +
                  pairs(f, d) + pairs(d, f) + pairs(d, f) + pairs(f, d)) +
             pairs(k, d) + pairs(d, k);
    const int64_t R32 = round32(R), widest = std::max({d, n, f, k, 2 * dp});
    for (int64_t l = 0; l < L; ++l) {  // a, z, m, hid kept as rows of bf16 for the grams
      const int64_t Rq32 = round32((l == L - 1 ? 1 : T) * Bt);
      total += (d * R32 + (n + d + f) * Rq32) / 2 + 4 * pad;
    }
    total += d * round32(Bt) / 2 + pad;                    // the final LayerNorm's output
    total += (widest + 1) / 2 * R + widest * R32 / 2 + 2 * pad;  // a product's input, a gram's
  }
  return total;
}

// One member's loss and gradients over `B` examples (tokens [B][T-1], labels [B]), tile by
// tile: tiles of `tile` examples, the last one the rest rounded up to a multiple of 16 (the
// padding: copies of the first example, with no loss and no gradient). P[j] its parameters,
// G[j] their gradients (added to), in the enum's order; returns the cross-entropy summed over
// the examples, divided by `denom`. With `out` (engine 12's evaluation): the forward alone,
// each example's logits written to out[b][c] (labels and gradients unread), and 0 returned.
double rl_step(int64_t L, int64_t H, int64_t dh, int64_t d, int64_t f, int64_t T, int64_t V,
               int64_t k, int64_t tile, int64_t ln, float eps, const float* const* P,
               float* const* G, const int64_t* tok, const int64_t* lab, int64_t B, double denom,
               float* scratch, vexp_fn vexp, long long mode, int64_t bf16, float* out) {
  RL_CLOCK(rl_all_cycles);
  const Shape s{L, H, dh, d, f, T, V, k, tile, ln, eps};
  const int64_t n = H * dh, n_in = T - 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  double loss = 0.0;
  if ((bf16 && !BF16_BUILD) || H > MAX_HEADS || L > MAX_LAYERS) return std::nan("");
  const MatMul mm{bf16 != 0};
  // the weights as the products read them (in bf16: their pairs, packed once per call)
  Arena wa{scratch};
  BlockWeights bw[MAX_LAYERS];
  for (int64_t l = 0; l < L; ++l) {
    const float* const* W = P + P_BLOCK0 + l * B_N;
    BlockWeights& w = bw[l];
    for (int x = 0; x < 3; ++x)
      for (int64_t h = 0; h < H; ++h) {
        const float* a = W[B_WQ + x] + h * d * dh;  // [d][dh]
        w.qkv[x][h] = mm.weight(a, 1, dh, dh, d, wa);
        w.qkv_t[x][h] = mm.weight(a, dh, 1, d, dh, wa);
      }
    w.o = mm.weight(W[B_WO], 1, d, d, n, wa);  // W_O [n][d]
    w.o_t = mm.weight(W[B_WO], d, 1, n, d, wa);
    if (f > 0) {
      w.in = mm.weight(W[B_WIN], 1, f, f, d, wa);  // W_in [d][f]
      w.in_t = mm.weight(W[B_WIN], f, 1, d, f, wa);
      w.out = mm.weight(W[B_WOUT], 1, d, d, f, wa);  // W_out [f][d]
      w.out_t = mm.weight(W[B_WOUT], d, 1, f, d, wa);
    }
  }
  const float* const* F = P + P_BLOCK0 + L * B_N;
  const Weight wu = mm.weight(F[F_WU], 1, k, k, d, wa);  // W_U [d][k]
  const Weight wu_t = mm.weight(F[F_WU], k, 1, d, k, wa);
  BlockActs acts[MAX_LAYERS];
  const int64_t widest = std::max({d, n, f, k, 2 * ((dh + 1) / 2)});  // a converted operand's
  for (int64_t b0 = 0; b0 < B; b0 += tile) {
    const int64_t Bt = std::min(tile, (B - b0 + RL - 1) / RL * RL), R = T * Bt;
    Arena ar{wa.at};
    // in bf16: a product's input and a gram's operand, converted as each call needs them
    uint32_t* pbuf = mm.bf16 ? ar.take_words((widest + 1) / 2 * R) : nullptr;
    uint16_t* gbuf = mm.bf16 ? ar.take_halves(widest * round32(R)) : nullptr;
    auto keep_rows = [&](int64_t rows, int64_t cols) {  // a kept gram operand's bf16 rows
      return mm.bf16 ? ar.take_halves(rows * round32(cols)) : nullptr;
    };
    va* scores = reinterpret_cast<va*>(ar.take(T * T * AW));  // a block's softmax, [Tq][T]
    va* zc = reinterpret_cast<va*>(ar.take(dh * AW));  // one position's z (dq, dk, dv) in a block
    // ---- forward ---------------------------------------------------------------------------
    float* x0 = ar.take(d * R);
    for (int64_t p = 0; p < T; ++p)
      for (int64_t b = 0; b < Bt; ++b) {
        const int64_t ex = b0 + b < B ? b0 + b : 0;  // padding: copies of the first example
        const int64_t t = p == 0 ? V : tok[ex * n_in + p - 1];
        const float* e = P[P_WE] + t * d;
        const float* q = P[P_WPOS] + p * d;
        for (int64_t i = 0; i < d; ++i) x0[i * R + p * Bt + b] = e[i] + q[i];
      }
    const float* xin = x0;
    for (int64_t l = 0; l < L; ++l) {
      const float* const* W = P + P_BLOCK0 + l * B_N;
      const int64_t Tq = last_block(s, l) ? 1 : T, Rq = Tq * Bt;
      BlockActs& A = acts[l];
      A.xin = const_cast<float*>(xin);
      A.mean1 = ar.take(R);
      A.rstd1 = ar.take(R);
      if (ln) {
        A.a = ar.take(d * R);
        ln_forward(xin, R, A.a, R, A.mean1, A.rstd1, W[B_LN1W], W[B_LN1B], d, R, eps);
      } else {
        A.a = A.xin;
      }
      A.q = ar.take(n * Rq);
      A.kk = ar.take(n * R);
      A.v = ar.take(n * R);
      const BlockWeights& w = bw[l];
      const Op xa = mm.input(A.a, R, d, R, pbuf);
      for (int64_t h = 0; h < H; ++h) {
        mm.product(w.qkv[0][h], xa, A.q + h * dh * Rq, Rq, dh, d, Rq, W[B_BQ] + h * dh, false);
        mm.product(w.qkv[1][h], xa, A.kk + h * dh * R, R, dh, d, R, W[B_BK] + h * dh, false);
        mm.product(w.qkv[2][h], xa, A.v + h * dh * R, R, dh, d, R, W[B_BV] + h * dh, false);
      }
      A.ga = mm.rows(A.a, R, d, R, keep_rows(d, R));
      A.p = ar.take(H * Tq * T * Bt);
      A.z = ar.take(n * Rq);
      {
      RL_CLOCK(rl_attn_cycles);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t bv = 0; bv < Bt; bv += AW) {
          // every query's scores, less their max, then one exp over them all
          for (int64_t pq = 0; pq < Tq; ++pq) {
            va* sc = scores + pq * T;
            // sc[pk] = Σ_j q[j] · k[j][pk], the keys side by side
            chains_all(A.q + h * dh * Rq + pq * Bt + bv, Rq, A.kk + h * dh * R + bv, R, Bt, dh,
                       T, sc);
            for (int64_t pk = 0; pk < T; ++pk) sc[pk] = sc[pk] * scale;
            va mx = sc[0];
            for (int64_t pk = 1; pk < T; ++pk) mx = vmaxf(mx, sc[pk]);
            for (int64_t pk = 0; pk < T; ++pk) sc[pk] -= mx;
          }
          vexp(static_cast<int>(Tq * T * AW), reinterpret_cast<float*>(scores),
               reinterpret_cast<float*>(scores), mode);
          for (int64_t pq = 0; pq < Tq; ++pq) {
            va* sc = scores + pq * T;
            va sum = sc[0];
            for (int64_t pk = 1; pk < T; ++pk) sum += sc[pk];
            for (int64_t pk = 0; pk < T; ++pk) sc[pk] /= sum;
            float* pp = A.p + ((h * Tq + pq) * T) * Bt + bv;
            for (int64_t pk = 0; pk < T; ++pk) sta(pp + pk * Bt, sc[pk]);
            // z[j] = Σ_pk p[pk] · v[j][pk], the features side by side
            chains_all(reinterpret_cast<const float*>(sc), AW, A.v + h * dh * R + bv, Bt, R, T,
                       dh, zc);
            for (int64_t j = 0; j < dh; ++j) sta(A.z + (h * dh + j) * Rq + pq * Bt + bv, zc[j]);
          }
        }
      }
      A.xm = ar.take(d * Rq);  // x_in + b_O + W_Oᵀ z
      for (int64_t i = 0; i < d; ++i) std::memcpy(A.xm + i * Rq, xin + i * R, Rq * 4);
      mm.product(w.o, mm.input(A.z, Rq, n, Rq, pbuf), A.xm, Rq, d, n, Rq, W[B_BO], true);
      A.gz = mm.rows(A.z, Rq, n, Rq, keep_rows(n, Rq));
      if (f > 0) {
        A.mean2 = ar.take(Rq);
        A.rstd2 = ar.take(Rq);
        if (ln) {
          A.m = ar.take(d * Rq);
          ln_forward(A.xm, Rq, A.m, Rq, A.mean2, A.rstd2, W[B_LN2W], W[B_LN2B], d, Rq, eps);
        } else {
          A.m = A.xm;
        }
        A.hid = ar.take(f * Rq);
        mm.product(w.in, mm.input(A.m, Rq, d, Rq, pbuf), A.hid, Rq, f, d, Rq, W[B_BIN], false);
        A.gm = mm.rows(A.m, Rq, d, Rq, keep_rows(d, Rq));
        for (int64_t j = 0; j < f * Rq; j += LW) {
          vf hv = ld(A.hid + j);
          st(A.hid + j, hv > 0.0f ? hv : bc(0.0f));
        }
        A.xo = ar.take(d * Rq);
        std::memcpy(A.xo, A.xm, d * Rq * 4);
        mm.product(w.out, mm.input(A.hid, Rq, f, Rq, pbuf), A.xo, Rq, d, f, Rq, W[B_BOUT], true);
        A.ghid = mm.rows(A.hid, Rq, f, Rq, keep_rows(f, Rq));
      } else {
        A.xo = A.xm;
      }
      xin = A.xo;
    }
    float* const* GF = G + P_BLOCK0 + L * B_N;
    float* meanf = ar.take(Bt);
    float* rstdf = ar.take(Bt);
    float* fl = const_cast<float*>(xin);
    if (ln) {
      fl = ar.take(d * Bt);
      ln_forward(xin, Bt, fl, Bt, meanf, rstdf, F[F_LNW], F[F_LNB], d, Bt, eps);
    }
    float* logits = ar.take(k * Bt);
    mm.product(wu, mm.input(fl, Bt, d, Bt, pbuf), logits, Bt, k, d, Bt, F[F_BU], false);
    if (out != nullptr) {  // the forward alone: the logits out, no loss, no backward
      for (int64_t b = 0; b < Bt && b0 + b < B; ++b)
        for (int64_t c = 0; c < k; ++c) out[(b0 + b) * k + c] = logits[c * Bt + b];
      continue;
    }
    const Op gfl = mm.rows(fl, Bt, d, Bt, keep_rows(d, Bt));
    // ---- the loss and its gradient at the logits ------------------------------------------
    float* dlog = ar.take(k * Bt);
    for (int64_t b = 0; b < Bt; ++b) {
      if (b0 + b >= B) {
        for (int64_t c = 0; c < k; ++c) dlog[c * Bt + b] = 0.0f;
        continue;
      }
      float mx = logits[b];
      for (int64_t c = 1; c < k; ++c) mx = std::fmax(mx, logits[c * Bt + b]);
      float sum = 0.0f;
      for (int64_t c = 0; c < k; ++c) sum += std::exp(logits[c * Bt + b] - mx);
      const int64_t y = lab[b0 + b];
      loss += static_cast<double>(std::log(sum) + mx - logits[y * Bt + b]);
      for (int64_t c = 0; c < k; ++c)
        dlog[c * Bt + b] = static_cast<float>(
            (std::exp(logits[c * Bt + b] - mx) / sum - (c == y ? 1.0f : 0.0f)) / denom);
    }
    // ---- backward --------------------------------------------------------------------------
    vf* lanes = reinterpret_cast<vf*>(ar.take(2 * d * RL));
    mm.gram(mm.rows(dlog, Bt, k, Bt, gbuf), k, gfl, d, Bt, GF[F_WU], 1, k);
    bias_grad(dlog, Bt, k, Bt, GF[F_BU]);
    float* dres = ar.take(d * R);  // the gradient at the residual stream, [d][rows]
    float* dfl = ln ? ar.take(d * Bt) : dres;
    mm.product(wu_t, mm.input(dlog, Bt, k, Bt, pbuf), dfl, Bt, d, k, Bt, nullptr, false);
    if (ln) {
      std::memset(dres, 0, d * Bt * 4);
      ln_backward(xin, Bt, meanf, rstdf, dfl, Bt, F[F_LNW], d, Bt, dres, Bt, GF[F_LNW],
                  GF[F_LNB], lanes);
    }
    float* dm = ar.take(d * R);
    float* dxin = ar.take(d * R);
    float* dq = ar.take(n * R);
    float* dk = ar.take(n * R);
    float* dv = ar.take(n * R);
    float* dz = ar.take(n * R);
    float* dhid = ar.take(f * R);
    va* dss = reinterpret_cast<va*>(ar.take(T * T * AW));  // a block's score gradients
    for (int64_t l = L - 1; l >= 0; --l) {
      const float* const* W = P + P_BLOCK0 + l * B_N;
      float* const* GW = G + P_BLOCK0 + l * B_N;
      const int64_t Tq = last_block(s, l) ? 1 : T, Rq = Tq * Bt;
      BlockActs& A = acts[l];
      const BlockWeights& w = bw[l];
      // dres [d][Rq]: the gradient at this block's output x_o
      if (f > 0) {
        bias_grad(dres, Rq, d, Rq, GW[B_BOUT]);
        mm.gram(mm.rows(dres, Rq, d, Rq, gbuf), d, A.ghid, f, Rq, GW[B_WOUT], 1, d);
        mm.product(w.out_t, mm.input(dres, Rq, d, Rq, pbuf), dhid, Rq, f, d, Rq, nullptr, false);
        for (int64_t j = 0; j < f * Rq; j += LW) {
          vf hv = ld(A.hid + j), g = ld(dhid + j);
          st(dhid + j, hv > 0.0f ? g : bc(0.0f));
        }
        bias_grad(dhid, Rq, f, Rq, GW[B_BIN]);
        mm.gram(mm.rows(dhid, Rq, f, Rq, gbuf), f, A.gm, d, Rq, GW[B_WIN], 1, f);
        const Op xdh = mm.input(dhid, Rq, f, Rq, pbuf);
        if (ln) {
          mm.product(w.in_t, xdh, dm, Rq, d, f, Rq, nullptr, false);
          ln_backward(A.xm, Rq, A.mean2, A.rstd2, dm, Rq, W[B_LN2W], d, Rq, dres, Rq,
                      GW[B_LN2W], GW[B_LN2B], lanes);
        } else {
          mm.product(w.in_t, xdh, dres, Rq, d, f, Rq, nullptr, true);
        }
      }
      // dres: the gradient at x_m = x_in + b_O + W_Oᵀ z
      bias_grad(dres, Rq, d, Rq, GW[B_BO]);
      mm.gram(mm.rows(dres, Rq, d, Rq, gbuf), d, A.gz, n, Rq, GW[B_WO], 1, d);
      mm.product(w.o_t, mm.input(dres, Rq, d, Rq, pbuf), dz, Rq, n, d, Rq, nullptr, false);
      // per head and block of 16 examples: each query's score gradients ds (and dq), then dk
      // and dv as sums over the queries in query order (fma chains from 0, in registers)
      {
      RL_CLOCK(rl_attn_cycles);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t bv = 0; bv < Bt; bv += AW) {
          for (int64_t pq = 0; pq < Tq; ++pq) {
            const float* pp = A.p + ((h * Tq + pq) * T) * Bt + bv;
            va* ds = dss + pq * T;
            va dot = bca(0.0f);
            // ds[pk] = Σ_j dz[j] · v[j][pk], the keys side by side; then Σ p·ds in key order
            chains_all(dz + h * dh * Rq + pq * Bt + bv, Rq, A.v + h * dh * R + bv, R, Bt, dh, T,
                       ds);
            for (int64_t pk = 0; pk < T; ++pk) dot = fma(lda(pp + pk * Bt), ds[pk], dot);
            for (int64_t pk = 0; pk < T; ++pk) ds[pk] = lda(pp + pk * Bt) * (ds[pk] - dot) * scale;
            // dq[j] = Σ_pk ds[pk] · k[j][pk], the features side by side
            chains_all(reinterpret_cast<const float*>(ds), AW, A.kk + h * dh * R + bv, Bt, R, T,
                       dh, zc);
            for (int64_t j = 0; j < dh; ++j) sta(dq + (h * dh + j) * Rq + pq * Bt + bv, zc[j]);
          }
          // dv[j][pk] = Σ_pq p[pq][pk] · dz[j][pq], dk[j][pk] = Σ_pq ds[pq][pk] · q[j][pq],
          // the features side by side
          for (int64_t pk = 0; pk < T; ++pk) {
            chains_all(A.p + (h * Tq * T + pk) * Bt + bv, T * Bt, dz + h * dh * Rq + bv, Bt, Rq,
                       Tq, dh, zc);
            for (int64_t j = 0; j < dh; ++j) sta(dv + (h * dh + j) * R + pk * Bt + bv, zc[j]);
            chains_all(reinterpret_cast<const float*>(dss + pk), T * AW, A.q + h * dh * Rq + bv,
                       Bt, Rq, Tq, dh, zc);
            for (int64_t j = 0; j < dh; ++j) sta(dk + (h * dh + j) * R + pk * Bt + bv, zc[j]);
          }
        }
      }
      // q, k, v's weights and biases; the gradient at the LayerNorm's output a
      std::memset(dm, 0, d * R * 4);
      for (int64_t h = 0; h < H; ++h) {
        bias_grad(dq + h * dh * Rq, Rq, dh, Rq, GW[B_BQ] + h * dh);
        bias_grad(dk + h * dh * R, R, dh, R, GW[B_BK] + h * dh);
        bias_grad(dv + h * dh * R, R, dh, R, GW[B_BV] + h * dh);
        const float* dqkv[3] = {dq + h * dh * Rq, dk + h * dh * R, dv + h * dh * R};
        for (int x = 0; x < 3; ++x) {  // q (its Rq rows), k, v
          const int64_t Rx = x == 0 ? Rq : R;
          mm.gram(mm.rows(dqkv[x], Rx, dh, Rx, gbuf), dh, A.ga, d, Rx,
                  GW[B_WQ + x] + h * d * dh, 1, dh);
        }
        for (int x = 0; x < 3; ++x) {
          const int64_t Rx = x == 0 ? Rq : R;
          mm.product(w.qkv_t[x][h], mm.input(dqkv[x], Rx, dh, Rx, pbuf), dm, R, d, dh, Rx,
                     nullptr, true);
        }
      }
      // the gradient at x_in: the residual's (rows of the queries) and the LayerNorm's
      std::memset(dxin, 0, d * R * 4);
      for (int64_t i = 0; i < d; ++i) std::memcpy(dxin + i * R, dres + i * Rq, Rq * 4);
      if (ln) {
        ln_backward(A.xin, R, A.mean1, A.rstd1, dm, R, W[B_LN1W], d, R, dxin, R, GW[B_LN1W],
                    GW[B_LN1B], lanes);
      } else {
        for (int64_t j = 0; j < d * R; j += LW) st(dxin + j, ld(dxin + j) + ld(dm + j));
      }
      float* t = dres;
      dres = dxin;
      dxin = t;
    }
    // ---- the embedding's gradient: rows of W_E by token, W_pos by position ----------------
    for (int64_t p = 0; p < T; ++p)
      for (int64_t b = 0; b < Bt && b0 + b < B; ++b) {
        const int64_t t = p == 0 ? V : tok[(b0 + b) * n_in + p - 1];
        float* ge = G[P_WE] + t * d;
        float* gp = G[P_WPOS] + p * d;
        for (int64_t i = 0; i < d; ++i) {
          const float g = dres[i * R + p * Bt + b];
          ge[i] += g;
          gp[i] += g;
        }
      }
  }
  return loss / denom;
}

#ifdef RL_TIMING
// cycles in the weight matmuls, in rl_step, in the attention's core (scores, softmax, values;
// their backward) and in the LayerNorms since the last call, then reset
void rl_step_cycles(unsigned long long* out) {
  out[0] = rl_mm_cycles;
  out[1] = rl_all_cycles;
  out[2] = rl_attn_cycles;
  out[3] = rl_ln_cycles;
  rl_mm_cycles = rl_all_cycles = rl_attn_cycles = rl_ln_cycles = 0;
}
unsigned long long rl_rdtsc() { return __rdtsc(); }
#endif

}  // extern "C"
