// Autograd-graph inspection the executor needs once per stage: the walk that
// finds a trainable tensor a stage uses without listing it.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <unordered_set>

#include "exec/stages.h"

namespace pipeplan::exec::detail {

at::Tensor unlisted_trainable(const std::vector<at::Tensor>& roots,
                              const std::vector<at::Tensor>& known) {
  std::unordered_set<const void*> listed;
  for (const at::Tensor& t : known)
    if (t.defined()) listed.insert(t.unsafeGetTensorImpl());
  std::unordered_set<const torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> todo;
  for (const at::Tensor& r : roots) {
    if (!r.defined() || !r.requires_grad()) continue;
    if (r.is_leaf()) {
      if (listed.count(r.unsafeGetTensorImpl()) == 0) return r;
      continue;
    }
    if (auto fn = r.grad_fn()) todo.push_back(fn.get());
  }
  while (!todo.empty()) {
    torch::autograd::Node* node = todo.back();
    todo.pop_back();
    if (!seen.insert(node).second) continue;
    if (auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      const at::Tensor& v = acc->variable;
      if (v.defined() && listed.count(v.unsafeGetTensorImpl()) == 0) return v;
      continue;
    }
    for (const torch::autograd::Edge& e : node->next_edges())
      if (e.function) todo.push_back(e.function.get());
  }
  return {};
}

}  // namespace pipeplan::exec::detail
