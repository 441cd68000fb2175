// torchtitan and Megatron-LM out (and a Megatron layout back in).
#include <catch2/catch.hpp>

#include <sstream>

#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/planner.h"
#include "pipeplan/search.h"
#include "test_util.h"

using namespace pipeplan;

namespace {

LayerProfile model(int blocks, const std::string& head = "output") {
  LayerProfile p;
  p.layers.push_back(Layer{"tok_embeddings", 0.2, 0.4, 0.4, 0.1, {}, {}});
  for (int i = 0; i < blocks; ++i)
    p.layers.push_back(Layer{"layers." + std::to_string(i), 1, 2, 1, 1, {}, {}});
  p.layers.push_back(Layer{"norm", 0.05, 0.1, 0, 0.05, {}, {}});
  p.layers.push_back(Layer{head, 2, 4, 2, 1.5, {}, {}});
  return p;
}

}  // namespace

TEST_CASE("megatron: layouts of partitions, and back", "[megatron]") {
  const LayerProfile p = model(8);
  CHECK(megatron_symbols(p) ==
        std::vector<char>{'E', 't', 't', 't', 't', 't', 't', 't', 't', 'L', 'L'});
  CHECK(megatron_layout(p, {3, 3, 2, 3}) == "Et*2|t*3|t*2|tL");
  CHECK(megatron_layout(p, {1, 4, 4, 2}) == "E|t*4|t*4|L");
  for (const Partition& part : {Partition{3, 3, 2, 3}, Partition{1, 4, 4, 2}, Partition{5, 6}}) {
    int v = 0;
    const int pp = part.size() == 4 ? 2 : 1;
    CHECK(partition_from_megatron_layout(p, megatron_layout(p, part), pp, &v) == part);
    CHECK(v == static_cast<int>(part.size()) / pp);
  }
  // The head group is one L: a split between norm and output is refused.
  CHECK_THROWS_WITH(megatron_layout(p, {3, 3, 4, 1}),
                    Catch::Contains("Megatron's loss (L) is one layer"));
  // A profile without embedding and head: E and L ride on the end stages.
  LayerProfile blocks;
  for (int i = 0; i < 4; ++i)
    blocks.layers.push_back(Layer{"block" + std::to_string(i), 1, 2, 1, 1, {}, {}});
  CHECK(megatron_layout(blocks, {2, 2}) == "Et*2|t*2L");
  CHECK(partition_from_megatron_layout(blocks, "Et*2|t*2L", 2) == Partition{2, 2});
}

TEST_CASE("megatron: the layout grammar as Megatron expands it", "[megatron][io]") {
  CHECK(expand_megatron_layout("Et*3|(tt|)*2,m|L") ==
        std::vector<std::string>{"Ettt", "tt", "tt", "m", "L"});
  CHECK(expand_megatron_layout("E(t|)*2tL") == std::vector<std::string>{"Et", "t", "tL"});
  CHECK(expand_megatron_layout("|*2") == std::vector<std::string>{"", "", ""});
  auto fails = [](const std::string& layout, int pp, const std::string& what) {
    INFO(layout);
    CHECK_THROWS_WITH(partition_from_megatron_layout(model(8), layout, pp), Catch::Contains(what));
  };
  fails("Et*4|t*4 L", 2, "invalid layer character ' '");
  fails("t*8|EL", 2, "the first layer must be the embedding E");
  fails("Et*8", 1, "the last layer must be the loss L");
  fails("Et*7L", 1, "holds 7 't' layers, but the profile has 8 transformer layers");
  fails("Et*4|t*4|L", 2, "3 stages are not a multiple of the pipeline size 2");
  fails("Et*8||L", 3, "stage 1 ('') holds no layer of the profile");
  fails("E(t)*99999999999999L", 1, "expands past the supported");
  // Megatron counts the MTP layers before it checks their order.
  fails("Et*4|mt*4L", 2, "holds 1 'm' layers, but the profile has 0 MTP layers");
}

