// Reading plans: JSON (schemas/plan.schema.json) and torch-style CSV.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/ir.h"

namespace pipeplan {

enum class PlanFormat : std::uint8_t { Json, Csv };

/// Options for reading CSV, which carries no metadata of its own.
struct CsvReadOptions {
  std::optional<StageMapping> mapping;  ///< inferred from placement when unset
  /// Microbatch count; max microbatch + 1 when unset (then an out-of-range
  /// microbatch cannot be told from a missing one).
  std::optional<int> num_microbatches;
  std::string schedule = "custom";  ///< recorded in the plan's metadata
  /// The file is an inference plan (F/SEND_F/RECV_F only); recorded in the
  /// plan's metadata, so verification owes no backward.
  bool forward_only = false;
};

/// Guesses the format from content: JSON starts with '{' (after whitespace).
PlanFormat detect_format(std::string_view text);

/// Parses a JSON plan. Throws InputError "<source>: ..." naming the field.
Plan parse_json_plan(std::string_view text, const std::string& source = "<input>");
/// Parses a torch-style CSV plan (one row per rank, one action per cell).
/// Throws InputError "<source>:<line>:<column>: ..." on a bad cell.
Plan parse_csv_plan(std::string_view text, const std::string& source = "<input>",
                    const CsvReadOptions& options = {});
/// An action table as torch holds one in memory (`schedule.pipeline_order` or
/// `pipeline_order_with_comms`): row r is rank r's actions in torch grammar,
/// nullopt for an idle step. Metadata is inferred (or taken from `options`)
/// exactly as for CSV. Throws InputError "<source>: rank R step S: ..." naming
/// the bad entry by its position in the row (idle steps counted).
Plan parse_action_table(const std::vector<std::vector<std::optional<std::string>>>& rows,
                        const std::string& source = "<order>", const CsvReadOptions& options = {});
/// torch's `_add_reduce_grad`: after the action that completes a stage's
/// num_microbatches-th B or W (and the sends right after it), insert
/// `<stage>REDUCE_GRAD`; torch 2.11's runtime scales and reduces gradients
/// there. Stages that already have one are left alone; other actions keep
/// their order.
Plan add_reduce_grad(const Plan& plan);

/// detect_format + the matching parser.
Plan parse_plan(std::string_view text, const std::string& source = "<input>",
                const CsvReadOptions& csv_options = {});

}  // namespace pipeplan
