// Readers: plans (JSON per schemas/plan.schema.json, torch-style CSV) and
// simulator costs (a cost spec, a stage-costs file).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/costs.h"
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

/// Parses "F=1,B=2,I=1,W=1,OVERLAP_F_B=2.5" (keys case-insensitive, "O" is
/// short for OVERLAP_F_B) into `base`. When B is absent it defaults to I+W;
/// when only B is given, I = W = B/2. Throws InputError "<source>: ..."
/// naming the bad item.
CostModel parse_cost_spec(std::string_view spec, CostModel base = {},
                          const std::string& source = "cost spec");

/// Parses a stage-costs file: CSV rows "stage,F,B,I,W" or "stage,SCALE"
/// (optional header, '#' comments), or JSON {"stages":[{"stage":0,"scale":2,
/// "F":..}]}. Throws InputError "<source>:<line>: ..." on bad content.
std::map<int, StageScale> parse_stage_costs(std::string_view text,
                                            const std::string& source = "<stage-costs>");
/// parse_stage_costs plus the calibrated fields (costs.h: StageCosts);
/// throws InputError.
StageCosts read_stage_costs(std::string_view text, const std::string& source = "<stage-costs>");

/// Microbatch lengths in tokens, in microbatch order (docs/lengths.md):
/// numbers separated by commas, spaces or line breaks ('#' starts a
/// comment), e.g. "512,2048,128" or a file of one per line. Throws
/// InputError "<source>: ..." naming the bad item (not a positive number,
/// none given, more than limits::kMaxMicrobatches).
/// `item` names what each number is the length of in messages.
std::vector<double> parse_lengths(std::string_view text, const std::string& source = "lengths",
                                  const std::string& item = "microbatch");

}  // namespace pipeplan
