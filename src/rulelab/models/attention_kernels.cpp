// Attention over a few positions, batch innermost: the three sums of
// rulelab/models/attention_sums.py as register-tiled loops (issue 25, engine 7), and the whole
// core — scores, softmax, values; and its backward — fused per block of W examples (rl_attend,
// rl_attend_backward: the same chains and the same ops in the same order as the unfused path
// of engine 9, whose softmax sums are chains in key order too; the softmax's exp by the very
// routine PyTorch's exp_ calls, passed in: MKL's vmsExp).
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
static inline vec vadd(vec a, vec b) { return _mm512_add_ps(a, b); }
static inline vec vsub(vec a, vec b) { return _mm512_sub_ps(a, b); }
static inline vec vdiv(vec a, vec b) { return _mm512_div_ps(a, b); }
static inline vec vmax(vec a, vec b) { return _mm512_max_ps(a, b); }
static inline vec vset(float x) { return _mm512_set1_ps(x); }
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
constexpr int L = 8;
static inline vec vload(const float* p) { return _mm256_loadu_ps(p); }
static inline void vstore(float* p, vec v) { _mm256_storeu_ps(p, v); }
static inline vec vmul(vec a, vec b) { return _mm256_mul_ps(a, b); }
static inline vec vfmadd(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
static inline vec vadd(vec a, vec b) { return _mm256_add_ps(a, b); }
static inline vec vsub(vec a, vec b) { return _mm256_sub_ps(a, b); }
static inline vec vdiv(vec a, vec b) { return _mm256_div_ps(a, b); }
static inline vec vmax(vec a, vec b) { return _mm256_max_ps(a, b); }
static inline vec vset(float x) { return _mm256_set1_ps(x); }
#else
typedef float vec;
constexpr int L = 1;
static inline vec vload(const float* p) { return *p; }
static inline void vstore(float* p, vec v) { *p = v; }
static inline vec vmul(vec a, vec b) { return a * b; }
static inline vec vadd(vec a, vec b) { return a + b; }
static inline vec vsub(vec a, vec b) { return a - b; }
static inline vec vdiv(vec a, vec b) { return a / b; }
static inline vec vmax(vec a, vec b) { return a > b ? a : b; }
static inline vec vset(float x) { return x; }
#if defined(__FMA__)
static inline vec vfmadd(vec a, vec b, vec c) { return __builtin_fmaf(a, b, c); }
#else  // no FMA unit: PyTorch's addcmul_ rounds the product and the sum apart here too
static inline vec vfmadd(vec a, vec b, vec c) { return a * b + c; }
#endif
#endif

// r[0..n) = exp(a[0..n)) in MKL's VML interface, and its mode argument (the caller passes
// what PyTorch's exp_ runs: vmsExp, VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE)
typedef void (*vexp_fn)(int n, const float* a, float* r, long long mode);

namespace {

constexpr int64_t W = 16;  // examples per block (the caller pads B to a multiple)
constexpr int NV = W / L;  // vectors per block
constexpr int NT = 4;      // outputs n kept in registers at once
constexpr int64_t CHUNK = 8;  // blocks packed at once (128 examples: a row read as 512 bytes)

// C[m][n] for m < M, n < N (one block): A[m][r] at a + m·a_m + r·a_r, B[r][n] at
// b + r·b_r + n·b_n, C[m][n] at c + m·c_m + n·c_n; M·N·NV accumulators in registers, each
// its own chain over r in order.
template <int M, int N>
inline void tile(const float* a, int64_t a_m, int64_t a_r, const float* b, int64_t b_r,
                 int64_t b_n, float* c, int64_t c_m, int64_t c_n, int64_t R) {
  vec acc[M][N][NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v)
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) {
      const vec av = vload(a + m * a_m + v * L);
#pragma GCC unroll 8
      for (int n = 0; n < N; ++n) acc[m][n][v] = vmul(av, vload(b + n * b_n + v * L));
    }
  for (int64_t r = 1; r < R; ++r) {
    const float* ar = a + r * a_r;
    const float* br = b + r * b_r;
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v)
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) {
        const vec av = vload(ar + m * a_m + v * L);
#pragma GCC unroll 8
        for (int n = 0; n < N; ++n)
          acc[m][n][v] = vfmadd(av, vload(br + n * b_n + v * L), acc[m][n][v]);
      }
  }
