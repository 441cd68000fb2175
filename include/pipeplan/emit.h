// Writing plans. Emitters write to a stream; they never open files.
#pragma once

#include <ostream>

#include "pipeplan/ir.h"

namespace pipeplan {

/// Format name and version written into every JSON plan.
inline constexpr const char* kPlanFormatName = "pipeplan.plan";
inline constexpr int kPlanFormatVersion = 1;

/// JSON per schemas/plan.schema.json (deterministic key order, one action
/// string per array element).
void write_json(const Plan& plan, std::ostream& out);
/// Torch _dump_csv style: one row per rank, one action per cell, no header.
void write_csv(const Plan& plan, std::ostream& out);
/// One line per rank: "rank R: a b c".
void write_text(const Plan& plan, std::ostream& out);
/// ASCII timeline, ranks as rows, one column per step of the unit-cost run
/// (compute actions only; idle steps shown as '.').
void write_timeline(const Plan& plan, std::ostream& out);

}  // namespace pipeplan
