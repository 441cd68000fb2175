// make_sim_options: the cost options as users give them, checked and turned
// into SimOptions.
#include "pipeplan/cost_options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "model/cost_check.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/transport.h"

namespace pipeplan {
namespace {

double parse_non_negative(const std::string& s, const std::string& what) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v) || v < 0)
    throw InputError(what + " '" + limits::excerpt(s) + "' is not a non-negative number");
  return v;
}

}  // namespace

std::vector<double> parse_lengths(std::string_view text, const std::string& source,
                                  const std::string& item) {
  std::vector<double> out;
  int line = 1;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const char c = text[pos];
    if (c == '#') {
      while (pos < text.size() && text[pos] != '\n') ++pos;
      continue;
    }
    if (c == '\n') ++line;
    if (c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++pos;
      continue;
    }
    std::size_t end = pos;
    while (end < text.size() &&
           std::string_view(", \t\r\n#").find(text[end]) == std::string_view::npos)
      ++end;
    const std::string_view cell = text.substr(pos, end - pos);
    double v = 0;
    auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
    if (ec != std::errc() || ptr != cell.data() + cell.size() || !std::isfinite(v) || v <= 0 ||
        v > limits::kMaxCost)
      throw InputError(source + ":" + std::to_string(line) + ": length '" + limits::excerpt(cell) +
                       "' of " + item + " " + std::to_string(out.size()) +
                       " is not a positive number of tokens");
    if (out.size() >= static_cast<std::size_t>(limits::kMaxMicrobatches))
      throw InputError(source + ": more than the supported " +
                       std::to_string(limits::kMaxMicrobatches) + " " + item + " lengths");
    out.push_back(v);
    pos = end;
  }
  if (out.empty()) throw InputError(source + ": no " + item + " length given");
  return out;
}

SimOptions make_sim_options(const CostOptions& args, StageCosts* file_out) {
  SimOptions o;
  const std::string& pre = args.name_prefix;
  StageCosts file;
  if (args.stage_costs) file = read_stage_costs(*args.stage_costs, args.stage_costs_source);
  o.costs =
      parse_cost_spec(args.cost, file.absolute ? cost_model_of(file) : CostModel{}, pre + "cost");
  o.costs.stage_scales = file.stages;
  o.costs.unmeasured = file.unmeasured;
  if (!args.comm.empty()) {
    const auto comma = args.comm.find(',');
    o.costs.comm_latency = parse_non_negative(args.comm.substr(0, comma), pre + "comm latency");
    o.costs.comm_bandwidth = 0;
    if (comma != std::string::npos)
      o.costs.comm_bandwidth =
          parse_non_negative(args.comm.substr(comma + 1), pre + "comm bandwidth");
  }
  if (!std::isfinite(args.bytes) || args.bytes < 0) {
    std::ostringstream s;
    s << args.bytes;
    throw InputError(pre + "bytes '" + s.str() + "' is not a non-negative number");
  }
  if (args.bytes > 0 || !file.transfer_bytes) o.costs.transfer_bytes = args.bytes;
  // Python keywords are spelled with '_', CLI flags with '-'.
  const auto name = [&pre](const char* what) {
    std::string n = what;
    if (pre.empty()) std::replace(n.begin(), n.end(), '-', '_');
    return pre + n;
  };
  if (!args.host_bw.empty()) {
    o.costs.host_bandwidth = parse_non_negative(args.host_bw, name("host-bw"));
    if (!(o.costs.host_bandwidth > 0))
      throw InputError(name("host-bw") +
                       " must be positive (activation units the copy stream moves per time unit)");
  }
  if (!args.host_latency.empty())
    o.costs.host_latency = parse_non_negative(args.host_latency, name("host-latency"));
  const std::optional<Transport> transport = parse_transport(args.model);
  if (!transport)
    throw InputError(pre + "model '" + limits::excerpt(args.model) + "' is not a transport (" +
                     transport_names() + ")");
  o.transport = *transport;
  if (!args.lengths.empty()) o.costs.set_lengths(args.lengths);
  // Every duration bounded now, whatever uses the costs later (the plan's
  // stage count is checked where a plan meets them).
  detail::check_costs(o.costs, std::numeric_limits<int>::max());
  if (file_out) *file_out = std::move(file);
  return o;
}

}  // namespace pipeplan