namespace {

// Megatron's module order with MTP: layers.*, norm, mtp.*, output.
LayerProfile mtp_model(int blocks, int mtp) {
  LayerProfile p;
  p.layers.push_back(Layer{"embedding", 0.2, 0.4, 0.4, 0.1, {}, {}});
  for (int i = 0; i < blocks; ++i)
    p.layers.push_back(Layer{"layers." + std::to_string(i), 1, 2, 1, 1, {}, {}});
  p.layers.push_back(Layer{"norm", 0.05, 0.1, 0, 0.05, {}, {}});
  for (int i = 0; i < mtp; ++i)
    p.layers.push_back(Layer{"mtp." + std::to_string(i), 1, 2, 1, 1, {}, {}});
  p.layers.push_back(Layer{"output", 2, 4, 2, 1.5, {}, {}});
  return p;
}

}  // namespace

TEST_CASE("megatron: MTP rules and the final norm of the MTP order", "[megatron]") {
  const LayerProfile p = mtp_model(8, 1);
  // norm is no layer: it rides with the last transformer layer.
  CHECK(megatron_symbols(p) ==
        std::vector<char>{'E', 't', 't', 't', 't', 't', 't', 't', 't', 'n', 'm', 'L'});
  CHECK(megatron_layout(p, {5, 5, 1, 1}) == "Et*4|t*4|m|L");
  CHECK(partition_from_megatron_layout(p, "Et*4|t*4|m|L", 2) == Partition{5, 5, 1, 1});
  CHECK(partition_from_megatron_layout(p, "Et*4|t*4mL", 2) == Partition{5, 7});
  CHECK_THROWS_WITH(megatron_layout(p, {5, 4, 2, 1}),
                    Catch::Contains("Megatron builds the final norm with the last transformer"));
  auto fails = [&](const LayerProfile& prof, const std::string& layout, int pp,
                   const std::string& what) {
    INFO(layout);
    CHECK_THROWS_WITH(partition_from_megatron_layout(prof, layout, pp), Catch::Contains(what));
  };
  // MTP in the first virtual stage of rank 1 (v = 2).
  fails(p, "Et*4|t*4m|L|", 2, "Megatron keeps MTP in the last virtual stage of a rank");
  fails(mtp_model(8, 2), "Et*4|t*4m|m|L", 2, "Megatron keeps MTP in the last virtual stage");
  fails(mtp_model(8, 2), "Et*8|m|mL", 3, "holds 1 of the 2 MTP layers");
  fails(p, "Et*4|t*4L", 2, "holds 0 'm' layers, but the profile has 1 MTP layers");
  fails(p, "Et*4|mt*4L", 2, "transformer layers t must come before the MTP layers m");
  // export: --num-layers counts transformer layers only, --mtp-num-layers the MTP ones.
  Plan pl = plan(Problem{"interleaved-1f1b", 2, 4, 2});
  pl.meta.partition = {5, 5, 1, 1};
  const MegatronExport e = megatron_export(pl, p);
  CHECK(e.args == std::vector<std::string>{"--pipeline-model-parallel-size", "2",
                                           "--pipeline-model-parallel-layout", "Et*4|t*4|m|L",
                                           "--num-layers", "8", "--mtp-num-layers", "1",
                                           "--micro-batch-size", "1", "--global-batch-size", "4"});
  {  // norm after the MTP layers: kept in L, with a note
    LayerProfile q = mtp_model(8, 1);
    std::swap(q.layers[9], q.layers[10]);  // embedding, layers.*, mtp.0, norm, output
    CHECK(megatron_symbols(q).back() == 'L');
    Plan ql = pl;
    ql.meta.partition = {5, 4, 1, 2};
    const MegatronExport n = megatron_export(ql, q);
    CHECK(n.layout == "Et*4|t*4|m|L");
    CHECK_THAT(n.notes.front(), Catch::Contains("'norm' follows the MTP layers here"));
  }
  pl.meta.partition = {5, 4, 2, 1};  // the norm away from layers.7
  CHECK_THROWS_WITH(megatron_export(pl, p), Catch::Contains("final norm"));
  pl.meta.partition = {5, 6, 0, 1};
  CHECK_THROWS(megatron_export(pl, p));
}

