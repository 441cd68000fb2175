// analytic_profile(): per-layer FLOPs, memory traffic and activation sizes
// of a transformer from its shape (docs/profiles.md states every term and
// where it comes from).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/numbers.h"
#include "pipeplan/analytic.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

// Upper bounds of the shape fields: far beyond any model, low enough that
// every product below stays exact in a double.
constexpr std::int64_t kMaxHidden = 1 << 20;
constexpr std::int64_t kMaxFfn = 1 << 24;
constexpr std::int64_t kMaxSeq = 1 << 24;
constexpr std::int64_t kMaxMicroBatch = 1 << 20;
constexpr std::int64_t kMaxVocab = 1 << 28;
constexpr int kMaxHeads = 1 << 16;
constexpr int kMaxExperts = 1 << 16;
constexpr int kMaxTp = 1 << 16;

std::string out_of_range(const char* what, long long v, long long lo, long long hi) {
  return std::string(what) + " " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
         std::to_string(hi);
}

// The sizes the formulas read, as doubles.
struct Dims {
  double T, s, b, h, a, r, f, V, t, p, E, K;
  double fs;    // moe: the shared experts' total width (0: none)
  double fd;    // moe: the dense layers' MLP width
  double core;  // the attention core's FLOPs per b s^2 h: 4 (full) or 2 (causal)
  bool gpt, moe, eager;
};

Dims dims_of(const ModelShape& m) {
  Dims d{};
  d.s = static_cast<double>(m.seq);
  d.b = static_cast<double>(m.micro_batch);
  d.T = d.s * d.b;
  d.h = static_cast<double>(m.hidden);
  d.a = m.heads;
  d.r = static_cast<double>(m.kv_heads) / m.heads;
  d.f = static_cast<double>(m.ffn);
  d.V = static_cast<double>(m.vocab);
  d.t = m.tp;
  d.p = m.dtype_bytes;
  d.E = m.experts;
  d.K = m.top_k;
  d.fs = static_cast<double>(m.shared_ffn);
  d.fd = static_cast<double>(m.dense_ffn);
  d.core = m.core == AttentionCore::Full ? 4 : 2;
  d.gpt = m.arch == Arch::Gpt;
  d.moe = m.arch == Arch::Moe;
  d.eager = m.attention == Attention::Eager;
  return d;
}

// What one MLP adds: forward matmul FLOPs, bytes kept, elementwise traffic.
struct Part {
  double flops = 0, act = 0, bytes = 0;
};

// A SwiGLU MLP of width f: three matmuls; keeps w1's output, silu's, w3's
// and their product; moves silu and the product.
Part swiglu(const Dims& d, double f) {
  return {6 * d.T * d.h * f, 4 * d.p * d.T * f, 5 * d.p * d.T * f};
}

// The MLP half of a layer, after its norm: gpt's GeLU MLP, a dense SwiGLU
// (llama, moe's first dense layers), or the router, K routed experts and
// the shared experts.
Part mlp_of(const Dims& d, bool dense_layer) {
  const double T = d.T, h = d.h, p = d.p, f = d.f;
  Part m;
  if (d.gpt) {
    m.flops = 4 * T * h * f;
    m.act = T * h + 2 * p * T * h + 2 * p * T * f + T * h;  // attn-out dropout mask; LN in,
                                                            // fc1 in, GeLU in, fc2 in; mask
    m.bytes = 2 * p * T * f + 2 * (2 * p + 1) * T * h;      // GeLU; two dropouts
    return m;
  }
  if (!d.moe || dense_layer) {
    const Part g = swiglu(d, d.moe ? d.fd : f);
    m.flops = g.flops;
    m.act = 2 * p * T * h + g.act;  // norm input, w1/w3 input; the SwiGLU's
    m.bytes = g.bytes;
    return m;
  }
  const Part routed = swiglu(d, f), shared = swiglu(d, d.fs);
  m.flops = 2 * T * h * d.E + d.K * routed.flops + shared.flops;  // router, top-k, shared
  m.act = 2 * p * T * h + p * T * d.E;          // norm input, router input; scores
  m.act += d.K * (2 * p * T * h + routed.act);  // per routed copy: input, SwiGLU, output
  m.act += shared.act;                          // the shared experts read the router's input
  m.bytes = d.K * routed.bytes + shared.bytes;
  return m;
}

