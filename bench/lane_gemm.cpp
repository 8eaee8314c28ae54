// A weight matmul with the examples as vector lanes, its bias and ReLU fused in: the inner loop
// a fused per-block kernel would run (bench/lane_gemm_probe.py, issue 25). Not used by any
// engine.
//
//     y[m][n] = Σ_k W[m][k] · x[k][n]   (k summed in order 0..K−1; the first product rounded
//                                        alone, each later term one FMA)
//     then, with a bias: y += b[m]; with relu: y = max(y, 0)
//
// x and y are [K][N] and [M][N] with N (examples × positions) contiguous, a multiple of the
// tile's 4 vectors; W is [M][K]. Each weight is broadcast to a vector and multiplied into four
// vectors of columns, four rows at once: 16 accumulators in registers.

#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec;
constexpr int L = 16;
static inline vec vload(const float* p) { return _mm512_loadu_ps(p); }
static inline void vstore(float* p, vec v) { _mm512_storeu_ps(p, v); }
static inline vec vset(float x) { return _mm512_set1_ps(x); }
static inline vec vmul(vec a, vec b) { return _mm512_mul_ps(a, b); }
static inline vec vadd(vec a, vec b) { return _mm512_add_ps(a, b); }
static inline vec vmax(vec a, vec b) { return _mm512_max_ps(a, b); }
static inline vec vfmadd(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
constexpr int L = 8;
static inline vec vload(const float* p) { return _mm256_loadu_ps(p); }
static inline void vstore(float* p, vec v) { _mm256_storeu_ps(p, v); }
static inline vec vset(float x) { return _mm256_set1_ps(x); }
static inline vec vmul(vec a, vec b) { return _mm256_mul_ps(a, b); }
static inline vec vadd(vec a, vec b) { return _mm256_add_ps(a, b); }
static inline vec vmax(vec a, vec b) { return _mm256_max_ps(a, b); }
static inline vec vfmadd(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
#else
typedef float vec;
constexpr int L = 1;
static inline vec vload(const float* p) { return *p; }
static inline void vstore(float* p, vec v) { *p = v; }
static inline vec vset(float x) { return x; }
static inline vec vmul(vec a, vec b) { return a * b; }
static inline vec vadd(vec a, vec b) { return a + b; }
static inline vec vmax(vec a, vec b) { return a > b ? a : b; }
static inline vec vfmadd(vec a, vec b, vec c) { return __builtin_fmaf(a, b, c); }
#endif

namespace {

constexpr int RT = 4;  // rows of W per tile
constexpr int VT = 4;  // vectors of columns per tile

template <int R>
void rows(const float* W, const float* x, float* y, const float* b, bool relu, int64_t m,
          int64_t K, int64_t N) {
  for (int64_t n0 = 0; n0 < N; n0 += VT * L) {
    vec acc[R][VT];
    vec xv[VT];
    for (int v = 0; v < VT; ++v) xv[v] = vload(x + n0 + v * L);
    for (int i = 0; i < R; ++i) {
      const vec w = vset(W[(m + i) * K]);
      for (int v = 0; v < VT; ++v) acc[i][v] = vmul(w, xv[v]);
    }
    for (int64_t k = 1; k < K; ++k) {
      for (int v = 0; v < VT; ++v) xv[v] = vload(x + k * N + n0 + v * L);
      for (int i = 0; i < R; ++i) {
        const vec w = vset(W[(m + i) * K + k]);
        for (int v = 0; v < VT; ++v) acc[i][v] = vfmadd(w, xv[v], acc[i][v]);
      }
    }
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < VT; ++v) {
        vec out = acc[i][v];
        if (b) out = vadd(out, vset(b[m + i]));
        if (relu) out = vmax(out, vset(0.0f));
        vstore(y + (m + i) * N + n0 + v * L, out);
      }
  }
}

}  // namespace

extern "C" {

// One member: W [M][K], x [K][N], y [M][N], b [M] or null; relu: 0 or 1. N % (4·L) == 0.
void rl_lane_gemm(const float* W, const float* x, float* y, const float* b, int64_t relu,
                  int64_t M, int64_t K, int64_t N) {
  int64_t m = 0;
  for (; m + RT <= M; m += RT) rows<RT>(W, x, y, b, relu != 0, m, K, N);
  for (; m < M; ++m) rows<1>(W, x, y, b, relu != 0, m, K, N);
}

}  // extern "C"