#pragma GCC unroll 4
  for (int m = 0; m < M; ++m)
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n)
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) vstore(c + m * c_m + n * c_n + v * L, acc[m][n][v]);
}

// M rows of C (M fixed), N in tiles of NT.
template <int M>
inline void tile_row(const float* a, int64_t a_m, int64_t a_r, const float* b, int64_t b_r,
                     int64_t b_n, float* c, int64_t c_m, int64_t c_n, int64_t R, int64_t N) {
  int64_t n = 0;
  for (; n + NT <= N; n += NT)
    tile<M, NT>(a, a_m, a_r, b + n * b_n, b_r, b_n, c + n * c_n, c_m, c_n, R);
  switch (N - n) {
    case 3: tile<M, 3>(a, a_m, a_r, b + n * b_n, b_r, b_n, c + n * c_n, c_m, c_n, R); break;
    case 2: tile<M, 2>(a, a_m, a_r, b + n * b_n, b_r, b_n, c + n * c_n, c_m, c_n, R); break;
    case 1: tile<M, 1>(a, a_m, a_r, b + n * b_n, b_r, b_n, c + n * c_n, c_m, c_n, R); break;
    default: break;
  }
}

// C[m][n] = Σ_r A[m][r] · B[r][n] for m < M, n < N of one block (strides as tile's), MR rows
// at a time: where one vector holds a block, MR·NT independent chains keep both FMA units busy
// (a chain's latency is 4 cycles); wider blocks have NV·NT already.
constexpr int MR = NV == 1 ? 3 : 1;
inline void block_matmul(const float* a, int64_t a_m, int64_t a_r, const float* b, int64_t b_r,
                         int64_t b_n, float* c, int64_t c_m, int64_t c_n, int64_t R, int64_t M,
                         int64_t N) {
  int64_t m = 0;
  for (; m + MR <= M; m += MR)
    tile_row<MR>(a + m * a_m, a_m, a_r, b, b_r, b_n, c + m * c_m, c_m, c_n, R, N);
  for (; m < M; ++m) tile_row<1>(a + m * a_m, a_m, a_r, b, b_r, b_n, c + m * c_m, c_m, c_n, R, N);
}

// [nb][R][M][W] copy of nb consecutive blocks of a strided slab (X[r][m] at x + r·x_r + m·x_m):
// the sums then read consecutive lines. Read in place, a slab's rows lie B or T·B floats apart,
// near powers of two, so they fall into the same few L1 sets and evict one another; copied
// nb blocks at a time, each row is read as one run of nb·W floats the prefetcher follows.
// With bias (R floats), X[r][m] + bias[r] is copied: the projection's bias added here, rounded
// once as PyTorch's add_ after the matmul did, instead of in a pass of its own.
const float* pack(const float* x, int64_t x_r, int64_t x_m, int64_t R, int64_t M, int64_t nb,
                  std::vector<float>& buf, const float* bias = nullptr) {
  const int64_t slab = R * M * W;
  buf.resize(static_cast<size_t>(nb * slab));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t m = 0; m < M; ++m) {
      const float* row = x + r * x_r + m * x_m;
      float* p = buf.data() + (r * M + m) * W;
      if (bias == nullptr) {
        for (int64_t blk = 0; blk < nb; ++blk)
#pragma GCC unroll 16
          for (int v = 0; v < NV; ++v)
            vstore(p + blk * slab + v * L, vload(row + blk * W + v * L));
        continue;
      }
      const vec b = vset(bias[r]);
      for (int64_t blk = 0; blk < nb; ++blk)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v)
          vstore(p + blk * slab + v * L, vadd(vload(row + blk * W + v * L), b));
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
  for (int64_t blk = 0; blk < nb; ++blk, ap += R * M * W, bp += R * N * W, c += W)
    block_matmul(ap, W, M * W, bp, N * W, W, c, c_m, c_n, R, M, N);
}

