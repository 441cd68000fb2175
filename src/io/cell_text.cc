#include "io/cell_text.h"

#include "ir/group_members.h"
#include "pipeplan/limits.h"

namespace pipeplan::io {
namespace {

constexpr std::string_view kBatch = "BATCH_P2P";
constexpr const char* kForm =
    "(<A>;<B>;...)BATCH_P2P of one or more SEND_F, RECV_F, SEND_B, RECV_B";

bool failed(std::string_view cell, std::size_t offset, const std::string& why, CellError& error) {
  error.offset = offset;
  error.message = "bad BATCH_P2P group '" + limits::excerpt(cell) + "': " + why;
  return false;
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

// "(A;B;...)BATCH_P2P" (`close` is the ')'): the members, split at ';'.
bool parse_batch(std::string_view cell, std::size_t close, std::vector<Action>& out,
                 CellError& error) {
  if (cell.substr(close + 1) != kBatch)
    return failed(cell, close + 1 + kBatch.size(),
                  "unexpected '" + limits::excerpt(cell.substr(close + 1 + kBatch.size())) +
                      "' after BATCH_P2P",
                  error);
  const std::string_view body = cell.substr(1, close - 1);
  if (body.find_first_not_of(" \t") == std::string_view::npos)
    return failed(cell, 1, "the group is empty; write " + std::string(kForm), error);
  const std::size_t nested = body.find_first_of("()");
  if (nested != std::string_view::npos)
    return failed(cell, 1 + nested, "groups do not nest: each member is one SEND/RECV", error);
  const std::size_t first = out.size();
  auto undo = [&] {
    out.resize(first);
    return false;
  };
  detail::GroupMembers members;
  std::size_t begin = 0;
  while (true) {
    std::size_t end = body.find(';', begin);
    if (end == std::string_view::npos) end = body.size();
    std::size_t at = 1 + begin;  // the member's offset in the cell
    std::string_view text = body.substr(begin, end - begin);
    while (!text.empty() && is_space(text.front())) {
      text.remove_prefix(1);
      ++at;
    }
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    if (text.empty())
      return failed(cell, at, "an empty member; write " + std::string(kForm), error) || undo();
    ActionParse a = parse_action_located(text);
    if (!a.action)
      return failed(cell, at + a.error_offset, describe_bad_action(text, a), error) || undo();
    if (!is_comm(a.action->type))
      return failed(cell, at,
                    to_string(*a.action) +
                        " is not a SEND/RECV: a group holds only SEND_F, RECV_F, SEND_B and "
                        "RECV_B (computes run outside it)",
                    error) ||
             undo();
    if (!members.add(*a.action))
      return failed(cell, at, to_string(*a.action) + " is twice in the group", error) || undo();
    out.push_back(*a.action);
    if (end == body.size()) break;
    begin = end + 1;
  }
  if (out.size() - first == 1) {  // a group of one: committed alone, waited where it stands
    out.back().waited = true;
    return true;
  }
  for (std::size_t k = first; k + 1 < out.size(); ++k) out[k].batch_next = true;
  return true;
}

}  // namespace

namespace {

// torch 2.15's waits, "<s>WAIT_SEND_F<mb>", "<s>WAIT_SEND_B<mb>" and
// "<s>WAIT_REDUCE_GRAD": bookkeeping of its runtime (a send retires at its
// wait), which pipeplan's model does itself; read as no action.
bool is_torch_wait(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0) return false;
  const std::string_view rest = text.substr(i);
  if (rest == "WAIT_REDUCE_GRAD") return true;
  for (std::string_view head : {"WAIT_SEND_F", "WAIT_SEND_B"})
    if (rest.size() > head.size() && rest.substr(0, head.size()) == head) {
      for (char c : rest.substr(head.size()))
        if (c < '0' || c > '9') return false;
      return true;
    }
  return false;
}

}  // namespace

bool parse_cell(std::string_view text, std::vector<Action>& out, CellError& error) {
  if (is_torch_wait(text)) return true;
  if (!text.empty() && text.front() == '(') {
    const std::size_t close = text.rfind(')');
    if (close != std::string_view::npos && text.substr(close + 1, kBatch.size()) == kBatch)
      return parse_batch(text, close, out, error);
  }
  ActionParse a = parse_action_located(text);
  if (a.action) {
    out.push_back(*a.action);
    return true;
  }
  // Only a refused cell pays for looking for the group's name.
  const std::size_t batch = text.find(kBatch);
  if (batch != std::string_view::npos)
    return failed(text, batch, "BATCH_P2P is written as a group: " + std::string(kForm), error);
  error.offset = a.error_offset;
  error.message = describe_bad_action(text, a);
  return false;
}

}  // namespace pipeplan::io
