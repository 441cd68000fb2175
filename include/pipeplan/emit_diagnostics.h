// Writing verification results for CI (JSON) and people (text).
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/verify.h"

namespace pipeplan {

/// One verification run: the model and what it found.
struct ModelResult {
  Transport transport = Transport::Rendezvous;
  VerifyResult result;
  /// The runtime proved (pipeplan/transport.h), "" for the bare model.
  std::string runtime;
};

/// {"format":"pipeplan.diagnostics","version":1,"ok":..,"plan":{..},
///  "models":[{"model":"rendezvous","ok":..,"diagnostics":[{code,rank,index,action,message}]}]}
/// A runtime's entry adds "runtime":"torch-2.11" after "model".
void write_diagnostics_json(const PlanMeta& meta, std::size_t num_actions,
                            const std::vector<ModelResult>& results, std::ostream& out);

}  // namespace pipeplan
