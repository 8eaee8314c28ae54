// The step's vectors (step_kernels.cpp): the CPU's width, the 16 lanes every sum over rows
// runs in, the attention's 16-example vectors, and RL_TIMING's cycle counters.
#pragma once

#include <cstdint>
#include <cstring>

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
