// Located parsing of one action string, shared by the JSON and CSV readers.
// ir.h's parse_action says only yes/no; readers need to say where and why.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "pipeplan/ir.h"

namespace pipeplan::io {

/// Either a parsed action or the offset (into the input) and reason it failed.
struct ActionParse {
  std::optional<Action> action;
  std::size_t error_offset = 0;  ///< meaningful only when !action
  std::string reason;            ///< e.g. "'BW' is not an action type"
};

/// Parses the torch grammar strictly: "2F0", "1SEND_F3", "0UNSHARD",
/// "(0F7;7B3)OVERLAP_F_B" (spaces allowed around the group's members).
/// Anything torch's regex would half-accept ("2BW0", "0F0x") fails.
ActionParse parse_action_located(std::string_view text);

/// "unknown action '<text>': <reason>" — the shared wording of reader errors.
std::string describe_bad_action(std::string_view text, const ActionParse& failure);

}  // namespace pipeplan::io
