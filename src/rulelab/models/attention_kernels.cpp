// Attention over a few positions, batch innermost: the three sums of
// rulelab/models/attention_sums.py as register-tiled loops (issue 25, engine 7).
//
// Every tensor is [.., B] with the batch B innermost and contiguous, B a multiple of W (the
// caller pads it). Each sum is, for every example, a tiny matrix product
//     C[m][n] = Σ_r A[r][m] · B[r][n]      (r summed in order 0, 1, …, R−1)
// whose elements are vectors of W examples. Every element is the chain attention_sums.py
// runs in PyTorch: the first product rounded alone (torch.mul), each later term added by one
// fused multiply-add (PyTorch's vectorized addcmul_). Contraction is otherwise off
// (-ffp-contract=off), so an element rounds the same on any vector width, and nothing is summed
// across examples, members or heads: a member equals its solo run.
//
// Strides are in floats, per axis (member e, head h, then a slab's own axes), so q, k, v can
// be views into one QKV buffer; w and s are [T, E, H, Tq, B] contiguous.

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec;
constexpr int L = 16;  // floats per vector
static inline vec vload(const float* p) { return _mm512_loadu_ps(p); }
static inline void vstore(float* p, vec v) { _mm512_storeu_ps(p, v); }
static inline vec vmul(vec a, vec b) { return _mm512_mul_ps(a, b); }
static inline vec vfmadd(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
constexpr int L = 8;
static inline vec vload(const float* p) { return _mm256_loadu_ps(p); }
static inline void vstore(float* p, vec v) { _mm256_storeu_ps(p, v); }
static inline vec vmul(vec a, vec b) { return _mm256_mul_ps(a, b); }
static inline vec vfmadd(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
#else
typedef float vec;
constexpr int L = 1;
static inline vec vload(const float* p) { return *p; }
static inline void vstore(float* p, vec v) { *p = v; }
static inline vec vmul(vec a, vec b) { return a * b; }
#if defined(__FMA__)
static inline vec vfmadd(vec a, vec b, vec c) { return __builtin_fmaf(a, b, c); }
#else  // no FMA unit: PyTorch's addcmul_ rounds the product and the sum apart here too
static inline vec vfmadd(vec a, vec b, vec c) { return a * b + c; }
#endif
#endif

namespace {

constexpr int64_t W = 16;  // examples per block (the caller pads B to a multiple)
constexpr int NV = W / L;  // vectors per block
constexpr int NT = 4;      // outputs n kept in registers at once
constexpr int64_t CHUNK = 8;  // blocks packed at once (128 examples: a row read as 512 bytes)

// C[m][n0 .. n0+N) for one m and one block: N·NV accumulators in registers.
template <int N>
inline void tile(const float* a, int64_t a_r, const float* b, int64_t b_r, int64_t b_n,
                 float* c, int64_t c_n, int64_t R) {
  vec acc[N][NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) {
    const vec av = vload(a + v * L);
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n) acc[n][v] = vmul(av, vload(b + n * b_n + v * L));
  }
  for (int64_t r = 1; r < R; ++r) {
    const float* ar = a + r * a_r;
    const float* br = b + r * b_r;
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      const vec av = vload(ar + v * L);
#pragma GCC unroll 8
      for (int n = 0; n < N; ++n) acc[n][v] = vfmadd(av, vload(br + n * b_n + v * L), acc[n][v]);
    }
  }
#pragma GCC unroll 8
  for (int n = 0; n < N; ++n)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) vstore(c + n * c_n + v * L, acc[n][v]);
}

// [nb][R][M][W] copy of nb consecutive blocks of a strided slab (X[r][m] at x + r·x_r + m·x_m):
// the sums then read consecutive lines. Read in place, a slab's rows lie B or T·B floats apart,
// near powers of two, so they fall into the same few L1 sets and evict one another; copied
// nb blocks at a time, each row is read as one run of nb·W floats the prefetcher follows.
const float* pack(const float* x, int64_t x_r, int64_t x_m, int64_t R, int64_t M, int64_t nb,
                  std::vector<float>& buf) {
  const int64_t slab = R * M * W;
  buf.resize(static_cast<size_t>(nb * slab));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t m = 0; m < M; ++m) {
      const float* row = x + r * x_r + m * x_m;
      float* p = buf.data() + (r * M + m) * W;
      for (int64_t blk = 0; blk < nb; ++blk)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) vstore(p + blk * slab + v * L, vload(row + blk * W + v * L));
    }
  return buf.data();
}

