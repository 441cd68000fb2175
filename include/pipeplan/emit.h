// Writing plans. Emitters write to a stream; they never open files.
#pragma once

#include <ostream>

#include "pipeplan/ir.h"
#include "pipeplan/torch_runtime.h"

namespace pipeplan {

/// Format name and version written into every JSON plan.
inline constexpr const char* kPlanFormatName = "pipeplan.plan";
inline constexpr int kPlanFormatVersion = 1;

/// JSON per schemas/plan.schema.json: keys in the documented order, one
/// rank per line, "compute_only" derived from the actions.
void write_json(const Plan& plan, std::ostream& out);
/// pipeplan's CSV, torch _dump_csv style: one row per rank, one cell per
/// action (a BATCH_P2P group one cell), no header, "\n" line ends; a
/// superset of torch's dialect (docs/format.md). Throws InputError for a
/// plan that does not hold every rank (rows carry no id).
void write_csv(const Plan& plan, std::ostream& out);
/// Strictly torch's dialect, what torch's `_dump_csv` writes and its
/// `_load_csv` reads: "\r\n" line ends, an empty rank an empty row. Throws
/// InputError for a plan that does not hold every rank, and for one holding
/// what `target` cannot read (a BATCH_P2P group; an action kind its runtime
/// lacks, torch_version_refusal), saying so. Rows with sends carry the
/// WAIT_SEND_* / WAIT_REDUCE_GRAD cells of a target that has them (2.15 on).
void write_torch_csv(const Plan& plan, std::ostream& out,
                     TorchVersion target = kTorchDefaultVersion);
/// One line per rank: "rank R: a b c".
void write_text(const Plan& plan, std::ostream& out);
/// ASCII timeline, ranks as rows, of the compute actions timed at unit costs
/// (F=1 B=2 I=1 W=1, F+B group 3, comms free); '.' marks an idle unit. A
/// single-rank plan is laid end to end; an order that cannot run is drawn
/// anyway with a note. See docs/format.md.
void write_timeline(const Plan& plan, std::ostream& out);

}  // namespace pipeplan
