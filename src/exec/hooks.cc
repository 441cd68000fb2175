// The hooks layer (hooks.h): observers and pass-through handlers.
#include "exec/hooks.h"

#include <algorithm>
#include <string>

#include "pipeplan/error.h"

namespace pipeplan::exec::detail {

namespace {

// The handler slot of a pass-through type; -1 for any other type.
int handler_slot(ActionType type) {
  switch (type) {
    case ActionType::Unshard: return 0;
    case ActionType::Reshard: return 1;
    case ActionType::ReduceGrad: return 2;
    default: return -1;
  }
}

}  // namespace

void Hooks::add(std::shared_ptr<Observer> observer, const Plan& plan, int rank) {
  if (!observer) throw InputError("add_observer: no observer given");
  observer->set_up(plan, rank);
  observers_.push_back(std::move(observer));
}

void Hooks::remove(const std::shared_ptr<Observer>& observer) {
  observers_.erase(std::remove(observers_.begin(), observers_.end(), observer), observers_.end());
}

void Hooks::set_handler(ActionType type, PassThroughHandler handler) {
  const int k = handler_slot(type);
  if (k < 0)
    throw InputError("set_handler: " + std::string(to_string(type)) +
                     " is run by the executor; handlers exist for UNSHARD, RESHARD and "
                     "REDUCE_GRAD only (use an Observer to watch other actions)");
  handlers_[static_cast<std::size_t>(k)] = std::move(handler);
}

void Hooks::step_begin(int step, bool forward_only) const {
  for (const auto& o : observers_) o->on_step_begin(step, forward_only);
}

void Hooks::step_end(int step, bool forward_only) const {
  for (const auto& o : observers_) o->on_step_end(step, forward_only);
}

void Hooks::entry(const ActionEvent& e) const {
  for (const auto& o : observers_) o->on_entry(e);
}

void Hooks::exit(const ActionEvent& e) const {
  for (const auto& o : observers_) o->on_exit(e);
}

void Hooks::stage_grads_ready(int stage, const std::vector<at::Tensor>& parameters) const {
  for (const auto& o : observers_) o->on_stage_grads_ready(stage, parameters);
}

bool Hooks::handles(ActionType type) const {
  const int k = handler_slot(type);
  return k >= 0 && handlers_[static_cast<std::size_t>(k)];
}

void Hooks::pass_through(const PassThrough& context) const {
  const int k = handler_slot(context.action.type);
  if (k < 0) return;
  const PassThroughHandler& h = handlers_[static_cast<std::size_t>(k)];
  if (h) h(context);  // without a handler nothing is sharded
}

}  // namespace pipeplan::exec::detail