// Softmax over the keys of every query's scores s[i][j] (i < Tq, j < T, W examples each), in
// place, in engine 9's order (attention_core.scores_softmax, in_order): the max, then
// (s − max)·scale, exp (one call for the block), the sum as the chain e₀ + e₁ + … in key order,
// one division.
inline void softmax_rows(float* s, int64_t Tq, int64_t T, float scale, vexp_fn ex,
                         long long mode) {
  const vec sc = vset(scale);
  for (int64_t i = 0; i < Tq; ++i)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      float* sv = s + i * T * W + v * L;
      vec m = vload(sv);
      for (int64_t j = 1; j < T; ++j) m = vmax(m, vload(sv + j * W));
      for (int64_t j = 0; j < T; ++j) vstore(sv + j * W, vmul(vsub(vload(sv + j * W), m), sc));
    }
  ex(static_cast<int>(Tq * T * W), s, s, mode);
  for (int64_t i = 0; i < Tq; ++i)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      float* sv = s + i * T * W + v * L;
      vec sum = vload(sv);
      for (int64_t j = 1; j < T; ++j) sum = vadd(sum, vload(sv + j * W));
      for (int64_t j = 0; j < T; ++j) vstore(sv + j * W, vdiv(vload(sv + j * W), sum));
    }
}

// Blocks in the chunk starting at example b0.
inline int64_t blocks(int64_t B, int64_t b0) { return (B - b0) / W < CHUNK ? (B - b0) / W : CHUNK; }

// f(e, h, b0, nb) for every member e, head h and chunk of nb ≤ CHUNK blocks from example b0.
template <class F>
inline void each_chunk(int64_t E, int64_t H, int64_t B, F f) {
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t b0 = 0; b0 < B; b0 += CHUNK * W) f(e, h, b0, blocks(B, b0));
}

// A tensor strided (member, head, c, position), as the fused core's q, k, v, z and gradients.
struct Strided {
  const float* x;
  int64_t e, h, c, pos;
  // member e's head h from example b: X[c][position] at + c·this->c + position·pos
  const float* at(int64_t me, int64_t hd, int64_t b) const { return x + me * e + hd * h + b; }
};

// A projection's bias per member ([E][H·dh] strided e; none: null): head h's dh floats.
struct Bias {
  const float* b;
  int64_t e;
  const float* at(int64_t me, int64_t hd, int64_t dh) const {
    return b == nullptr ? nullptr : b + me * e + hd * dh;
  }
};

// Member e's head h of q [dh][Tq], k and v [dh][T] over nb blocks from example b0, packed
// (pack) for the fused core; block(blk): the three slabs of one block of W examples.
struct PackedQKV {
  const float *q, *k, *v;
  int64_t q_n, kv_n;  // floats per block
  PackedQKV block(int64_t blk) const {
    return {q + blk * q_n, k + blk * kv_n, v + blk * kv_n, q_n, kv_n};
  }
};

inline PackedQKV pack_qkv(const Strided& q, const Strided& k, const Strided& v,
                          const Bias (&bias)[3], int64_t e, int64_t h, int64_t b0, int64_t nb,
                          int64_t dh, int64_t Tq, int64_t T, std::vector<float> (&buf)[3]) {
  return {pack(q.at(e, h, b0), q.c, q.pos, dh, Tq, nb, buf[0], bias[0].at(e, h, dh)),
          pack(k.at(e, h, b0), k.c, k.pos, dh, T, nb, buf[1], bias[1].at(e, h, dh)),
          pack(v.at(e, h, b0), v.c, v.pos, dh, T, nb, buf[2], bias[2].at(e, h, dh)),
          dh * Tq * W, dh * T * W};
}

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

