// LayerNorm of every member with its own affine weights, forward and backward, in the layout
// with the rows (the batch) innermost: rulelab/models/layer_norm_lanes.py (issue 25, engine 8).
//
// x holds E members' d features of R rows, x[e, c, r] at x + e·x_e + c·x_c + r: each feature's
// rows are contiguous, so every statistic of a row is a chain over c in order, computed for
// a block of rows side by side as vectors, with no transpose:
//     mean = (x₀ + x₁ + … + x_{d−1}) · (1/d)           var = (δ₀δ₀ + δ₁δ₁ + …) · (1/d)
//     rstd = 1 / √(var + eps)      y_c = (δ_c · rstd) · w_c + b_c          (δ = x − mean)
// Only IEEE-rounded adds, products, one square root and one division (no fused multiply-add:
// -ffp-contract=off), so layer_norm_lanes.py's PyTorch ops give the same bits on any vector
// width. Nothing is summed across members: a member equals its solo run. The weight and bias
// gradients are summed per lane (row r mod 16) over the rows' tiles of 16 in order, then over
// the 16 lanes in order.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace {

typedef float v8 __attribute__((vector_size(32)));  // 8 rows: lowered to the CPU's vectors
constexpr int64_t TILE = 16;  // rows per tile of the weight gradients (the caller's R: multiple)
constexpr int64_t DMAX = 256;  // features at most (layer_norm_lanes.py falls back beyond)
constexpr int NBIG = 8;        // vectors per block of rows where 64 are left (else 2: one tile)