// C[m][n] = Σ_r A[r][m] · B[r][n] for every m < M, n < N, in each of nb consecutive blocks
// of W examples: A[r][m] at a + r·a_r + m·a_m, B[r][n] at b + r·b_r + n·b_n,
// C[m][n] at c + m·c_m + n·c_n (the next block W floats on).
void lane_matmul(const float* a, int64_t a_r, int64_t a_m, const float* b, int64_t b_r,
                 int64_t b_n, float* c, int64_t c_m, int64_t c_n, int64_t R, int64_t M,
                 int64_t N, int64_t nb) {
  thread_local std::vector<float> a_buf, b_buf;
  const float* ap = pack(a, a_r, a_m, R, M, nb, a_buf);  // [nb][R][M][W]
  const float* bp = pack(b, b_r, b_n, R, N, nb, b_buf);  // [nb][R][N][W]
  for (int64_t blk = 0; blk < nb; ++blk, ap += R * M * W, bp += R * N * W, c += W) {
    for (int64_t m = 0; m < M; ++m) {
      const float* am = ap + m * W;
      float* cm = c + m * c_m;
      int64_t n = 0;
      for (; n + NT <= N; n += NT)
        tile<NT>(am, M * W, bp + n * W, N * W, W, cm + n * c_n, c_n, R);
      switch (N - n) {
        case 3: tile<3>(am, M * W, bp + n * W, N * W, W, cm + n * c_n, c_n, R); break;
        case 2: tile<2>(am, M * W, bp + n * W, N * W, W, cm + n * c_n, c_n, R); break;
        case 1: tile<1>(am, M * W, bp + n * W, N * W, W, cm + n * c_n, c_n, R); break;
        default: break;
      }
    }
  }
}

// Blocks in the chunk starting at example b0.
inline int64_t blocks(int64_t B, int64_t b0) { return (B - b0) / W < CHUNK ? (B - b0) / W : CHUNK; }

}  // namespace

extern "C" {

// s[j, e, h, i, b] = Σ_c q[e, h, c, i, b] · k[e, h, c, j, b], summed over c = 0..dh−1 in order.
// q strides (e, h, c, i), k strides (e, h, c, j).
void rl_scores(const float* q, int64_t q_e, int64_t q_h, int64_t q_c, int64_t q_i,
               const float* k, int64_t k_e, int64_t k_h, int64_t k_c, int64_t k_j,
               float* s, int64_t E, int64_t H, int64_t dh, int64_t Tq, int64_t T, int64_t B) {
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t b0 = 0; b0 < B; b0 += CHUNK * W)
        lane_matmul(q + e * q_e + h * q_h + b0, q_c, q_i, k + e * k_e + h * k_h + b0, k_c, k_j,
                    s + (e * H + h) * Tq * B + b0, B, E * H * Tq * B, dh, Tq, T, blocks(B, b0));
}

// out[e, h, c, i, b] = Σ_j w[j, e, h, i, b] · a[e, h, c, j, b], summed over j = 0..T−1 in order.
// a strides (e, h, c, j), out strides (e, h, c, i).
void rl_weighted_sum(const float* w, const float* a, int64_t a_e, int64_t a_h, int64_t a_c,
                     int64_t a_j, float* out, int64_t o_e, int64_t o_h, int64_t o_c, int64_t o_i,
                     int64_t E, int64_t H, int64_t dh, int64_t Tq, int64_t T, int64_t B) {
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t b0 = 0; b0 < B; b0 += CHUNK * W)
        lane_matmul(w + (e * H + h) * Tq * B + b0, E * H * Tq * B, B,
                    a + e * a_e + h * a_h + b0, a_j, a_c,
                    out + e * o_e + h * o_h + b0, o_i, o_c, T, Tq, dh, blocks(B, b0));
}

// out[e, h, c, j, b] = Σ_i w[j, e, h, i, b] · x[e, h, c, i, b], summed over i = 0..Tq−1 in order.
// x strides (e, h, c, i), out strides (e, h, c, j).
void rl_pairs(const float* w, const float* x, int64_t x_e, int64_t x_h, int64_t x_c, int64_t x_i,
              float* out, int64_t o_e, int64_t o_h, int64_t o_c, int64_t o_j,
              int64_t E, int64_t H, int64_t dh, int64_t Tq, int64_t T, int64_t B) {
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t b0 = 0; b0 < B; b0 += CHUNK * W)
        lane_matmul(w + (e * H + h) * Tq * B + b0, B, E * H * Tq * B,
                    x + e * x_e + h * x_h + b0, x_i, x_c,
                    out + e * o_e + h * o_h + b0, o_j, o_c, Tq, T, dh, blocks(B, b0));
}

}  // extern "C"