// The fused core, forward: for every member e, head h and block of W examples,
//   s[i][j] = Σ_c q[c][i]·k[c][j]        (c in order: rl_scores' chain)
//   p[i][:] = softmax(scale · s[i][:])    (softmax_rows)
//   z[c][i] = Σ_j p[i][j]·v[c][j]        (j in order: rl_weighted_sum's chain)
// q, k, v, z strided (e, h, c, position); p written [T, E, H, Tq, B] for the backward, as the
// unfused path saves it. A block's q, k, v are packed CHUNK blocks at a time (pack) — each
// with its projection's bias added where one is given (bq, bk, bv: [E][H·dh], member strides
// bq_e, …; null: none) — and its scores never leave a W·Tq·T buffer.
void rl_attend(const float* q, int64_t q_e, int64_t q_h, int64_t q_c, int64_t q_i,
               const float* k, int64_t k_e, int64_t k_h, int64_t k_c, int64_t k_j,
               const float* v, int64_t v_e, int64_t v_h, int64_t v_c, int64_t v_j,
               float* z, int64_t z_e, int64_t z_h, int64_t z_c, int64_t z_i, float* p,
               int64_t E, int64_t H, int64_t dh, int64_t Tq, int64_t T, int64_t B,
               float scale, vexp_fn ex, long long mode, const float* bq, int64_t bq_e,
               const float* bk, int64_t bk_e, const float* bv, int64_t bv_e) {
  thread_local std::vector<float> qkv_buf[3], sb;
  sb.resize(static_cast<size_t>(Tq * T * W));
  float* s = sb.data();  // [i][j][W]
  const int64_t p_j = E * H * Tq * B;
  const Strided qs{q, q_e, q_h, q_c, q_i}, ks{k, k_e, k_h, k_c, k_j}, vs{v, v_e, v_h, v_c, v_j};
  const Bias bias[3] = {{bq, bq_e}, {bk, bk_e}, {bv, bv_e}};
  each_chunk(E, H, B, [&](int64_t e, int64_t h, int64_t b0, int64_t nb) {
    const PackedQKV packed = pack_qkv(qs, ks, vs, bias, e, h, b0, nb, dh, Tq, T, qkv_buf);
    for (int64_t blk = 0; blk < nb; ++blk) {
      const int64_t b = b0 + blk * W;
      const PackedQKV x = packed.block(blk);
      float* pe = p + (e * H + h) * Tq * B + b;
      block_matmul(x.q, W, Tq * W, x.k, T * W, W, s, T * W, W, dh, Tq, T);
      softmax_rows(s, Tq, T, scale, ex, mode);
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t j = 0; j < T; ++j)
#pragma GCC unroll 16
          for (int u = 0; u < NV; ++u)
            vstore(pe + j * p_j + i * B + u * L, vload(s + (i * T + j) * W + u * L));
      block_matmul(s, T * W, W, x.v, W, T * W, z + e * z_e + h * z_h + b, z_i, z_c, T, Tq,
                   dh);
    }
  });
}

