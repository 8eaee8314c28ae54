// Token and position embeddings written straight into the residual stream's lane layout
// [E, d, T, B], and their backward: rulelab/models/lane_embedding.py (issue 25, engines 8, 9).
//
// Forward: out[e, c, t, b] = W_E[e, tok[e, t, b], c] + W_pos[e, t, c] — one IEEE add, as
// PyTorch's `embedding + W_pos` computes it, with no [E, T, B, d] tensor and no transposing
// copy after it.
// Backward, given g [E, d, T, B] (the gradient of out):
//     dW_E[e, v, c] = 0 + g[e, c, t₀, b₀] + g[e, c, t₁, b₁] + …   over the (t, b) with
//                     tok[e, t, b] = v, in increasing (t, b) order
// — the very chain PyTorch's embedding_dense_backward on the CPU adds (index_add of each
// index's row in index order, into zeros), without the contiguous [E, T, B, d] copy of g it
// needs and without its one small add per index. dW_pos is a sum over b that PyTorch computes
// (lane_embedding.py). Adds only, nothing across members: a member equals its solo run.
//
// Tokens are int64, member e's ids in [0, V); B a multiple of W.

#include <cstdint>

namespace {

constexpr int64_t W = 16;     // examples per tile (the caller pads B to a multiple)
constexpr int64_t DMAX = 256;  // features at most (lane_embedding.py falls back beyond)

}  // namespace

extern "C" {

// out [E, d, T, B] contiguous; W_E [E, V, d], W_pos [E, P, d] contiguous (P ≥ T). Returns 0,
// or 1 at the first tile with a token out of [0, V) (out is then partly written: the caller
// raises and discards it).
int64_t rl_embed_forward(const int64_t* tok, const float* w_e, const float* w_pos, float* out,
                         int64_t E, int64_t V, int64_t P, int64_t d, int64_t T, int64_t B) {
  alignas(64) float tile[W][DMAX];  // [example][feature]: rows gathered, then transposed
  for (int64_t e = 0; e < E; ++e)
    for (int64_t t = 0; t < T; ++t) {
      const float* pos = w_pos + (e * P + t) * d;
      for (int64_t b0 = 0; b0 < B; b0 += W) {
        const int64_t* tk = tok + (e * T + t) * B + b0;
        for (int64_t j = 0; j < W; ++j) {
          if (tk[j] < 0 || tk[j] >= V) return 1;
          const float* row = w_e + (e * V + tk[j]) * d;
          for (int64_t c = 0; c < d; ++c) tile[j][c] = row[c] + pos[c];
        }
        float* o = out + (e * d * T + t) * B + b0;
        for (int64_t c = 0; c < d; ++c)
          for (int64_t j = 0; j < W; ++j) o[c * T * B + j] = tile[j][c];
      }
    }
  return 0;
}

// dW_E [E, V, d] (contiguous; zeroed here) from g [E, d, T, B] (g[e, c, t, b] at
// g + e·g_e + c·g_c + t·B + b): every row's chain in increasing (t, b) order.
void rl_embed_backward(const int64_t* tok, const float* g, int64_t g_e, int64_t g_c, float* dw_e,
                       int64_t E, int64_t V, int64_t d, int64_t T, int64_t B) {
  alignas(64) float tile[W][DMAX];  // [example][feature]: g's columns, transposed
  for (int64_t i = 0; i < E * V * d; ++i) dw_e[i] = 0.0f;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b0 = 0; b0 < B; b0 += W) {
        const float* gt = g + e * g_e + t * B + b0;
        for (int64_t c = 0; c < d; ++c)
          for (int64_t j = 0; j < W; ++j) tile[j][c] = gt[c * g_c + j];
        const int64_t* tk = tok + (e * T + t) * B + b0;
        for (int64_t j = 0; j < W; ++j) {  // in example order: each row's chain as PyTorch's
          float* row = dw_e + (e * V + tk[j]) * d;
          for (int64_t c = 0; c < d; ++c) row[c] = row[c] + tile[j][c];
        }
      }
}

}  // extern "C"