// One transformer layer (attention + MLP or MoE), per tensor-parallel rank.
LayerWork block(const Dims& d, const std::string& name, bool dense_layer) {
  const double T = d.T, h = d.h, p = d.p, r = d.r;
  LayerWork w;
  w.name = name;
  // Matmul FLOPs, 2 per multiply-add. Attention: Q, K, V and the output
  // projection; the core QK^T and AV (no weights) over the s x s scores, or
  // the half a causal mask keeps.
  const double attn_weights = 2 * T * h * h * (2 + 2 * r);
  const double core = d.core * d.b * d.s * d.s * h;
  const Part mlp = mlp_of(d, dense_layer);
  w.f_flops = (attn_weights + core + mlp.flops) / d.t;
  w.w_flops = (attn_weights + mlp.flops) / d.t;
  w.i_flops = (attn_weights + mlp.flops + 2 * core) / d.t;
  w.f_quad_flops = core / d.t;
  w.i_quad_flops = 2 * core / d.t;

  // Activations kept for the backward (Korthikanti et al. 2022, section 4.1):
  // the norm's input, QKV's input, Q, K, V, the output projection's input.
  double act = p * T * h * (4 + 2 * r);
  const double scores = d.a * d.s * d.s * d.b;
  if (d.eager)
    act += d.gpt ? (2 * p + 1) * scores : p * scores;  // softmax (+ dropout mask, output)
  else act += 4 * d.a * d.s * d.b;                     // flash: fp32 log-sum-exp
  act += mlp.act;
  w.activation_bytes = act / d.t;
  w.input_bytes = p * T * h / d.t;

  // Elementwise traffic (read + write): two norms, two residual adds, and
  // the pointwise ops of attention and the MLP; the backward moves twice it.
  double bytes = 4 * p * T * h + 6 * p * T * h + mlp.bytes;
  if (!d.gpt) bytes += 2 * p * T * h * (1 + r);  // rotary on Q and K
  const double score_bytes = d.eager ? (d.gpt ? 4 * p + 1 : 2 * p) * scores : 0.0;
  bytes += score_bytes;  // softmax (+ dropout)
  w.f_bytes = bytes / d.t;
  w.i_bytes = 2 * w.f_bytes;
  w.f_quad_bytes = score_bytes / d.t;
  w.i_quad_bytes = 2 * w.f_quad_bytes;
  return w;
}

std::vector<LayerWork> head_and_tail(const Dims& d, bool head) {
  const double T = d.T, h = d.h, p = d.p;
  std::vector<LayerWork> out;
  if (head) {
    LayerWork e;
    e.name = "tok_embeddings";
    e.f_bytes = (d.gpt ? 5 : 2) * p * T * h;     // gather the rows (+ add learned positions)
    e.w_bytes = 2 * p * T * h;                   // scatter-add into the table's gradient
    e.activation_bytes = e.input_bytes = 8 * T;  // the token ids (int64)
    out.push_back(e);
    return out;
  }
  LayerWork n;
  n.name = "norm";
  n.f_bytes = 2 * p * T * h / d.t;
  n.i_bytes = 2 * n.f_bytes;
  n.activation_bytes = n.input_bytes = p * T * h / d.t;
  out.push_back(n);
  LayerWork o;
  o.name = "lm_head";  // torchtitan 0.3.0's llama model (models/common/decoder.py)
  o.f_flops = o.i_flops = o.w_flops = 2 * T * h * d.V / d.t;
  o.f_bytes = 12 * T * d.V / d.t;  // fp32 logits: cast, log-softmax (read + write)
  o.i_bytes = 2 * o.f_bytes;
  o.input_bytes = p * T * h / d.t;
  o.activation_bytes = o.input_bytes + 4 * T * d.V / d.t;  // its input and the fp32 logits
  out.push_back(o);
  return out;
}

