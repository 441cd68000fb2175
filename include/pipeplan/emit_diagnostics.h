// Writing verification results for CI (JSON) and people (text).
#pragma once

#include <ostream>
#include <utility>
#include <vector>

#include "pipeplan/verify.h"

namespace pipeplan {

/// One verification run: the model and what it found.
struct ModelResult {
  Transport transport = Transport::Rendezvous;
  VerifyResult result;
};

/// {"format":"pipeplan.diagnostics","version":1,"ok":..,"plan":{..},
///  "models":[{"model":"rendezvous","ok":..,"diagnostics":[{code,rank,index,action,message}]}]}
void write_diagnostics_json(const PlanMeta& meta, std::size_t num_actions,
                            const std::vector<ModelResult>& results, std::ostream& out);

}  // namespace pipeplan
