// The attention's core of one block over a tile (step_kernels.cpp), for every head and block
// of AW = 16 examples side by side in the vectors: the scores, their softmax and the values
// forward; the score gradients and dq, dk, dv backward. The weight products around it are the
// step's (MatMul); this is the part that is neither a weight matmul nor a LayerNorm.
#pragma once

#include <cstdint>

#include "step_matmuls.h"

// exp over n floats, a to r (MKL's vsExp through PyTorch, or the C library's), in `mode`
typedef void (*vexp_fn)(int n, const float* a, float* r, long long mode);

namespace {

// Forward, over rows r = p·Bt + b of T positions (Tq query positions: 1 in the last block, at
// CLS): every query's scores against the keys, scaled, less their max, then one exp over them
// all, normalized into p [H][Tq][T][Bt]; z [H·dh][Tq·Bt] = Σ_pk p[pk] · v[pk] in key order.
// q [H·dh][Tq·Bt], kk and v [H·dh][T·Bt].
inline void attention_forward(int64_t H, int64_t dh, int64_t T, int64_t Tq, int64_t Bt,
                              float scale, const float* q, const float* kk, const float* v,
                              float* p, float* z, va* scores, va* zc, vexp_fn vexp,
                              long long mode) {
  RL_CLOCK(rl_attn_cycles);
  const int64_t R = T * Bt, Rq = Tq * Bt;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t bv = 0; bv < Bt; bv += AW) {
      // every query's scores, less their max, then one exp over them all
      for (int64_t pq = 0; pq < Tq; ++pq) {
        va* sc = scores + pq * T;
        // sc[pk] = Σ_j q[j] · k[j][pk], the keys side by side
        chains_all(q + h * dh * Rq + pq * Bt + bv, Rq, kk + h * dh * R + bv, R, Bt, dh,
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
        float* pp = p + ((h * Tq + pq) * T) * Bt + bv;
        for (int64_t pk = 0; pk < T; ++pk) sta(pp + pk * Bt, sc[pk]);
        // z[j] = Σ_pk p[pk] · v[j][pk], the features side by side
        chains_all(reinterpret_cast<const float*>(sc), AW, v + h * dh * R + bv, Bt, R, T,
                   dh, zc);
        for (int64_t j = 0; j < dh; ++j) sta(z + (h * dh + j) * Rq + pq * Bt + bv, zc[j]);
      }
    }
}

// Backward, given dz [H·dh][Tq·Bt]: each query's score gradients ds (and dq), then dk and dv as
// sums over the queries in query order (fma chains from 0, in registers); dq [H·dh][Tq·Bt], dk
// and dv [H·dh][T·Bt] overwritten. dss holds a block's score gradients [Tq][T].
inline void attention_backward(int64_t H, int64_t dh, int64_t T, int64_t Tq, int64_t Bt,
                               float scale, const float* q, const float* kk, const float* v,
                               const float* p, const float* dz, float* dq, float* dk,
                               float* dv, va* dss, va* zc) {
  RL_CLOCK(rl_attn_cycles);
  const int64_t R = T * Bt, Rq = Tq * Bt;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t bv = 0; bv < Bt; bv += AW) {
      for (int64_t pq = 0; pq < Tq; ++pq) {
        const float* pp = p + ((h * Tq + pq) * T) * Bt + bv;
        va* ds = dss + pq * T;
        va dot = bca(0.0f);
        // ds[pk] = Σ_j dz[j] · v[j][pk], the keys side by side; then Σ p·ds in key order
        chains_all(dz + h * dh * Rq + pq * Bt + bv, Rq, v + h * dh * R + bv, R, Bt, dh, T,
                   ds);
        for (int64_t pk = 0; pk < T; ++pk) dot = fma(lda(pp + pk * Bt), ds[pk], dot);
        for (int64_t pk = 0; pk < T; ++pk) ds[pk] = lda(pp + pk * Bt) * (ds[pk] - dot) * scale;
        // dq[j] = Σ_pk ds[pk] · k[j][pk], the features side by side
        chains_all(reinterpret_cast<const float*>(ds), AW, kk + h * dh * R + bv, Bt, R, T,
                   dh, zc);
        for (int64_t j = 0; j < dh; ++j) sta(dq + (h * dh + j) * Rq + pq * Bt + bv, zc[j]);
      }
      // dv[j][pk] = Σ_pq p[pq][pk] · dz[j][pq], dk[j][pk] = Σ_pq ds[pq][pk] · q[j][pq],
      // the features side by side
      for (int64_t pk = 0; pk < T; ++pk) {
        chains_all(p + (h * Tq * T + pk) * Bt + bv, T * Bt, dz + h * dh * Rq + bv, Bt, Rq,
                   Tq, dh, zc);
        for (int64_t j = 0; j < dh; ++j) sta(dv + (h * dh + j) * R + pk * Bt + bv, zc[j]);
        chains_all(reinterpret_cast<const float*>(dss + pk), T * AW, q + h * dh * Rq + bv,
                   Bt, Rq, Tq, dh, zc);
        for (int64_t j = 0; j < dh; ++j) sta(dk + (h * dh + j) * R + pk * Bt + bv, zc[j]);
      }
    }
}

}  // namespace