TEST_CASE("megatron: the interleaved microbatch rule", "[megatron]") {
  CHECK(megatron_microbatch_refusal(4, 2, 8).empty());
  CHECK(megatron_microbatch_refusal(4, 1, 6).empty());  // 1F1B: no rule
  CHECK(megatron_microbatch_refusal(1, 2, 3).empty());  // p = 1: no pipelining
  CHECK_THAT(megatron_microbatch_refusal(4, 2, 6), Catch::Contains("remainder 2"));
  CHECK_THAT(megatron_microbatch_refusal(4, 2, 3), Catch::Contains("at least p microbatches"));
  CHECK_THAT(megatron_refusal(plan(Problem{"interleaved-1f1b", 4, 6, 2})),
             Catch::Contains("m % p == 0"));
}

TEST_CASE("megatron: what Megatron can run, and its flags", "[megatron]") {
  const LayerProfile p = model(8);
  CHECK_THAT(megatron_refusal(plan(Problem{"zbv", 2, 4, 2})), Catch::Contains("V placement"));
  CHECK_THAT(megatron_refusal(plan(Problem{"zb-h1", 2, 4, 1})),
             Catch::Contains("splits the backward into I and W"));
  CHECK(megatron_refusal(plan(Problem{"interleaved-1f1b", 2, 4, 2})).empty());
  Plan pl = plan(Problem{"interleaved-1f1b", 2, 4, 2});
  pl.meta.partition = {3, 3, 2, 3};
  const MegatronExport e = megatron_export(pl, p, 2);
  CHECK(e.layout == "Et*2|t*3|t*2|tL");
  CHECK(e.args == std::vector<std::string>{"--pipeline-model-parallel-size", "2",
                                           "--pipeline-model-parallel-layout", "Et*2|t*3|t*2|tL",
                                           "--num-layers", "8", "--micro-batch-size", "2",
                                           "--global-batch-size", "8"});
  CHECK(e.alternative_args.empty());  // an uneven split needs the layout
  std::ostringstream args;
  write_megatron_export(e, "args", args);
  CHECK(args.str() ==
        "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout \"Et*2|t*3|t*2|tL\" "
        "--num-layers 8 --micro-batch-size 2 --global-batch-size 8\n");
  pl.meta.partition = {3, 2, 2, 4};  // 2 transformer layers per stage: even
  const MegatronExport even = megatron_export(pl, p);
  CHECK(even.alternative_args ==
        std::vector<std::string>{"--pipeline-model-parallel-size", "2", "--num-layers", "8",
                                 "--num-layers-per-virtual-pipeline-stage", "2"});
}

TEST_CASE("torchtitan: 0.3.0's CLI overrides, one argument a line", "[torchtitan]") {
  const LayerProfile p = model(8, "lm_head");
  Plan pl = plan(Problem{"1f1b", 2, 4, 1});
  pl.meta.partition = {5, 6};
  std::ostringstream csv;
  write_torch_compute_csv(pl, csv);
  CHECK(csv.str() == "0F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3\n1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n");
  TorchtitanOptions o;
  o.csv_path = "/tmp/x/schedule.csv";
  o.microbatch_size = 2;
  CHECK(o.version == "0.3.0");
  CHECK(torchtitan_release("0.3.0").file == "torchtitan.args");
  std::ostringstream args;
  write_torchtitan_config(pl, p, o, args);
  CHECK(args.str() ==
        "--parallelism.pipeline_parallel_degree=2\n"
        "--parallelism.pipeline_parallel_schedule=1F1B\n"
        "--parallelism.pipeline_parallel_schedule_csv=/tmp/x/schedule.csv\n"
        "--parallelism.pipeline_parallel_microbatch_size=2\n"
        "--parallelism.module_fqns_per_model_part\n"
        "tok_embeddings,layers.0,layers.1,layers.2,layers.3\n"
        "layers.4,layers.5,layers.6,layers.7,norm,lm_head\n"
        "--training.local_batch_size=8\n"
        "--training.disable_cuda_graphs\n");
  // A searched loop plan names the loop placement, a V one the V placement.
  pl.meta.schedule = "search";
  std::ostringstream searched;
  write_torchtitan_config(pl, p, o, searched);
  CHECK_THAT(searched.str(), Catch::Contains("--parallelism.pipeline_parallel_schedule=1F1B\n"));
}