double to_unit(double flops, double bytes, const DeviceSpec& dev) {
  if (dev.tflops <= 0) return flops / 1e9;               // GFLOP
  double ms = flops / (dev.tflops * 1e9);                // FLOP / (FLOP per ms)
  if (dev.mem_bw > 0) ms += bytes / (dev.mem_bw * 1e6);  // bytes / (bytes per ms)
  return ms;
}

// Llama's MLP width without a multiplier: 8h/3 rounded up to 256.
std::int64_t swiglu_width(std::int64_t hidden) {
  const std::int64_t want = (8 * hidden + 2) / 3;  // ceil(8h / 3)
  return (want + 255) / 256 * 256;
}

}  // namespace

ModelShape resolved(const ModelShape& m) {
  ModelShape r = m;
  if (r.kv_heads == 0) r.kv_heads = r.heads;
  if (r.ffn == 0) r.ffn = r.arch == Arch::Gpt ? 4 * r.hidden : swiglu_width(r.hidden);
  if (r.shared_ffn == 0) r.shared_ffn = static_cast<std::int64_t>(r.shared_experts) * r.ffn;
  if (r.dense_ffn == 0 && r.dense_layers > 0) r.dense_ffn = swiglu_width(r.hidden);
  return r;
}

std::string model_shape_problem(const ModelShape& in) {
  const ModelShape m = resolved(in);
  if (m.layers < 1 || m.layers > limits::kMaxLayers - 3)
    return out_of_range("layers", m.layers, 1, limits::kMaxLayers - 3);
  if (m.hidden < 1 || m.hidden > kMaxHidden) return out_of_range("hidden", m.hidden, 1, kMaxHidden);
  if (m.heads < 1 || m.heads > kMaxHeads) return out_of_range("heads", m.heads, 1, kMaxHeads);
  if (m.hidden % m.heads != 0)
    return "hidden " + std::to_string(m.hidden) + " is not a multiple of heads " +
           std::to_string(m.heads);
  if (m.kv_heads < 1 || m.kv_heads > m.heads)
    return out_of_range("kv-heads", m.kv_heads, 1, m.heads);
  if (m.heads % m.kv_heads != 0)
    return "heads " + std::to_string(m.heads) + " is not a multiple of kv-heads " +
           std::to_string(m.kv_heads);
  if (m.arch == Arch::Gpt && m.kv_heads != m.heads)
    return "gpt has no grouped-query attention (kv-heads must equal heads)";
  if (m.ffn < 1 || m.ffn > kMaxFfn) return out_of_range("ffn", m.ffn, 1, kMaxFfn);
  if (m.arch == Arch::Moe) {
    if (m.experts < 1 || m.experts > kMaxExperts)
      return out_of_range("experts", m.experts, 1, kMaxExperts);
    if (m.top_k < 1 || m.top_k > m.experts) return out_of_range("top-k", m.top_k, 1, m.experts);
    if (m.shared_experts < 0 || m.shared_experts > kMaxExperts)
      return out_of_range("shared-experts", m.shared_experts, 0, kMaxExperts);
    if (m.shared_ffn < 0 || m.shared_ffn > kMaxFfn)
      return out_of_range("shared-expert-ffn", m.shared_ffn, 0, kMaxFfn);
    if (m.dense_layers < 0 || m.dense_layers > m.layers)
      return out_of_range("dense-layers", m.dense_layers, 0, m.layers);
    if (m.dense_ffn < 0 || m.dense_ffn > kMaxFfn)
      return out_of_range("dense-ffn", m.dense_ffn, 0, kMaxFfn);
    if (m.dense_ffn > 0 && m.dense_layers == 0) return "dense-ffn needs dense-layers";
  } else if (m.experts != 0 || m.top_k != 0) {
    return "experts and top-k belong to the moe architecture";
  } else if (m.shared_experts != 0 || m.shared_ffn != 0 || m.dense_layers != 0 ||
             m.dense_ffn != 0) {
    return "shared experts and dense layers belong to the moe architecture";
  }
  if (m.seq < 1 || m.seq > kMaxSeq) return out_of_range("seq", m.seq, 1, kMaxSeq);
  if (m.micro_batch < 1 || m.micro_batch > kMaxMicroBatch)
    return out_of_range("micro-batch", m.micro_batch, 1, kMaxMicroBatch);
  if (m.vocab < 0 || m.vocab > kMaxVocab) return out_of_range("vocab", m.vocab, 0, kMaxVocab);
  if (m.tp < 1 || m.tp > kMaxTp) return out_of_range("tp", m.tp, 1, kMaxTp);
  if (m.heads % m.tp != 0)
    return "tp " + std::to_string(m.tp) + " does not divide heads " + std::to_string(m.heads);
  if (m.dtype_bytes != 1 && m.dtype_bytes != 2 && m.dtype_bytes != 4)
    return "dtype size must be 1, 2 or 4 bytes";
  return {};
}

