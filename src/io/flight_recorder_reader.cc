// read_flight_recorder: a Flight Recorder dump, as torch 2.15 pickles it
// (torch/csrc/distributed/c10d/FlightRecorderDetail.hpp, dump()): a dict of
// "version", "pg_config" ({name: {"name", "desc", "ranks": "[0, 1]"}}),
// "pg_status", "comm_lib_version" and "entries" (left out when collectives
// are not included), each entry a dict of record_id, pg_id, process_group
// (name, desc), collective_seq_id, p2p_seq_id, op_id, profiling_name
// ("<backend>:<op>[ <src>-><dst> | <dst><-<src>]", torch's
// flight_recorder/components/types.py, Op), time_created_ns, input/output
// sizes and dtypes, state ("scheduled", "started", "completed"), ...
#include <string>
#include <vector>

#include "pipeplan/diagnose.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/pickle.h"

namespace pipeplan {
namespace {

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw InputError(source + ": " + what);
}

const PickleValue& member(const PickleValue& dict, const char* key, PickleValue::Kind kind,
                          const std::string& where, const std::string& source) {
  const PickleValue* v = dict.find(key);
  if (!v) bad(source, where + " has no \"" + key + "\" (not a Flight Recorder dump?)");
  if (v->kind != kind) {
    PickleValue expected;
    expected.kind = kind;
    bad(source,
        where + " \"" + key + "\" is a " + v->kind_name() + ", expected " + expected.kind_name());
  }
  return *v;
}

// "[0, 1]" (torch writes a group's ranks as the text of a list).
std::vector<int> parse_ranks(const std::string& text, const std::string& where,
                             const std::string& source) {
  std::vector<int> out;
  std::size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
  };
  if (text.empty() || text.front() != '[' || text.back() != ']')
    bad(source, where + " ranks " + limits::excerpt(text) + " is not a list of ranks");
  i = 1;
  while (true) {
    skip();
    if (i >= text.size() - 1) break;
    long long r = 0;
    std::size_t digits = 0;
    while (i < text.size() - 1 && text[i] >= '0' && text[i] <= '9' && digits < 9)
      r = r * 10 + (text[i++] - '0'), ++digits;
    if (digits == 0 || (i < text.size() - 1 && text[i] != ',' && text[i] != ' '))
      bad(source, where + " ranks " + limits::excerpt(text) + " is not a list of ranks");
    out.push_back(static_cast<int>(r));
    if (out.size() > static_cast<std::size_t>(limits::kMaxRanks))
      bad(source, where + " has more than " + std::to_string(limits::kMaxRanks) + " ranks");
  }
  return out;
}

bool parse_int(std::string_view s, int& out) {
  if (s.empty() || s.size() > 9) return false;
  out = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

// "gloo:send 0->1" -> op "send", src 0, dst 1; "nccl:recv 1<-0" -> dst 1,
// src 0; "gloo:recv 1<-?" -> src -1. Split from the right at ':' as torch's
// Op does.
void parse_profiling_name(FrEntry& e, const std::string& where, const std::string& source) {
  const std::size_t colon = e.profiling_name.rfind(':');
  if (colon == std::string::npos)
    bad(source, where + " profiling_name " + limits::excerpt(e.profiling_name) +
                    " is not '<backend>:<op>'");
  std::string rest = e.profiling_name.substr(colon + 1);
  const std::size_t space = rest.find(' ');
  e.op = rest.substr(0, space);
  if (!e.is_p2p()) return;
  const std::string peers = space == std::string::npos ? "" : rest.substr(space + 1);
  const bool send = e.op == "send";
  const std::size_t arrow = peers.find(send ? "->" : "<-");
  int a = 0, b = 0;
  const std::string second = arrow == std::string::npos ? "" : peers.substr(arrow + 2);
  const bool any = !send && second == "?";
  if (arrow == std::string::npos || !parse_int(std::string_view(peers).substr(0, arrow), a) ||
      (!any && !parse_int(second, b)))
    bad(source, where + " profiling_name " + limits::excerpt(e.profiling_name) +
                    " names no peer (" + (send ? "'send SRC->DST'" : "'recv DST<-SRC'") +
                    " expected)");
  if (send) {
    e.src = a, e.dst = b;
  } else {
    e.dst = a, e.src = any ? -1 : b;
  }
}

FrEntry read_entry(const PickleValue& v, std::size_t k, const std::string& source) {
  using K = PickleValue::Kind;
  const std::string where = "entries[" + std::to_string(k) + "]";
  if (v.kind != K::Dict) bad(source, where + " is a " + v.kind_name() + ", expected a dict");
  FrEntry e;
  auto integer = [&](const char* key) { return member(v, key, K::Int, where, source).i; };
  e.record_id = integer("record_id");
  e.collective_seq_id = integer("collective_seq_id");
  e.p2p_seq_id = integer("p2p_seq_id");
  e.op_id = integer("op_id");
  e.time_created_ns = integer("time_created_ns");
  const PickleValue& pg = member(v, "process_group", K::Tuple, where, source);
  if (pg.items.size() != 2 || pg.items[0].kind != K::Str)
    bad(source, where + " process_group is not (name, desc)");
  e.pg_name = pg.items[0].s;
  e.profiling_name = member(v, "profiling_name", K::Str, where, source).s;
  e.state = member(v, "state", K::Str, where, source).s;
  if (e.state != "scheduled" && e.state != "started" && e.state != "completed")
    bad(source,
        where + " state " + limits::excerpt(e.state) + " is not scheduled, started or completed");
  parse_profiling_name(e, where, source);
  return e;
}

}  // namespace

FlightRecorderDump read_flight_recorder(std::string_view bytes, const std::string& source) {
  using K = PickleValue::Kind;
  const PickleValue root = parse_pickle(bytes, source);
  if (root.kind != K::Dict)
    bad(source, std::string("the pickle holds a ") + root.kind_name() +
                    ", not a Flight Recorder dump (a dict)");
  FlightRecorderDump d;
  d.source = source;
  d.version = member(root, "version", K::Str, "the dump", source).s;
  const PickleValue& config = member(root, "pg_config", K::Dict, "the dump", source);
  for (const auto& [key, g] : config.entries) {
    if (key.kind != K::Str || g.kind != K::Dict) bad(source, "pg_config is not {name: {...}}");
    const std::string where = "pg_config[" + limits::excerpt(key.s) + "]";
    FrGroup group;
    group.name = key.s;
    group.desc = member(g, "desc", K::Str, where, source).s;
    group.ranks = parse_ranks(member(g, "ranks", K::Str, where, source).s, where, source);
    d.groups.push_back(std::move(group));
  }
  // "entries" is absent when the dump was asked without collectives.
  if (const PickleValue* entries = root.find("entries")) {
    if (entries->kind != K::List)
      bad(source, std::string("\"entries\" is a ") + entries->kind_name() + ", expected a list");
    for (std::size_t k = 0; k < entries->items.size(); ++k)
      d.entries.push_back(read_entry(entries->items[k], k, source));
  }
  return d;
}

}  // namespace pipeplan