TEST_CASE("torchtitan: module names are the release's llama modules, all of them, in order",
          "[torchtitan]") {
  const TorchtitanRelease& now = torchtitan_release("0.3.0");
  const TorchtitanRelease& old = torchtitan_release("0.2.2");
  CHECK(torchtitan_module_refusal(model(4, "lm_head"), now).empty());
  CHECK(torchtitan_module_refusal(model(4, "output"), old).empty());
  CHECK(torchtitan_module_refusal(model(4, "output"), now) ==
        "profile layer 6 'output' is not a module of torchtitan 0.3.0's llama model "
        "(tok_embeddings, layers.N, norm, lm_head): torchtitan 0.3.0 calls the output "
        "projection lm_head (0.3.0: lm_head, 0.2.x: output)");
  CHECK_THAT(torchtitan_module_refusal(model(4, "lm_head"), old),
             Catch::Contains("'lm_head' is not a module of torchtitan 0.2.2's llama model"));
  LayerProfile typo = model(4, "lm_head");
  typo.layers[2].name = "layer.1";
  CHECK(torchtitan_module_refusal(typo, now) ==
        "profile layer 2 'layer.1' is not a module of torchtitan 0.3.0's llama model "
        "(tok_embeddings, layers.N, norm, lm_head)");
  LayerProfile headless = model(4, "lm_head");
  headless.layers.pop_back();
  CHECK(torchtitan_module_refusal(headless, now) ==
        "the profile leaves out module 'lm_head' of torchtitan 0.3.0's llama model "
        "(tok_embeddings, layers.N, norm, lm_head): torchtitan would build no stage with it");
  LayerProfile gap = model(4, "lm_head");
  gap.layers[3].name = "layers.7";
  CHECK_THAT(torchtitan_module_refusal(gap, now),
             Catch::Contains("the profile leaves out module 'layers.2'"));
  LayerProfile swapped = model(4, "lm_head");
  std::swap(swapped.layers[1], swapped.layers[2]);
  CHECK(torchtitan_module_refusal(swapped, now) ==
        "profile layer 1 is 'layers.1', but torchtitan 0.3.0's llama model (tok_embeddings, "
        "layers.N, norm, lm_head) has 'layers.0' there: name each module once, in model order");
  // Refused before anything is written.
  Plan pl = plan(Problem{"1f1b", 2, 4, 1});
  std::ostringstream out;
  CHECK_THROWS_WITH(write_torchtitan_config(pl, model(4, "output"), TorchtitanOptions{}, out),
                    Catch::Contains("'output' is not a module of torchtitan 0.3.0"));
  CHECK(out.str().empty());
}

TEST_CASE("torchtitan: unknown releases are refused, naming the known ones", "[torchtitan]") {
  CHECK(torchtitan_versions() == std::vector<std::string_view>{"0.3.0", "0.2.2", "0.2.1", "0.2.0"});
  CHECK_THROWS_WITH(torchtitan_release("0.4"),
                    "unknown torchtitan version '0.4': pipeplan writes for 0.3.0, 0.2.2, 0.2.1, "
                    "0.2.0 (0.3.0 takes CLI overrides of its Python config, 0.2.x a TOML)");
  CHECK_THROWS_WITH(torchtitan_release("0.1.0"), Catch::Contains("pipeline_parallel_split_points"));
}

TEST_CASE("torchtitan: the compute-only CSV and the TOML of 0.2.x", "[torchtitan]") {
  const LayerProfile p = model(8);
  Plan pl = plan(Problem{"1f1b", 2, 4, 1});
  pl.meta.partition = {5, 6};
  std::ostringstream toml;
  TorchtitanOptions o;
  o.csv_path = "/tmp/x/schedule.csv";
  o.microbatch_size = 2;
  o.version = "0.2.2";
  CHECK(torchtitan_release("0.2.2").file == "torchtitan.toml");
  write_torchtitan_config(pl, p, o, toml);
  const std::string t = toml.str();
  CHECK_THAT(t, Catch::Contains("[parallelism]\npipeline_parallel_degree = 2\n"
                                "pipeline_parallel_schedule = \"1F1B\"\n"
                                "pipeline_parallel_schedule_csv = \"/tmp/x/schedule.csv\"\n"
                                "pipeline_parallel_microbatch_size = 2\n"
                                "module_fqns_per_model_part = [\n"));
  CHECK_THAT(t, Catch::Contains("  [\"tok_embeddings\", \"layers.0\", \"layers.1\", \"layers.2\", "
                                "\"layers.3\"],\n  [\"layers.4\", \"layers.5\", \"layers.6\", "
                                "\"layers.7\", \"norm\", \"output\"],\n]"));
  CHECK_THAT(t, Catch::Contains("[training]\n"));
  CHECK_THAT(t, Catch::Contains("local_batch_size = 8\n"));
  // A searched plan names the placement torchtitan builds, with a comment.
  pl.meta.schedule = "search";
  std::ostringstream searched;
  write_torchtitan_config(pl, p, o, searched);
  CHECK_THAT(searched.str(),
             Catch::Contains("sets the order\npipeline_parallel_schedule = \"1F1B\"\n"));
  CHECK(torch_schedule_name("interleaved-zb") == "InterleavedZeroBubble");
  CHECK(torch_schedule_name("zb-h1").empty());
  Plan v4 = pl;
  v4.meta.mapping = StageMapping::V;
  v4.meta.stages_per_rank = 4;
  CHECK_THAT(torchtitan_refusal(v4), Catch::Contains("only with 2 stages per rank"));
}