namespace {

// The layers of a resolved, checked shape.
std::vector<LayerWork> layers_of(const ModelShape& m) {
  const Dims d = dims_of(m);
  std::vector<LayerWork> out;
  out.reserve(static_cast<std::size_t>(m.layers) + 3);
  if (m.vocab > 0) out.push_back(head_and_tail(d, true).front());
  for (int l = 0; l < m.layers; ++l)
    out.push_back(block(d, "layers." + std::to_string(l), l < m.dense_layers));
  if (m.vocab > 0)
    for (LayerWork& w : head_and_tail(d, false)) out.push_back(std::move(w));
  return out;
}

}  // namespace

std::vector<LayerWork> analytic_layers(const ModelShape& in) {
  if (std::string why = model_shape_problem(in); !why.empty()) throw InputError(why);
  return layers_of(resolved(in));
}

LayerProfile analytic_profile(const ModelShape& m, const DeviceSpec& dev) {
  if (!std::isfinite(dev.tflops) || dev.tflops < 0 || dev.tflops > 1e6)
    throw InputError("device TFLOP/s must be in (0, 1e6], got " +
                     detail::format_number(dev.tflops));
  if (!std::isfinite(dev.mem_bw) || dev.mem_bw < 0 || dev.mem_bw > 1e7)
    throw InputError("device memory bandwidth must be in (0, 1e7] GB/s, got " +
                     detail::format_number(dev.mem_bw));
  if (dev.mem_bw > 0 && dev.tflops <= 0)
    throw InputError("a memory bandwidth needs the device's TFLOP/s too (times are then in ms)");
  const std::vector<LayerWork> work = analytic_layers(m);
  LayerProfile profile;
  // Tokens per microbatch: a microbatch of L tokens costs as one whose
  // sequences are L / seq_len times as long (docs/lengths.md).
  profile.seq_len = static_cast<double>(m.seq) * static_cast<double>(m.micro_batch);
  for (const LayerWork& w : work) {
    Layer l;
    l.name = w.name;
    l.f = to_unit(w.f_flops, w.f_bytes, dev);
    const double i = to_unit(w.i_flops, w.i_bytes, dev);
    l.w = to_unit(w.w_flops, w.w_bytes, dev);
    l.b = i + l.w;
    l.activation = w.activation_bytes / 1e9;
    l.input = w.input_bytes / 1e9;
    l.recompute = l.f;
    l.f_quad = to_unit(w.f_quad_flops, w.f_quad_bytes, dev);
    l.b_quad = to_unit(w.i_quad_flops, w.i_quad_bytes, dev);  // W has no quadratic part
    for (double v : {l.f, l.b, l.activation})
      if (!(v <= limits::kMaxCost))
        throw InputError("layer " + l.name + " costs more than the supported 1e+12 (" +
                         detail::format_number(v) + "); use a smaller shape or a faster device");
    profile.layers.push_back(std::move(l));
  }
  return profile;
}

}  // namespace pipeplan
