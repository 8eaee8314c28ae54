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

// Each a header of its own: the vectors and lanes, the fp32 weight matmuls, the step's
// precision (bf16 operands, MatMul), the LayerNorms, the attention's core. One translation
// unit, in this order.
#include "step_vectors.h"
#include "step_matmuls.h"
#include "step_precision.h"
#include "step_layer_norm.h"
#include "step_attention.h"

namespace {

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
      attention_forward(H, dh, T, Tq, Bt, scale, A.q, A.kk, A.v, A.p, A.z, scores, zc, vexp,
                        mode);
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
      attention_backward(H, dh, T, Tq, Bt, scale, A.q, A.kk, A.v, A.p, dz, dq, dk, dv, dss, zc);
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
