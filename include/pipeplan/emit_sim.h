// Writing simulation results: a single plan's summary and a comparison of
// schedules, as text for people and JSON for tools. Writers never open files.
#pragma once

#include <ostream>
#include <vector>

#include "pipeplan/compare.h"
#include "pipeplan/ir.h"
#include "pipeplan/simulate.h"

namespace pipeplan {

/// Human-readable summary: makespan, bubble, one row per rank.
void write_sim_text(const Plan& plan, const SimOptions& options, const SimResult& result,
                    std::ostream& out);
/// JSON summary {"format":"pipeplan.simulation","version":1,"makespan":..,
/// "bubble_fraction":..,"ranks":[..],..}; problems listed when not ok.
void write_sim_json(const Plan& plan, const SimOptions& options, const SimResult& result,
                    std::ostream& out);

/// The comparison as a table; `costs` is what each schedule's rank share
/// costs (see docs/simulator.md on how v divides it).
void write_compare_text(int pp_degree, int num_microbatches, const SimOptions& options,
                        const std::vector<ComparisonRow>& rows, std::ostream& out);
/// {"format":"pipeplan.compare","version":1,"results":[..],"skipped":[..]}.
void write_compare_json(int pp_degree, int num_microbatches, const SimOptions& options,
                        const std::vector<ComparisonRow>& rows, std::ostream& out);

}  // namespace pipeplan
