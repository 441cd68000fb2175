// pipeplan profile: an analytic layer profile of a transformer (before any
// run exists), written as the --layers CSV that search, simulate and
// compare read.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "ir/numbers.h"
#include "pipeplan/analytic.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/profile.h"

namespace pipeplan::cli {
namespace {

struct ProfileArgs {
  ModelShape shape;
  std::string arch;
  std::string dtype = "bf16";
  std::string attention = "flash";
  std::string core;  ///< "": the library's default (causal)
  DeviceSpec device;
  std::string output;
};

// An integer option in [lo, hi], checked where it is parsed (cli/common.h).
template <typename T>
CLI::Option* add_int(CLI::App& app, const std::string& names, T& value, const std::string& help,
                     long long lo, long long hi) {
  return app.add_option(names, value, help)->check(integer_in(lo, hi));
}

std::vector<std::string> header(const ProfileArgs& a, const ModelShape& m) {
  std::string shape = "pipeplan profile: " + a.arch + ", " + std::to_string(m.layers) +
                      " layers, hidden " + std::to_string(m.hidden) + ", heads " +
                      std::to_string(m.heads) + " (kv " + std::to_string(m.kv_heads) + "), ffn " +
                      std::to_string(m.ffn);
  if (m.arch == Arch::Moe) {
    shape += ", " + std::to_string(m.experts) + " experts top-" + std::to_string(m.top_k);
    if (m.shared_ffn > 0) shape += ", shared experts ffn " + std::to_string(m.shared_ffn);
    if (m.dense_layers > 0)
      shape += ", " + std::to_string(m.dense_layers) + " dense layers ffn " +
               std::to_string(m.dense_ffn);
  }
  shape += ", seq " + std::to_string(m.seq) + ", micro-batch " + std::to_string(m.micro_batch) +
           ", vocab " + std::to_string(m.vocab) + ", tp " + std::to_string(m.tp) + ", " + a.dtype +
           ", " + a.attention + " attention, " +
           (m.core == AttentionCore::Full ? "full" : "causal") + " attention core";
  std::string unit =
      a.device.tflops > 0
          ? "F,B,W,recompute in ms on " + detail::format_number(a.device.tflops) + " TFLOP/s" +
                (a.device.mem_bw > 0
                     ? " and " + detail::format_number(a.device.mem_bw) + " GB/s"
                     : std::string(" (memory traffic not counted: no --device-mem-bw)"))
          : std::string("F,B,W,recompute in GFLOP of work (no --device-tflops)");
  return {shape, unit + "; activation,input in GB (1e9 bytes) per microbatch",
          "formulas: docs/profiles.md"};
}

}  // namespace

std::function<int()> setup_profile(CLI::App& app) {
  auto args = std::make_shared<ProfileArgs>();
  ModelShape& m = args->shape;
  app.add_option("--arch", args->arch, "Model family: llama, gpt or moe")
      ->required()
      ->check(CLI::IsMember({"llama", "gpt", "moe"}));
  add_int(app, "--layers", m.layers, "Transformer layers", 1, limits::kMaxLayers - 3)->required();
  add_int(app, "--hidden", m.hidden, "Hidden size h", 1, 1 << 20)->required();
  add_int(app, "--heads", m.heads, "Attention heads", 1, 1 << 16)->required();
  add_int(app, "--kv-heads", m.kv_heads, "Key/value heads (grouped-query; default: --heads)", 1,
          1 << 16);
  add_int(app, "--ffn", m.ffn,
          "MLP width (moe: one expert's); default 4h (gpt), 8h/3 rounded up to 256 (llama, moe)", 1,
          1 << 24);
  add_int(app, "--experts", m.experts, "Routed experts (moe)", 1, 1 << 16);
  add_int(app, "--top-k", m.top_k, "Experts per token (moe)", 1, 1 << 16);
  add_int(
      app, "--shared-experts", m.shared_experts,
      "Shared experts every token passes (moe; torchtitan's num_shared_experts), each --ffn wide",
      0, 1 << 16);
  add_int(app, "--shared-expert-ffn", m.shared_ffn,
          "The shared experts' total width (moe; Megatron's moe_shared_expert_intermediate_size; "
          "default: --shared-experts x --ffn)",
          1, 1 << 24);
  add_int(app, "--dense-layers", m.dense_layers,
          "The first K layers have a dense SwiGLU MLP instead of experts (moe; torchtitan's "
          "n_dense_layers, DeepSeek's first_k_dense_replace)",
          0, limits::kMaxLayers - 3);
  add_int(app, "--dense-ffn", m.dense_ffn,
          "The dense layers' MLP width (moe; Megatron's ffn_hidden_size; default 8h/3 rounded up "
          "to 256)",
          1, 1 << 24);
  add_int(app, "--seq", m.seq, "Sequence length", 1, 1 << 24)->required();
  add_int(app, "--micro-batch", m.micro_batch, "Sequences per microbatch", 1, 1 << 20)->required();
  add_int(app, "--vocab", m.vocab,
          "Vocabulary size: adds the tok_embeddings, norm and lm_head layers (default: none)", 1,
          1 << 28);
  add_int(app, "--tp", m.tp, "Tensor-parallel degree (sequence parallel assumed; default 1)", 1,
          1 << 16);
  app.add_option("--dtype", args->dtype, "Activation dtype: bf16, fp16 or fp32 (default bf16)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  app.add_option("--attention", args->attention,
                 "flash (keeps no s x s scores; default) or eager (keeps the softmax)")
      ->check(CLI::IsMember({"flash", "eager"}));
  app.add_option("--attention-core", args->core,
                 "Attention-core FLOPs: causal (half the s x s scores, as Megatron-LM counts; "
                 "default) or full (all of them, as torchtitan 0.3.0 counts)")
      ->check(CLI::IsMember({"causal", "full"}));
  app.add_option("--device-tflops", args->device.tflops,
                 "Sustained dense TFLOP/s of one device in --dtype: times in ms (default: GFLOP)")
      ->check(number_in(0, 1e6, /*above_min=*/true));
  app.add_option("--device-mem-bw", args->device.mem_bw,
                 "Memory bandwidth in GB/s: adds elementwise traffic to the times")
      ->check(number_in(0, 1e7, /*above_min=*/true));
  app.add_option("-o,--output", args->output, "Layer CSV to write (default: stdout)");
  return [args]() {
    ModelShape shape = args->shape;
    shape.arch = args->arch == "gpt" ? Arch::Gpt : args->arch == "moe" ? Arch::Moe : Arch::Llama;
    shape.dtype_bytes = args->dtype == "fp32" ? 4 : 2;
    shape.attention = args->attention == "eager" ? Attention::Eager : Attention::Flash;
    if (!args->core.empty())
      shape.core = args->core == "full" ? AttentionCore::Full : AttentionCore::Causal;
    if (std::string why = model_shape_problem(shape); !why.empty()) throw InputError(why);
    const LayerProfile profile = analytic_profile(shape, args->device);
    Output out(args->output);
    write_layer_profile(profile, out.stream(), header(*args, resolved(shape)));
    out.close();
    double f = 0, b = 0, act = 0;
    for (const Layer& l : profile.layers) f += l.f, b += l.b, act += l.activation;
    const std::string unit = args->device.tflops > 0 ? " ms" : " GFLOP";
    spdlog::info("{} layers; one microbatch: F {}{}, B {}{}, activations {} GB", profile.size(),
                 detail::format_number(f, 4), unit, detail::format_number(b, 4), unit,
                 detail::format_number(act, 4));
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
