// Analytic layer profiles against hand calculations, and the layer-profile
// CSV's optional columns (input, recompute) read, checked and written back.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/analytic.h"
#include "pipeplan/error.h"
#include "pipeplan/profile.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::run_cli;

namespace {

ModelShape small_llama() {
  ModelShape m;
  m.arch = Arch::Llama;
  m.layers = 2, m.hidden = 64, m.heads = 4, m.kv_heads = 2, m.ffn = 128;
  m.seq = 16, m.micro_batch = 2, m.vocab = 100;
  return m;
}

}  // namespace

TEST_CASE("analytic: a small llama layer by hand", "[analytic]") {
  const auto layers = analytic_layers(small_llama());
  REQUIRE(layers.size() == 5);
  CHECK(layers[0].name == "tok_embeddings");
  CHECK(layers[1].name == "layers.0");
  CHECK(layers[3].name == "norm");
  CHECK(layers[4].name == "lm_head");
  const LayerWork& l = layers[1];
  // T = 32 tokens, h = 64, kv/heads = 1/2, f = 128.
  // QKV 2*32*64*(64 + 2*32) + out 2*32*64*64 = 786432; core, causal (half the
  // scores, Megatron's count) 2*2*16^2*64 = 65536; SwiGLU 6*32*64*128 = 1572864.
  CHECK(l.f_flops == 786432.0 + 65536.0 + 1572864.0);
  CHECK(l.w_flops == 786432.0 + 1572864.0);
  CHECK(l.i_flops == 786432.0 + 1572864.0 + 2 * 65536.0);
  // The full s x s (torchtitan's count): the core doubles, nothing else moves.
  ModelShape full = small_llama();
  full.core = AttentionCore::Full;
  const LayerWork lf = analytic_layers(full)[1];
  CHECK(lf.f_flops == 786432.0 + 131072.0 + 1572864.0);
  CHECK(lf.w_flops == l.w_flops);
  CHECK(lf.i_flops == 786432.0 + 1572864.0 + 2 * 131072.0);
  CHECK(lf.activation_bytes == l.activation_bytes);
  // Kept: norm in, QKV in, Q, out-proj in (4 x 2*32*64), K and V (2 x 2*32*32),
  // fp32 LSE 4*4*16*2, MLP norm in + w1/w3 in 2 x 4096, SwiGLU 4 x 2*32*128.
  CHECK(l.activation_bytes == 4 * 4096.0 + 2 * 2048.0 + 512.0 + 2 * 4096.0 + 4 * 8192.0);
  CHECK(l.input_bytes == 4096.0);
  // The LM head: 2*32*64*100 per pass; keeps its input and the fp32 logits.
  CHECK(layers[4].f_flops == 409600.0);
  CHECK(layers[4].activation_bytes == 4096.0 + 4 * 32 * 100.0);
  CHECK(layers[0].activation_bytes == 8 * 32.0);  // token ids
}

TEST_CASE("analytic: GPT with eager attention is Korthikanti's sbh(34 + 5as/h)", "[analytic]") {
  ModelShape m;
  m.arch = Arch::Gpt;
  m.layers = 1, m.hidden = 1024, m.heads = 16, m.seq = 2048, m.micro_batch = 4;
  m.attention = Attention::Eager;
  const double s = 2048, b = 4, h = 1024, a = 16;
  CHECK(analytic_layers(m)[0].activation_bytes == s * b * h * (34 + 5 * a * s / h));
  m.tp = 4;  // sequence parallel: everything split over t
  CHECK(analytic_layers(m)[0].activation_bytes == s * b * h * (34 + 5 * a * s / h) / 4);
  CHECK(analytic_layers(m)[0].input_bytes == 2 * s * b * h / 4);
  // 24 b s h^2 (1 + s / (6h)) forward FLOPs per layer (Narayanan et al. 2021, the full
  // s x s), split over t; causal (the default) halves the core: 1 + s / (12h).
  CHECK(analytic_layers(m)[0].f_flops == Approx(24 * b * s * h * h * (1 + s / (12 * h)) / 4));
  m.core = AttentionCore::Full;
  CHECK(analytic_layers(m)[0].f_flops == Approx(24 * b * s * h * h * (1 + s / (6 * h)) / 4));
}

