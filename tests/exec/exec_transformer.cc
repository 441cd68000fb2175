// One rank of pipeplan's executor on the oracle tests' tiny transformer
// (python/oracle_tests/torch_pp.py): the same weights file torch's runtime
// loads, so the two runs compare tensor for tensor.
//
//   exec_transformer PLAN WEIGHTS DATA OUT [--trace FILE]
//     (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set, one process a rank)
//
// WEIGHTS is torch.save(dict) of the Python model: "blocks.<s>.<name>" for
// stage s's TransformerEncoderLayer (post-norm, ReLU, dropout 0; the C++
// module's parameter names are the Python one's) and "head.weight",
// "head.bias" for the Linear head on the last stage. DATA is
// torch.save({"x": [B, S, H], "y": [B, S, H]}). The step (MSE per
// microbatch, the step loss their mean) writes to OUT, with
// torch::pickle_save (torch.load reads it), {"loss": [1] on the rank holding
// the last stage, "<full name>": grad for each parameter this rank holds}.
// --trace FILE: a second step follows (the gradients written are the
// first's), both traced by the executor's tracer; rank 0 writes every rank's
// records as one Chrome trace (docs/tracing.md). Exit 0, or one "exec_transformer: ..." line and 1.
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/module.h"
#include "pipeplan/exec/trace.h"
#include "pipeplan/io.h"
#include "pipeplan/trace.h"

namespace px = pipeplan::exec;

namespace {

constexpr int kHeads = 2;  // torch_pp.HEADS

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::map<std::string, at::Tensor> tensor_dict(const std::string& path) {
  const c10::IValue v = torch::pickle_load(read_bytes(path));
  if (!v.isGenericDict()) throw std::runtime_error(path + ": not a dict of tensors");
  std::map<std::string, at::Tensor> out;
  for (const auto& kv : v.toGenericDict()) out[kv.key().toStringRef()] = kv.value().toTensor();
  return out;
}

// Stage s: Python's TransformerEncoderLayer(batch_first=True) is the C++ one
// on [S, B, H]; the last stage adds the head.
struct StageImpl : torch::nn::Module {
  StageImpl(int hidden, bool last)
      : layer(register_module(
            "block", torch::nn::TransformerEncoderLayer(
                         torch::nn::TransformerEncoderLayerOptions(hidden, kHeads)
                             .dim_feedforward(2 * hidden)
                             .dropout(0.0)))) {
    if (last) head = register_module("head", torch::nn::Linear(hidden, hidden));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = layer->forward(x.transpose(0, 1)).transpose(0, 1);
    return head ? head->forward(y) : y;
  }
  torch::nn::TransformerEncoderLayer layer;
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Stage);

// "block.linear1.weight" of stage s -> "blocks.<s>.linear1.weight"; the head's
// names stay ("head.weight").
std::string full_name(const std::string& local, int stage) {
  const std::string block = "block.";
  if (local.rfind(block, 0) == 0)
    return "blocks." + std::to_string(stage) + "." + local.substr(block.size());
  return local;
}

int run(int argc, char** argv) {
  if (argc != 5 && argc != 7)
    throw std::invalid_argument("usage: exec_transformer PLAN WEIGHTS DATA OUT [--trace FILE]");
  const std::string trace_path = argc == 7 ? argv[6] : "";
  std::ifstream plan_in(argv[1]);
  std::stringstream plan_text;
  plan_text << plan_in.rdbuf();
  const pipeplan::Plan plan = pipeplan::parse_plan(plan_text.str(), argv[1]);
  const auto weights = tensor_dict(argv[2]);
  const auto data = tensor_dict(argv[3]);
  torch::set_num_threads(1);

  const int n = plan.meta.num_stages();
  const at::Tensor& x = data.at("x");
  const int hidden = static_cast<int>(x.size(2));
  const auto timeout = std::chrono::seconds(60);
  auto group =
      px::Communicator::connect(px::DistEnv::from_environment(), px::Backend::Gloo, timeout);
  px::TracerOptions to;
  to.record = !trace_path.empty();
  auto tracer = std::make_shared<px::Tracer>(to);
  px::ExecOptions options;
  options.timeout = timeout;
  px::Executor executor(plan, tracer->wrap(group), options);
  executor.add_observer(tracer);

  std::vector<Stage> modules;
  std::vector<px::StageModule> stages;
  for (int s = 0; s < n; ++s) {
    Stage m(hidden, s == n - 1);
    torch::NoGradGuard no_grad;
    for (auto& p : m->named_parameters()) {
      const std::string name = full_name(p.key(), s);
      auto it = weights.find(name);
      if (it == weights.end()) throw std::runtime_error("the weights have no " + name);
      p.value().copy_(it->second);
    }
    modules.push_back(m);
    stages.push_back(px::module_stage(m));
  }
  executor.set_stages(stages);
  executor.set_loss([](const px::Values& out, const px::Values& targets) {
    return torch::mse_loss(std::get<at::Tensor>(out[0]), std::get<at::Tensor>(targets[0]));
  });
  const bool first = executor.local_stages().front() == 0;
  const bool last = executor.holds_last_stage();
  px::Values inputs, targets;
  if (first) inputs.push_back(x);
  if (last) targets.push_back(data.at("y"));

  std::optional<double> loss = executor.step(inputs, targets);
  c10::Dict<std::string, at::Tensor> out;
  if (loss) out.insert("loss", torch::tensor({*loss}, torch::kDouble));
  for (int s : executor.local_stages())
    for (const auto& p : modules[s]->named_parameters())
      out.insert(full_name(p.key(), s), p.value().grad().clone());
  if (!trace_path.empty()) {
    for (auto& m : modules) m->zero_grad();
    executor.step(inputs, targets);
  }
  executor.shutdown();
  if (!trace_path.empty())
    if (std::optional<pipeplan::Trace> t = tracer->gather("exec_transformer", timeout)) {
      std::ofstream f(trace_path);
      pipeplan::write_trace_chrome(*t, f);
    }
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(out));
  std::ofstream f(argv[4], std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return f.good() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::cerr << "exec_transformer: " << what.substr(0, what.find("\nException raised from"))
              << "\n";
    return 1;
  }
}
