// Analytic layer profiles: what each layer of a transformer costs for one
// microbatch, from its shape alone, so a model can be planned before its
// first run (`pipeplan profile`). Formulas and sources: docs/profiles.md.
//
// @code
//   ModelShape m;
//   m.arch = Arch::Llama;
//   m.layers = 80; m.hidden = 8192; m.heads = 64; m.kv_heads = 8;
//   m.ffn = 28672; m.vocab = 32000; m.seq = 4096; m.micro_batch = 1; m.tp = 8;
//   DeviceSpec d;
//   d.tflops = 495;  // sustained dense bf16 TFLOP/s
//   d.mem_bw = 3350;  // GB/s
//   LayerProfile p = analytic_profile(m, d);  // tok_embeddings, layers.0.., norm, lm_head
// @endcode
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeplan/profile.h"

namespace pipeplan {

/// Transformer families: GPT (LayerNorm, GeLU MLP, dropout, learned
/// positions), Llama (RMSNorm, SwiGLU, rotary, grouped-query attention, no
/// dropout), and Llama-style attention with a top-k mixture-of-experts MLP.
enum class Arch : std::uint8_t { Llama, Gpt, Moe };
/// Flash attention keeps no s x s score matrix (only its log-sum-exp);
/// eager attention keeps the softmax output (and its dropout, for GPT).
enum class Attention : std::uint8_t { Flash, Eager };
/// How the attention core (QK^T and AV) is counted: causal counts the half
/// of the s x s scores a causal mask keeps (Megatron-LM's
/// num_floating_point_operations, "/ 2 # causal mask"); full counts all of
/// them (torchtitan 0.3.0's get_nparams_and_flops, Narayanan et al. 2021).
enum class AttentionCore : std::uint8_t { Causal, Full };

/// A model and one microbatch of it. 0 in kv_heads / ffn / vocab means the
/// default named on each field.
struct ModelShape {
  Arch arch = Arch::Llama;
  int layers = 1;
  std::int64_t hidden = 1;
  int heads = 1;
  int kv_heads = 0;  ///< 0: = heads
  std::int64_t ffn =
      0;            ///< MLP (or one expert's) width; 0: 4h (gpt), else 8h/3 up to a multiple of 256
  int experts = 0;  ///< moe only: routed experts
  int top_k = 0;    ///< moe only: experts per token
  int shared_experts = 0;       ///< moe only: shared experts every token passes through
  std::int64_t shared_ffn = 0;  ///< moe only: their total width; 0: shared_experts x ffn
  int dense_layers = 0;         ///< moe only: the first K layers have a dense MLP
  std::int64_t dense_ffn = 0;   ///< their MLP width; 0: 8h/3 up to a multiple of 256
  std::int64_t seq = 1;
  std::int64_t micro_batch = 1;
  std::int64_t vocab = 0;  ///< 0: no embedding and LM-head layers
  int tp = 1;              ///< tensor parallel degree (sequence parallel assumed)
  int dtype_bytes = 2;     ///< activations' element size (bf16, fp16: 2; fp32: 4)
  Attention attention = Attention::Flash;
  AttentionCore core = AttentionCore::Causal;
};

/// The device a time is estimated for. tflops = 0: times are reported in
/// GFLOP of work instead of ms (mem_bw must then be 0 too).
struct DeviceSpec {
  double tflops = 0.0;  ///< sustained dense matmul TFLOP/s in the model's dtype
  double mem_bw = 0.0;  ///< GB/s for memory-bound (elementwise) work; 0: not counted
};

/// What one layer does for one microbatch on one tensor-parallel rank.
struct LayerWork {
  std::string name;
  double f_flops = 0.0;  ///< forward matmul FLOPs
  double i_flops = 0.0;  ///< input-gradient FLOPs (weights' input grads + 2x attention core)
  double w_flops = 0.0;  ///< weight-gradient FLOPs (= the forward's weight matmuls)
  double f_bytes = 0.0;  ///< forward elementwise memory traffic
  double i_bytes = 0.0;  ///< input-gradient elementwise traffic (2x the forward's)
  double w_bytes = 0.0;  ///< weight-gradient traffic (the embedding's scatter-add)
  double activation_bytes = 0.0;  ///< kept from F until the backward, no recompute
  double input_bytes = 0.0;       ///< the layer's input (kept under full recompute)
  /// The parts of f_flops, i_flops, f_bytes and i_bytes that grow with the
  /// square of the sequence length: attention's core over the s x s scores
  /// (and, eager, the scores' traffic). W has none.
  double f_quad_flops = 0.0, i_quad_flops = 0.0, f_quad_bytes = 0.0, i_quad_bytes = 0.0;
};

/// Why `m` is not a shape this model can take ("" when it is): ranges, heads
/// dividing hidden, kv heads dividing heads, tp dividing heads, moe fields.
std::string model_shape_problem(const ModelShape& m);

/// The resolved defaults of `m` (kv_heads, ffn, shared_ffn, dense_ffn) filled in.
ModelShape resolved(const ModelShape& m);

/// Per-layer work, in pipeline order: "tok_embeddings" (when vocab > 0),
/// "layers.0" .. "layers.N-1", then "norm" and "output" (when vocab > 0).
/// Throws InputError when model_shape_problem(m) is not empty.
std::vector<LayerWork> analytic_layers(const ModelShape& m);

/// The layer profile of `m` on `d`: F = f_flops / peak + f_bytes / bandwidth,
/// I and W likewise, B = I + W (ms; GFLOP when d.tflops = 0);
/// activation and input in GB (10^9 bytes); recompute = F; F_quad and
/// B_quad from the quadratic parts likewise; seq_len = seq x micro_batch
/// tokens. Throws
/// InputError for a bad shape or device, or a value beyond the profile's
/// limits.
LayerProfile analytic_profile(const ModelShape& m, const DeviceSpec& d);

}  // namespace pipeplan