TEST_CASE("analytic: moe layers route top-k of E experts", "[analytic]") {
  ModelShape m = small_llama();
  m.arch = Arch::Moe;
  m.experts = 8, m.top_k = 2, m.vocab = 0;
  const auto layers = analytic_layers(m);
  REQUIRE(layers.size() == 2);
  // Router 2*32*64*8 + 2 experts x 6*32*64*128 replaces the dense MLP.
  CHECK(layers[0].f_flops == 786432.0 + 65536.0 + 2 * 32 * 64 * 8.0 + 2 * 1572864.0);
  // One shared expert (--ffn wide) and a dense first layer (8h/3 up to 256 = 256 wide).
  ModelShape ds = m;
  ds.shared_experts = 1, ds.dense_layers = 1;
  CHECK(resolved(ds).shared_ffn == 128);
  CHECK(resolved(ds).dense_ffn == 256);
  const auto dl = analytic_layers(ds);
  CHECK(dl[0].f_flops == 786432.0 + 65536.0 + 6 * 32 * 64 * 256.0);
  CHECK(dl[1].f_flops == layers[1].f_flops + 1572864.0);
  CHECK(dl[1].w_flops == layers[1].w_flops + 1572864.0);
  CHECK(dl[1].activation_bytes == layers[1].activation_bytes + 4 * 2 * 32 * 128.0);
  // The dense layer is a llama layer with f = 256.
  ModelShape dense = small_llama();
  dense.ffn = 256, dense.vocab = 0;
  CHECK(dl[0].activation_bytes == analytic_layers(dense)[0].activation_bytes);
  CHECK(dl[0].f_bytes == analytic_layers(dense)[0].f_bytes);
  ds.shared_ffn = 512;  // Megatron's moe_shared_expert_intermediate_size wins over the count
  CHECK(analytic_layers(ds)[1].f_flops == layers[1].f_flops + 6 * 32 * 64 * 512.0);
  ds.dense_layers = 3;
  CHECK(model_shape_problem(ds) == "dense-layers 3 is outside 0..2");
  ds.dense_layers = 0, ds.dense_ffn = 256;
  CHECK(model_shape_problem(ds) == "dense-ffn needs dense-layers");
  CHECK(model_shape_problem([] {
          ModelShape x = small_llama();
          x.shared_experts = 1;
          return x;
        }()) == "shared experts and dense layers belong to the moe architecture");
  CHECK_THROWS_WITH(analytic_layers([] {
                      ModelShape x = small_llama();
                      x.experts = 4;
                      return x;
                    }()),
                    Catch::Contains("experts and top-k belong to the moe architecture"));
}

TEST_CASE("analytic: the profile in ms on a device, and its defaults", "[analytic]") {
  DeviceSpec d;
  d.tflops = 1;  // 1e12 FLOP/s: 1e9 FLOP = 1 ms
  const LayerProfile p = analytic_profile(small_llama(), d);
  const Layer& l = p.layers[1];
  CHECK(l.f == Approx(2424832e-9));
  CHECK(l.w == Approx(2359296e-9));
  CHECK(l.b == Approx((2359296.0 + 2490368.0) * 1e-9));
  CHECK(l.recompute_time() == l.f);
  CHECK(l.input_size() == Approx(4096e-9));
  d.mem_bw = 1000;  // GB/s: bytes add time
  CHECK(analytic_profile(small_llama(), d).layers[1].f > l.f);
  // Defaults: ffn = 8h/3 up to a multiple of 256 (llama), 4h (gpt); kv = heads.
  ModelShape m;
  m.hidden = 4096, m.heads = 32;
  CHECK(resolved(m).ffn == 11008);
  CHECK(resolved(m).kv_heads == 32);
  m.arch = Arch::Gpt;
  CHECK(resolved(m).ffn == 16384);
  CHECK(model_shape_problem([] {
          ModelShape x;
          x.hidden = 100, x.heads = 3;
          return x;
        }()) == "hidden 100 is not a multiple of heads 3");
  d.tflops = 0;
  CHECK_THROWS_WITH(analytic_profile(small_llama(), d), Catch::Contains("needs the device's"));
}

TEST_CASE("profile: the optional input and recompute columns", "[profile][io]") {
  const LayerProfile p = parse_layer_profile(
      "name,F,B,W,activation,recompute,input\na,1,2,1,3,0.5,0.25\nb,2,4,1,1,2,1\n", "x.csv");
  CHECK(*p.layers[0].recompute == 0.5);
  CHECK(p.layers[0].input_size() == 0.25);
  const LayerProfile plain = parse_layer_profile("name,F,B,W,activation\na,1,2,1,3\n", "y.csv");
  CHECK(!plain.layers[0].input);
  CHECK(plain.layers[0].input_size() == 3);      // default: activation
  CHECK(plain.layers[0].recompute_time() == 1);  // default: F
  // Written with every column spelled out, read back equal.
  std::ostringstream out;
  write_layer_profile(p, out, {"two layers"});
  CHECK(out.str() ==
        "# two layers\nname,F,B,W,activation,input,recompute\na,1,2,1,3,0.25,0.5\n"
        "b,2,4,1,1,1,2\n");
  CHECK(parse_layer_profile(out.str()) == p);
  std::ostringstream plain_out;
  write_layer_profile(plain, plain_out);
  CHECK(parse_layer_profile(plain_out.str()) == plain);
  // Checked as the other columns.
  auto fails = [](const std::string& text, const std::string& what) {
    CHECK_THROWS_WITH(parse_layer_profile(text, "z.csv"), Catch::Contains(what));
  };
  fails("name,F,B,W,activation,input\na,1,2,1,3,nan\n",
        "z.csv:2: column 'input' of layer 'a': 'nan' is not a finite non-negative number");
  fails("name,F,B,W,activation,recompute\na,1,2,1,3,-1\n", "column 'recompute'");
  fails("name,F,B,W,activation,recompute\na,1,2,1,3,2e12\n", "more than the supported 1e+12");
  fails("name,F,B,W,activation,input,input\na,1,2,1,3,1,1\n", "column 'input' is given twice");
  fails("name,F,B,W,activation,memory\na,1,2,1,3,1\n", "unknown column 'memory'");
  fails("name,F,B,W,activation,input\na,1,2,1,3\n",
        "expected 6 columns (name,F,B,W,activation,input), got 5");
  LayerProfile bad;
  bad.layers.push_back(Layer{"a,b", 1, 2, 1, 1, {}, {}});
  std::ostringstream sink;
  CHECK_THROWS_WITH(write_layer_profile(bad, sink), Catch::Contains("cannot be written"));
}

