// libFuzzer target: one cell of a plan's row (io/cell_text.h), a single
// action or a BATCH_P2P group "(A;B;...)BATCH_P2P". Properties: a refusal
// leaves the list as it was, at an offset inside the cell, with a bounded
// message whose control bytes are escaped; an accepted group holds two or
// more distinct SEND/RECV, all but the last marked batch_next, is sound for
// first_bad_group(), and printing it (append_cell) then reading it again is
// a fixed point.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "io/cell_text.h"
#include "pipeplan/ir.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Action before = make(ActionType::F, 0, 0);
  std::vector<Action> out{before};
  io::CellError error;
  if (!io::parse_cell(text, out, error)) {
    fuzz::check(out.size() == 1 && out[0] == before, "a refused cell changed the list");
    fuzz::check(error.offset <= text.size(), "error offset past the end of the cell");
    fuzz::check_message(error.message, 1200);
    return 0;
  }
  const std::vector<Action> cell(out.begin() + 1, out.end());
  if (cell.empty()) return 0;  // torch's WAIT_* cells read as no action
  std::string why;
  fuzz::check(first_bad_group(cell, &why) == -1, "an accepted cell is a bad group: " + why);
  fuzz::check(cell_size(cell, 0) == cell.size(), "an accepted cell is more than one cell");
  if (cell.size() > 1)
    for (const Action& a : cell) fuzz::check(is_comm(a.type), "a group member is not a SEND/RECV");
  std::string printed;
  append_cell(printed, cell.data(), cell.size());
  std::vector<Action> again;
  fuzz::check(io::parse_cell(printed, again, error) && again == cell,
              "reading the printed cell differs: " + printed);
  return 0;
}