TEST_CASE("torchtitan: the placement decides the schedule class, a renamed plan is named",
          "[torchtitan]") {
  const LayerProfile p = model(8, "lm_head");
  TorchtitanOptions o;
  o.csv_path = "/tmp/x/schedule.csv";
  auto schedule_line = [&](const Plan& pl) {
    std::ostringstream args;
    write_torchtitan_config(pl, p, o, args);
    const std::string text = args.str();
    const std::string key = "--parallelism.pipeline_parallel_schedule=";
    const std::size_t at = text.find(key) + key.size();
    return text.substr(at, text.find('\n', at) - at);
  };
  // A V plan renamed 1f1b: torchtitan would place a loop while the CSV runs a V.
  Plan v = plan(Problem{"zbv", 2, 4, 2});
  CHECK(schedule_line(v) == "ZBVZeroBubble");
  CHECK(torchtitan_schedule(v.meta).note.empty());
  v.meta.schedule = "1f1b";
  CHECK(schedule_line(v) == "ZBVZeroBubble");
  CHECK(torchtitan_schedule(v.meta).note ==
        "the plan is named '1f1b' (torch's 1F1B: loop, one stage per rank), but its placement "
        "is V, several stages per rank: torchtitan is told ZBVZeroBubble, which places the "
        "stages as the plan does; the CSV sets the order");
  // A loop plan renamed zbv.
  Plan loop = plan(Problem{"interleaved-1f1b", 2, 4, 2});
  CHECK(schedule_line(loop) == "Interleaved1F1B");
  loop.meta.schedule = "zbv";
  CHECK(schedule_line(loop) == "Interleaved1F1B");
  CHECK_THAT(torchtitan_schedule(loop.meta).note,
             Catch::StartsWith("the plan is named 'zbv' (torch's ZBVZeroBubble: V, several "
                               "stages per rank), but its placement is loop, several"));
  Plan single = plan(Problem{"1f1b", 2, 4, 1});
  single.meta.schedule = "interleaved-1f1b";
  CHECK(schedule_line(single) == "1F1B");
  // The TOML says why in a comment.
  o.version = "0.2.2";
  std::ostringstream toml;
  write_torchtitan_config(loop, model(8), o, toml);
  CHECK_THAT(toml.str(), Catch::Contains("# the plan is named 'zbv'"));
  CHECK_THAT(toml.str(), Catch::Contains("pipeline_parallel_schedule = \"Interleaved1F1B\"\n"));
}

TEST_CASE("torchtitan: a forward-only plan is refused, torchtitan trains", "[torchtitan]") {
  Problem pr{"1f1b", 2, 4, 1};
  pr.forward_only = true;
  const Plan fo = plan(pr);
  CHECK(torchtitan_refusal(fo) ==
        "torchtitan trains, and the plan is forward-only (no backward): torch's runtime refuses "
        "it at startup; export a training plan (plan without --forward-only)");
  std::ostringstream out;
  CHECK_THROWS_WITH(write_torchtitan_config(fo, model(8, "lm_head"), TorchtitanOptions{}, out),
                    Catch::Contains("the plan is forward-only"));
  CHECK(out.str().empty());
}