TEST_CASE("cli: profile writes a layer CSV that search reads", "[analytic][cli]") {
  const auto r =
      run_cli({"profile", "--arch",          "llama", "--layers",   "4",     "--hidden",
               "512",     "--heads",         "8",     "--kv-heads", "2",     "--seq",
               "1024",    "--micro-batch",   "1",     "--vocab",    "32000", "--device-tflops",
               "400",     "--device-mem-bw", "3000"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const LayerProfile p = parse_layer_profile(r.out, "stdout");
  REQUIRE(p.size() == 7);
  CHECK(p.layers[0].name == "tok_embeddings");
  CHECK(p.layers[6].name == "lm_head");
  CHECK(r.out.find("# pipeplan profile: llama, 4 layers") == 0);
  CHECK(r.out.find("flash attention, causal attention core") != std::string::npos);
  const std::string file = pipeplan::test::temp_file("analytic.csv", r.out);
  const auto s = run_cli({"search", "-p", "2", "-m", "4", "--layers", file, "--time-limit", "1"});
  INFO(s.err);
  CHECK(s.exit_code == 0);
  // Ranges are checked where the options are parsed.
  CHECK(run_cli({"profile", "--arch", "llama", "--layers", "4", "--hidden", "512", "--heads", "8",
                 "--seq", "1024", "--micro-batch", "1", "--device-tflops", "nan"})
            .exit_code == 2);
  // --attention-core full counts the whole s x s; moe's shared experts and dense layers.
  const std::vector<std::string> small = {
      "profile", "--arch",  "moe",        "--layers", "2",     "--hidden",      "64",
      "--heads", "4",       "--kv-heads", "2",        "--ffn", "128",           "--experts",
      "8",       "--top-k", "2",          "--seq",    "16",    "--micro-batch", "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = small;
    args.insert(args.end(), extra.begin(), extra.end());
    const auto out = run_cli(args);
    INFO(out.err);
    REQUIRE(out.exit_code == 0);
    return parse_layer_profile(out.out, "stdout");
  };
  CHECK(with({}).layers[0].f == Approx(4030464e-9));
  CHECK(with({"--attention-core", "full"}).layers[0].f == Approx(4096000e-9));
  const LayerProfile ds = with({"--shared-experts", "1", "--dense-layers", "1"});
  CHECK(ds.layers[0].f == Approx((786432.0 + 65536.0 + 6 * 32 * 64 * 256.0) * 1e-9));
  CHECK(ds.layers[1].f == Approx((4030464.0 + 1572864.0) * 1e-9));
  CHECK(with({"--shared-expert-ffn", "512"}).layers[1].f ==
        Approx((4030464.0 + 6 * 32 * 64 * 512.0) * 1e-9));
  const auto not_moe =
      run_cli({"profile", "--arch", "llama", "--layers", "4", "--hidden", "512", "--heads", "8",
               "--seq", "16", "--micro-batch", "1", "--dense-layers", "1"});
  CHECK(not_moe.exit_code == 2);
  CHECK(not_moe.err.find("belong to the moe architecture") != std::string::npos);
  CHECK(run_cli({"profile", "--arch", "llama", "--layers", "4", "--hidden", "512", "--heads", "8",
                 "--seq", "16", "--micro-batch", "1", "--attention-core", "half"})
            .exit_code == 2);
  const auto bad = run_cli({"profile", "--arch", "llama", "--layers", "4", "--hidden", "500",
                            "--heads", "8", "--seq", "16", "--micro-batch", "1"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("hidden 500 is not a multiple of heads 8") != std::string::npos);
}
