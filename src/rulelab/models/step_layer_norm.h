// The step's LayerNorms (step_kernels.cpp): forward and backward over a tile's rows.
#pragma once

#include <cmath>
#include <cstdint>

#include "step_vectors.h"

namespace {

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
}  // namespace