inline v8 ld(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void st(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }
// The lines of the next block's run of one feature (n floats on from p: the block's width),
// prefetched while this block's run is read — for reading, or (write) for storing. A block
// reads d runs of 64 rows (256 bytes), rows R floats apart: too many short streams for the
// hardware prefetcher, and in training every run comes from L3 or memory (bench/cold_kernels.py,
// bench/native_pieces.py).
// A prefetch past the end of a tensor is harmless: it never faults. RL_NO_PREFETCH: none (the
// bench's baseline); the numbers are the same either way.
constexpr int LINE = 16;  // floats per 64-byte cache line
inline void prefetch_run(const float* p, int n, bool write) {
#ifdef RL_NO_PREFETCH
  return;
#endif
  for (int f = 0; f < n; f += LINE) {
    if (write)
      __builtin_prefetch(p + f, 1, 3);
    else
      __builtin_prefetch(p + f, 0, 3);
  }
}

inline v8 rsqrt_ieee(v8 v) {  // 1 / √v, each rounded once
  for (int i = 0; i < 8; ++i) v[i] = std::sqrt(v[i]);
  return 1.0f / v;
}

// The residual add before a LayerNorm (residual_norm.py): x = base + (o + bias), a
// projection's output o, its bias added first, then the residual stream base — each rounded
// once, as PyTorch's two adds — stored to s [d][R] as the new residual stream. (None: x read.)
struct Residual {
  const float* o;
  int64_t o_c;
  const float* bias;
  float* s;
};

// Row block k's feature c of the LayerNorm's input: x, or x + (o + bias) stored to s.
template <bool RES>
inline v8 input(const float* x, int64_t x_c, const Residual& res, int64_t R, int64_t c,
                int64_t at) {
  if (!RES) return ld(x + c * x_c + at);
  const v8 sum = ld(x + c * x_c + at) + (ld(res.o + c * res.o_c + at) + res.bias[c]);
  st(res.s + c * R + at, sum);
  return sum;
}

template <bool RES>
inline void prefetch_input(const float* x, int64_t x_c, const Residual& res, int64_t R,
                           int64_t c, int n) {
  prefetch_run(x + c * x_c + n, n, false);
  if (RES) {
    prefetch_run(res.o + c * res.o_c + n, n, false);
    prefetch_run(res.s + c * R + n, n, true);
  }
}

// One block of NB·8 rows of one member: x (feature c at x + c·x_c; with RES, x + o + bias:
// Residual), y [d][R], mean, rstd. buf: d·NB·8 floats, the block's input copied once so later
// passes read it contiguously.
template <int NB, bool RES>
void forward_block(const float* __restrict__ x, int64_t x_c, const Residual& res,
                   const float* __restrict__ w, const float* __restrict__ b, float eps,
                   float inv_d, int64_t d, int64_t R, float* __restrict__ y,
                   float* __restrict__ mean, float* __restrict__ rstd, float* __restrict__ buf) {
  v8 m[NB], v[NB], rs[NB];
  for (int k = 0; k < NB; ++k) st(buf + 8 * k, m[k] = input<RES>(x, x_c, res, R, 0, 8 * k));
  for (int64_t c = 1; c < d; ++c) {
    prefetch_input<RES>(x, x_c, res, R, c, NB * 8);
    prefetch_run(y + c * R + NB * 8, NB * 8, true);
    for (int k = 0; k < NB; ++k) {
      const v8 t = input<RES>(x, x_c, res, R, c, 8 * k);
      st(buf + c * NB * 8 + 8 * k, t);
      m[k] = m[k] + t;
    }
  }
  for (int k = 0; k < NB; ++k) {
    m[k] = m[k] * inv_d;
    const v8 t = ld(buf + 8 * k) - m[k];
    v[k] = t * t;
  }
  for (int64_t c = 1; c < d; ++c)
    for (int k = 0; k < NB; ++k) {
      const v8 t = ld(buf + c * NB * 8 + 8 * k) - m[k];
      v[k] = v[k] + t * t;
    }
  for (int k = 0; k < NB; ++k) rs[k] = rsqrt_ieee(v[k] * inv_d + eps);
  for (int64_t c = 0; c < d; ++c) {
    const float wc = w[c], bc = b[c];
    for (int k = 0; k < NB; ++k)
      st(y + c * R + 8 * k, (ld(buf + c * NB * 8 + 8 * k) - m[k]) * rs[k] * wc + bc);
  }
  for (int k = 0; k < NB; ++k) {
    st(mean + 8 * k, m[k]);
    st(rstd + 8 * k, rs[k]);
  }
}

// The backward of one block: dx [d][R] (with GS, the gradient gs arriving at x from its other
// use added after: the sum autograd forms, two terms, so in either order the same bits);
// acc_w, acc_b [d][TILE] the lanes' running sums of g·x̂ and g (set from the block's first tile
// where `first`).
template <int NB, bool GS>
void backward_block(const float* __restrict__ x, int64_t x_c, const float* __restrict__ g,
                    int64_t g_c, const float* __restrict__ gs, int64_t gs_c,
                    const float* __restrict__ w, const float* __restrict__ mean,
                    const float* __restrict__ rstd, float inv_d, float fd, int64_t d, int64_t R,
                    float* __restrict__ dx, float* __restrict__ acc_w,
                    float* __restrict__ acc_b, bool first, float* __restrict__ buf_x,
                    float* __restrict__ buf_g) {
  v8 m[NB], rs[NB], a[NB], s[NB], u[NB];
  for (int k = 0; k < NB; ++k) {
    m[k] = ld(mean + 8 * k);
    rs[k] = ld(rstd + 8 * k);
  }
  for (int64_t c = 0; c < d; ++c) {
    const float wc = w[c];
    prefetch_run(x + c * x_c + NB * 8, NB * 8, false);
    prefetch_run(g + c * g_c + NB * 8, NB * 8, false);
    if (GS) prefetch_run(gs + c * gs_c + NB * 8, NB * 8, false);
    prefetch_run(dx + c * R + NB * 8, NB * 8, true);
    for (int k = 0; k < NB; ++k) {
      const v8 xh = (ld(x + c * x_c + 8 * k) - m[k]) * rs[k];
      const v8 gt = ld(g + c * g_c + 8 * k);
      st(buf_x + c * NB * 8 + 8 * k, xh);
      st(buf_g + c * NB * 8 + 8 * k, gt);
      const v8 h = gt * wc;
      a[k] = c == 0 ? h : a[k] + h;
      s[k] = c == 0 ? h * xh : s[k] + h * xh;
    }
  }
  for (int k = 0; k < NB; ++k) u[k] = rs[k] * inv_d;
  for (int64_t c = 0; c < d; ++c) {
    const float wc = w[c];
    float* aw = acc_w + c * TILE;
    float* ab = acc_b + c * TILE;
    // vector k holds lanes 8·(k mod 2) … of tile k / 2: the tiles added in order
    v8 sw[2], sb[2];
    for (int k = 0; k < NB; ++k) {
      const v8 xh = ld(buf_x + c * NB * 8 + 8 * k), gt = ld(buf_g + c * NB * 8 + 8 * k);
      const v8 dxk = ((gt * wc * fd - a[k]) - xh * s[k]) * u[k];
      st(dx + c * R + 8 * k, GS ? dxk + ld(gs + c * gs_c + 8 * k) : dxk);
      const v8 p = gt * xh;
      const int h = k % 2;
      if (k < 2) {
        sw[h] = first ? p : ld(aw + 8 * h) + p;
        sb[h] = first ? gt : ld(ab + 8 * h) + gt;
      } else {
        sw[h] = sw[h] + p;
        sb[h] = sb[h] + gt;
      }
    }
    for (int h = 0; h < 2; ++h) {
      st(aw + 8 * h, sw[h]);
      st(ab + 8 * h, sb[h]);
    }
  }
}

template <int N>
using Int = std::integral_constant<int, N>;
template <bool B>
using Bool = std::integral_constant<bool, B>;

}  // namespace