// The fused core, backward: for every member, head and block, with p from rl_attend,
//   dp[i][j] = Σ_c dz[c][i]·v[c][j]                     (c in order)
//   dv[c][j] = Σ_i p[i][j]·dz[c][i]                     (i in order)
//   ds[i][j] = ((dp[i][j] − Σ_j' p[i][j']·dp[i][j']) · p[i][j]) · scale   (Σ_j' in order)
//   dq[c][i] = Σ_j ds[i][j]·k[c][j],  dk[c][j] = Σ_i ds[i][j]·q[c][i]
// — each the chain, and the softmax backward the op order, of attention_core.core_backward
// in engine 9's order (in_order). q, k, v with their biases added as rl_attend's.
// dq, dk, dv strided like q, k, v (they may be views into one buffer).
void rl_attend_backward(
    const float* q, int64_t q_e, int64_t q_h, int64_t q_c, int64_t q_i,
    const float* k, int64_t k_e, int64_t k_h, int64_t k_c, int64_t k_j,
    const float* v, int64_t v_e, int64_t v_h, int64_t v_c, int64_t v_j,
    const float* dz, int64_t g_e, int64_t g_h, int64_t g_c, int64_t g_i, const float* p,
    float* dq, int64_t dq_e, int64_t dq_h, int64_t dq_c, int64_t dq_i,
    float* dk, int64_t dk_e, int64_t dk_h, int64_t dk_c, int64_t dk_j,
    float* dv, int64_t dv_e, int64_t dv_h, int64_t dv_c, int64_t dv_j,
    int64_t E, int64_t H, int64_t dh, int64_t Tq, int64_t T, int64_t B, float scale,
    const float* bq, int64_t bq_e, const float* bk, int64_t bk_e, const float* bv, int64_t bv_e) {
  thread_local std::vector<float> qkv_buf[3], gb, pb, dpb, dsb;
  dpb.resize(static_cast<size_t>(Tq * T * W));
  dsb.resize(static_cast<size_t>(Tq * T * W));
  float* dp = dpb.data();  // [i][j][W]
  float* ds = dsb.data();  // [i][j][W]
  const vec sc = vset(scale);
  const Strided qs{q, q_e, q_h, q_c, q_i}, ks{k, k_e, k_h, k_c, k_j}, vs{v, v_e, v_h, v_c, v_j};
  const Bias bias[3] = {{bq, bq_e}, {bk, bk_e}, {bv, bv_e}};
  each_chunk(E, H, B, [&](int64_t e, int64_t h, int64_t b0, int64_t nb) {
    const PackedQKV packed = pack_qkv(qs, ks, vs, bias, e, h, b0, nb, dh, Tq, T, qkv_buf);
    const float* gp = pack(dz + e * g_e + h * g_h + b0, g_c, g_i, dh, Tq, nb, gb);
    // p [T][Tq] per block: p[j][i]
    const float* pp = pack(p + (e * H + h) * Tq * B + b0, E * H * Tq * B, B, T, Tq, nb, pb);
    for (int64_t blk = 0; blk < nb; ++blk) {
      const int64_t b = b0 + blk * W;
      const PackedQKV x = packed.block(blk);
      const float* gk = gp + blk * dh * Tq * W;
      const float* pk = pp + blk * T * Tq * W;
      block_matmul(gk, W, Tq * W, x.v, T * W, W, dp, T * W, W, dh, Tq, T);
      block_matmul(pk, Tq * W, W, gk, W, Tq * W, dv + e * dv_e + h * dv_h + b, dv_j, dv_c,
                   Tq, T, dh);
      for (int64_t i = 0; i < Tq; ++i)
#pragma GCC unroll 16
        for (int u = 0; u < NV; ++u) {
          const int64_t o = i * T * W + u * L;
          vec t = vmul(vload(pk + i * W + u * L), vload(dp + o));
          for (int64_t j = 1; j < T; ++j)
            t = vadd(t, vmul(vload(pk + j * Tq * W + i * W + u * L), vload(dp + o + j * W)));
          for (int64_t j = 0; j < T; ++j)
            vstore(ds + o + j * W,
                   vmul(vmul(vsub(vload(dp + o + j * W), t),
                             vload(pk + j * Tq * W + i * W + u * L)), sc));
        }
      block_matmul(ds, T * W, W, x.k, W, T * W, dq + e * dq_e + h * dq_h + b, dq_i, dq_c, T,
                   Tq, dh);
      block_matmul(ds, W, T * W, x.q, W, Tq * W, dk + e * dk_e + h * dk_h + b, dk_j, dk_c,
                   Tq, T, dh);
    }
  });
}

}  // extern "C"
