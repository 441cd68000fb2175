// Located parsing of one cell of a plan's row, shared by the CSV reader,
// the JSON reader and from_torch()'s tables: one action in torch's grammar,
// or a batched P2P group "(A;B;...)BATCH_P2P" of SEND/RECV (a group of one,
// "(A)BATCH_P2P", is the action marked waited).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/ir.h"

namespace pipeplan::io {

/// Why a cell was refused: the offset into the cell and a message that
/// names the cell and the problem.
struct CellError {
  std::size_t offset = 0;
  std::string message;
};

/// Parses one cell strictly and appends its actions to `out` (one, or a
/// group's members in posting order, every member but the last marked
/// batch_next); false, with `error` set and `out` as it was, when the cell
/// is malformed. A malformed group (empty, one member, a member that is not
/// SEND_F/RECV_F/SEND_B/RECV_B, a nested group, a member twice, a bare
/// BATCH_P2P) names the cell. torch 2.15's WAIT_SEND_F/WAIT_SEND_B/
/// WAIT_REDUCE_GRAD cells are accepted and append nothing.
bool parse_cell(std::string_view text, std::vector<Action>& out, CellError& error);

}  // namespace pipeplan::io