extern "C" {

// y [E, d, R] contiguous; mean, rstd [E, R]. R is a multiple of TILE. With o (not null): the
// input is x + (o + bias) (o [E, d, R] strided o_e, o_c; bias [E, d]), stored to s [E, d, R].
void rl_ln_forward(const float* x, int64_t x_e, int64_t x_c, const float* o, int64_t o_e,
                   int64_t o_c, const float* bias, float* s, const float* w, const float* b,
                   float eps, float* y, float* mean, float* rstd, int64_t E, int64_t d,
                   int64_t R) {
  const float inv_d = static_cast<float>(1.0 / static_cast<double>(d));
  alignas(64) static thread_local float buf[DMAX * NBIG * 8];
  for (int64_t e = 0; e < E; ++e) {
    const float* xe = x + e * x_e;
    float* ye = y + e * d * R;
    const float *we = w + e * d, *be = b + e * d;
    int64_t r0 = 0;
    auto block = [&](auto nb, auto res) {
      constexpr int NB = decltype(nb)::value;
      const Residual at =
          res ? Residual{o + e * o_e + r0, o_c, bias + e * d, s + e * d * R + r0} : Residual{};
      forward_block<NB, decltype(res)::value>(xe + r0, x_c, at, we, be, eps, inv_d, d, R,
                                              ye + r0, mean + e * R + r0, rstd + e * R + r0,
                                              buf);
    };
    for (; r0 + NBIG * 8 <= R; r0 += NBIG * 8)
      o ? block(Int<NBIG>{}, Bool<true>{}) : block(Int<NBIG>{}, Bool<false>{});
    for (; r0 < R; r0 += TILE) o ? block(Int<2>{}, Bool<true>{}) : block(Int<2>{}, Bool<false>{});
  }
}

// Given g, the gradient of y (g[e, c, r] at g + e·g_e + c·g_c + r): dx [E, d, R] contiguous,
// and dw, db [E, d]:
//     ĝ_c = g_c · w_c     a = ĝ₀ + ĝ₁ + …     s = ĝ₀x̂₀ + ĝ₁x̂₁ + …
//     dx_c = ((ĝ_c · d − a) − x̂_c · s) · (rstd · (1/d))      (+ gs_c where gs is not null)
//     dw_c = Σ_lanes Σ_tiles g_c x̂_c,  db_c = Σ_lanes Σ_tiles g_c   (tiles, then lanes, in order)
void rl_ln_backward(const float* x, int64_t x_e, int64_t x_c, const float* g, int64_t g_e,
                    int64_t g_c, const float* gs, int64_t gs_e, int64_t gs_c, const float* w,
                    const float* mean, const float* rstd, float* dx, float* dw, float* db,
                    int64_t E, int64_t d, int64_t R) {
  const float inv_d = static_cast<float>(1.0 / static_cast<double>(d));
  const float fd = static_cast<float>(d);
  alignas(64) static thread_local float buf_x[DMAX * NBIG * 8], buf_g[DMAX * NBIG * 8],
      acc_w[DMAX * TILE], acc_b[DMAX * TILE];
  for (int64_t e = 0; e < E; ++e) {
    const float *xe = x + e * x_e, *ge = g + e * g_e, *we = w + e * d;
    const float* gse = gs ? gs + e * gs_e : nullptr;
    float* dxe = dx + e * d * R;
    int64_t r0 = 0;
    auto block = [&](auto nb, auto with_gs) {
      constexpr int NB = decltype(nb)::value;
      backward_block<NB, decltype(with_gs)::value>(
          xe + r0, x_c, ge + r0, g_c, gse ? gse + r0 : nullptr, gs_c, we, mean + e * R + r0,
          rstd + e * R + r0, inv_d, fd, d, R, dxe + r0, acc_w, acc_b, r0 == 0, buf_x, buf_g);
    };
    for (; r0 + NBIG * 8 <= R; r0 += NBIG * 8)
      gs ? block(Int<NBIG>{}, Bool<true>{}) : block(Int<NBIG>{}, Bool<false>{});
    for (; r0 < R; r0 += TILE) gs ? block(Int<2>{}, Bool<true>{}) : block(Int<2>{}, Bool<false>{});
    for (int64_t c = 0; c < d; ++c) {
      float sw = acc_w[c * TILE], sb = acc_b[c * TILE];
      for (int64_t l = 1; l < TILE; ++l) {
        sw = sw + acc_w[c * TILE + l];
        sb = sb + acc_b[c * TILE + l];
      }
      dw[e * d + c] = sw;
      db[e * d + c] = sb;
    }
  }
}

}  // extern "C"
