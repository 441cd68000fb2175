// Writing plans: exact JSON/CSV/text output, JSON Schema conformance (with a
// small validator for the keywords schemas/plan.schema.json uses), and the
// ASCII timeline.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>

#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/planner.h"
#include "test_util.h"

using namespace pipeplan;
using nlohmann::json;
using pipeplan::test::actions;

namespace {

// ---- a JSON Schema 2020-12 validator for the subset the plan schema uses ----
// Unknown keywords fail loudly so the schema cannot silently outgrow it.
class SchemaValidator {
 public:
  explicit SchemaValidator(json root) : root_(std::move(root)) {}

  std::vector<std::string> validate(const json& doc) {
    errors_.clear();
    check(root_, doc, "$");
    return errors_;
  }

 private:
  const json& resolve(const std::string& ref) {
    // Only local references "#/$defs/<name>" (all the schema needs).
    const std::string prefix = "#/$defs/";
    REQUIRE(ref.rfind(prefix, 0) == 0);
    return root_.at("$defs").at(ref.substr(prefix.size()));
  }

  static bool has_type(const json& v, const std::string& type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    if (type == "integer") return v.is_number_integer();
    if (type == "number") return v.is_number();
    FAIL("unknown type " << type);
    return false;
  }

  void fail(const std::string& path, const std::string& what) {
    errors_.push_back(path + ": " + what);
  }

  void check(const json& schema, const json& v, const std::string& path) {
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      const std::string& k = it.key();
      const json& s = it.value();
      if (k == "$schema" || k == "$id" || k == "title" || k == "description" || k == "$defs" ||
          k == "properties" || k == "additionalProperties") {
        continue;  // annotations, or handled with "properties" below
      } else if (k == "$ref") {
        check(resolve(s.get<std::string>()), v, path);
      } else if (k == "type") {
        bool ok = false;
        if (s.is_array())
          for (const auto& t : s) ok = ok || has_type(v, t.get<std::string>());
        else ok = has_type(v, s.get<std::string>());
        if (!ok) fail(path, "not of type " + s.dump());
      } else if (k == "const") {
        if (v != s) fail(path, "not " + s.dump());
      } else if (k == "enum") {
        if (std::find(s.begin(), s.end(), v) == s.end()) fail(path, "not one of " + s.dump());
      } else if (k == "minimum") {
        if (v.is_number() && v.get<double>() < s.get<double>()) fail(path, "below " + s.dump());
      } else if (k == "maximum") {
        if (v.is_number() && v.get<double>() > s.get<double>()) fail(path, "above " + s.dump());
      } else if (k == "minLength") {
        if (v.is_string() && v.get<std::string>().size() < s.get<std::size_t>())
          fail(path, "shorter than " + s.dump());
      } else if (k == "minItems") {
        if (v.is_array() && v.size() < s.get<std::size_t>())
          fail(path, "fewer items than " + s.dump());
      } else if (k == "pattern") {
        // ECMA-262 regexes; std::regex's default grammar is ECMAScript.
        if (v.is_string() &&
            !std::regex_search(v.get<std::string>(), std::regex(s.get<std::string>())))
          fail(path, "does not match " + s.dump());
      } else if (k == "required") {
        if (v.is_object())
          for (const auto& name : s)
            if (!v.contains(name.get<std::string>())) fail(path, "missing " + name.dump());
      } else if (k == "items") {
        if (v.is_array())
          for (std::size_t i = 0; i < v.size(); ++i)
            check(s, v[i], path + "[" + std::to_string(i) + "]");
      } else {
        FAIL("validator does not know keyword " << k);
      }
    }
    if (v.is_object() &&
        (schema.contains("properties") || schema.contains("additionalProperties"))) {
      const json props = schema.value("properties", json::object());
      for (auto it = v.begin(); it != v.end(); ++it) {
        const std::string sub = path + "." + it.key();
        if (props.contains(it.key())) {
          check(props.at(it.key()), it.value(), sub);
        } else if (schema.contains("additionalProperties")) {
          const json& extra = schema.at("additionalProperties");
          if (extra.is_boolean()) {
            if (!extra.get<bool>()) fail(sub, "additional property not allowed");
          } else {
            check(extra, it.value(), sub);
          }
        }
      }
    }
  }

  json root_;
  std::vector<std::string> errors_;
};

SchemaValidator& plan_schema() {
  static SchemaValidator v(json::parse(test::read_source_file("schemas/plan.schema.json")));
  return v;
}

std::string json_text(const Plan& p) {
  std::ostringstream ss;
  write_json(p, ss);
  return ss.str();
}

Problem problem(const std::string& s, int p, int m, int v = 0) {
  Problem pr;
  pr.schedule = s;
  pr.pp_degree = p;
  pr.num_microbatches = m;
  pr.stages_per_rank = v;
  return pr;
}

Plan tiny() {
  Plan p;
  p.meta = PlanMeta{"gpipe", 2, 1, 1, StageMapping::Loop};
  p.rank_ids = {0, 1};
  p.ranks = {actions("0F0 0SEND_F0 0RECV_B0 0B0"), actions("1RECV_F0 1F0 1B0 1SEND_B0")};
  return p;
}

// 1F1B, p=2, m=3, compute only (derived by hand from the 1F1B rule: rank r
// warms up with min(m, p-r) forwards, then alternates B and F, then drains).
Plan one_f_one_b_2x3() {
  Plan p;
  p.meta = PlanMeta{"1f1b", 2, 3, 1, StageMapping::Loop};
  p.rank_ids = {0, 1};
  p.ranks = {actions("0F0 0F1 0B0 0F2 0B1 0B2"), actions("1F0 1B0 1F1 1B1 1F2 1B2")};
  return p;
}

std::string timeline(const Plan& p) {
  std::ostringstream ss;
  write_timeline(p, ss);
  return ss.str();
}

}  // namespace

TEST_CASE("emit: JSON keeps the documented key order, one rank per line", "[emit]") {
  CHECK(json_text(tiny()) ==
        "{\n"
        "  \"format\": \"pipeplan.plan\",\n"
        "  \"version\": 1,\n"
        "  \"schedule\": \"gpipe\",\n"
        "  \"pp_degree\": 2,\n"
        "  \"num_microbatches\": 1,\n"
        "  \"stages_per_rank\": 1,\n"
        "  \"stage_to_rank\": \"loop\",\n"
        "  \"compute_only\": false,\n"
        "  \"ranks\": [\n"
        "    {\"rank\": 0, \"actions\": [\"0F0\", \"0SEND_F0\", \"0RECV_B0\", \"0B0\"]},\n"
        "    {\"rank\": 1, \"actions\": [\"1RECV_F0\", \"1F0\", \"1B0\", \"1SEND_B0\"]}\n"
        "  ]\n"
        "}\n");
  Plan odd = tiny();
  odd.meta.schedule = "my \"fast\" one";
  CHECK(json_text(odd).find("\"schedule\": \"my \\\"fast\\\" one\",") != std::string::npos);
}

TEST_CASE("emit: emitted plans validate against schemas/plan.schema.json", "[emit]") {
  std::vector<Plan> plans = {tiny(), one_f_one_b_2x3()};
  plans.push_back(plan(problem("gpipe", 4, 8)));
  plans.push_back(plan(problem("1f1b", 4, 8)));
  plans.push_back(plan_compute(problem("1f1b", 1, 1)));
  plans.push_back(plan(problem("interleaved-1f1b", 4, 8, 2)));
  plans.push_back(plan(problem("zbv", 2, 4)));
  plans.push_back(plan_compute(problem("dualpipev", 2, 4)));
  plans.push_back(plan_rank(problem("1f1b", 4, 8), 2));
  Problem inference = problem("zbv", 2, 4);
  inference.forward_only = true;
  plans.push_back(plan(inference));
  REQUIRE(json_text(plans.back()).find("\"forward_only\": true") != std::string::npos);
  for (const Plan& p : plans) {
    INFO(json_text(p));
    CHECK(plan_schema().validate(json::parse(json_text(p))).empty());
  }
}

TEST_CASE("emit: the schema rejects mutated plans", "[emit]") {
  const json good = json::parse(json_text(tiny()));
  REQUIRE(plan_schema().validate(good).empty());
  auto errors = [&](const std::function<void(json&)>& mutate) {
    json doc = good;
    mutate(doc);
    return plan_schema().validate(doc);
  };
  using V = std::vector<std::string>;
  CHECK(errors([](json& d) { d.erase("ranks"); }) == V{"$: missing \"ranks\""});
  CHECK(errors([](json& d) { d["extra"] = 1; }) == V{"$.extra: additional property not allowed"});
  CHECK(errors([](json& d) { d["version"] = 2; }) == V{"$.version: not 1"});
  CHECK(errors([](json& d) { d["format"] = "plan"; }) == V{"$.format: not \"pipeplan.plan\""});
  CHECK(errors([](json& d) { d["pp_degree"] = 0; }) == V{"$.pp_degree: below 1"});
  CHECK(errors([](json& d) { d["pp_degree"] = 2.5; }) == V{"$.pp_degree: not of type \"integer\""});
  CHECK(errors([](json& d) { d["stage_to_rank"] = "zigzag"; }) ==
        V{"$.stage_to_rank: not one of [\"loop\",\"v\"]"});
  CHECK(errors([](json& d) { d["compute_only"] = "no"; }) ==
        V{"$.compute_only: not of type \"boolean\""});
  CHECK(errors([](json& d) { d["schedule"] = ""; }) == V{"$.schedule: shorter than 1"});
  CHECK(errors([](json& d) { d["ranks"] = json::array(); }) == V{"$.ranks: fewer items than 1"});
  for (const char* bad : {"1BW0", "1F0 ", "F0", "1UNSHARD0", "(1F0;0F0)OVERLAP_F_B", "1f0"}) {
    INFO(bad);
    auto e = errors([&](json& d) { d["ranks"][1]["actions"][2] = bad; });
    REQUIRE(e.size() == 1);
    CHECK(e[0].rfind("$.ranks[1].actions[2]: does not match ", 0) == 0);
  }
  CHECK(errors([](json& d) { d["ranks"][0]["rank"] = -1; }) == V{"$.ranks[0].rank: below 0"});
  CHECK(errors([](json& d) { d["ranks"][0].erase("actions"); }) ==
        V{"$.ranks[0]: missing \"actions\""});
  CHECK(errors([](json& d) { d["ranks"][0]["x"] = 0; }) ==
        V{"$.ranks[0].x: additional property not allowed"});
  CHECK(errors([](json& d) { d["ranks"][0]["actions"] = "0F0"; }) ==
        V{"$.ranks[0].actions: not of type \"array\""});
}

TEST_CASE("emit: CSV is torch's _dump_csv layout", "[emit]") {
  std::ostringstream ss;
  write_csv(tiny(), ss);
  CHECK(ss.str() == "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");

  Plan groups;
  groups.meta = PlanMeta{"custom", 1, 2, 2, StageMapping::V};
  groups.rank_ids = {0};
  groups.ranks = {actions("0UNSHARD 0F0 1F0 (0F1;1B0)OVERLAP_F_B 1B1 0B0 0B1 0REDUCE_GRAD")};
  std::ostringstream gs;
  write_csv(groups, gs);
  CHECK(gs.str() == "0UNSHARD,0F0,1F0,(0F1;1B0)OVERLAP_F_B,1B1,0B0,0B1,0REDUCE_GRAD\n");

  Plan one = plan_rank(problem("1f1b", 4, 8), 2);
  std::ostringstream os;
  CHECK_THROWS_WITH(write_csv(one, os),
                    "CSV holds every rank of a plan (one row each); this plan holds 1 of 4 ranks: "
                    "write it as json or text");
}

TEST_CASE("emit: torch-csv is strictly torch's _dump_csv and refuses BATCH_P2P groups", "[emit]") {
  // Python's csv.writer ends every row with \r\n and writes an empty row for
  // an empty rank (pipeplan's CSV writes a trailing one as "" to keep it).
  std::ostringstream ss;
  write_torch_csv(tiny(), ss);
  // Rows with sends carry torch 2.15's waits: a forward send's after the local
  // backward of its microbatch, a backward send's at the row's end.
  CHECK(ss.str() ==
        "0F0,0SEND_F0,0RECV_B0,0B0,0WAIT_SEND_F0\r\n1RECV_F0,1F0,1B0,1SEND_B0,1WAIT_SEND_B0\r\n");
  Plan empty = tiny();
  empty.ranks[1].clear();
  std::ostringstream es, ec;
  write_torch_csv(empty, es);
  CHECK(es.str() == "0F0,0SEND_F0,0RECV_B0,0B0,0WAIT_SEND_F0\r\n\r\n");
  write_csv(empty, ec);
  CHECK(ec.str() == "0F0,0SEND_F0,0RECV_B0,0B0\n\"\"\n");

  // The Megatron 1F1B p=2 m=2: one group per rank.
  Plan grouped = tiny();
  grouped.meta.num_microbatches = 2;
  grouped.ranks = {actions("0F0 0SEND_F0 0F1 (0SEND_F1;0RECV_B0)BATCH_P2P 0B0 0RECV_B1 0B1"),
                   actions("1RECV_F0 1F0 1B0 (1SEND_B0;1RECV_F1)BATCH_P2P 1F1 1B1 1SEND_B1")};
  CHECK(grouped.ranks[0][3].batch_next);
  CHECK_FALSE(grouped.ranks[0][4].batch_next);
  CHECK(grouped.ranks[0][4] == make(ActionType::RecvB, 0, 0));
  std::ostringstream gs, gt, gj;
  write_csv(grouped, gs);
  CHECK(gs.str() ==
        "0F0,0SEND_F0,0F1,(0SEND_F1;0RECV_B0)BATCH_P2P,0B0,0RECV_B1,0B1\n"
        "1RECV_F0,1F0,1B0,(1SEND_B0;1RECV_F1)BATCH_P2P,1F1,1B1,1SEND_B1\n");
  write_text(grouped, gt);
  CHECK(gt.str() ==
        "rank 0: 0F0 0SEND_F0 0F1 (0SEND_F1;0RECV_B0)BATCH_P2P 0B0 0RECV_B1 0B1\n"
        "rank 1: 1RECV_F0 1F0 1B0 (1SEND_B0;1RECV_F1)BATCH_P2P 1F1 1B1 1SEND_B1\n");
  write_json(grouped, gj);
  CHECK(gj.str().find("\"0F1\", \"(0SEND_F1;0RECV_B0)BATCH_P2P\", \"0B0\"") != std::string::npos);
  std::ostringstream refused;
  CHECK_THROWS_WITH(write_torch_csv(grouped, refused),
                    "torch-csv: rank 0 index 3: (0SEND_F1;0RECV_B0)BATCH_P2P is a batched P2P "
                    "group, which torch's _load_csv cannot read; a plan with groups is written "
                    "as pipeplan's CSV (-f csv) or JSON");
  CHECK(refused.str().empty());  // nothing half-written

  // Marks a grammar cannot hold (a plan built in code) are refused by every writer.
  Plan bad = grouped;
  bad.ranks[0][2].batch_next = true;  // 0F1 marked
  std::ostringstream bs;
  CHECK_THROWS_WITH(write_csv(bad, bs),
                    "csv: rank 0 index 2: 0F1 is in a BATCH_P2P group, which holds only SEND_F, "
                    "RECV_F, SEND_B and RECV_B");
  bad = grouped;
  bad.ranks[1].back().batch_next = true;
  CHECK_THROWS_WITH(write_json(bad, bs),
                    "json: rank 1 index 7: 1SEND_B1 is marked as posted with the next action, "
                    "but it ends its rank's list");
}

TEST_CASE("emit: text is one line per rank", "[emit]") {
  std::ostringstream ss;
  write_text(tiny(), ss);
  CHECK(ss.str() == "rank 0: 0F0 0SEND_F0 0RECV_B0 0B0\nrank 1: 1RECV_F0 1F0 1B0 1SEND_B0\n");
  Plan empty = tiny();
  empty.ranks[1].clear();
  std::ostringstream es;
  write_text(empty, es);
  CHECK(es.str() == "rank 0: 0F0 0SEND_F0 0RECV_B0 0B0\nrank 1:\n");
}

TEST_CASE("emit: timeline of 1F1B p=2 m=3 at unit costs", "[emit]") {
  // Hand timing (F=1, B=2): r0 F0@0 F1@1, r1 F0@1 B0@2-4, r0 B0@4-6, r1 F1@4
  // B1@5-7, r0 F2@6 B1@7-9, r1 F2@7 B2@8-10, r0 B2@10-12.
  const std::string expected =
      "       0              5              10\n"
      "rank 0 F0 F1 .  .  B0--- F2 B1--- .  B2---\n"
      "rank 1 .  F0 B0--- F1 B1--- F2 B2--- .  .\n"
      "unit costs F=1 B=2 I=1 W=1, F+B group 3, comms free; makespan 12\n";
  CHECK(timeline(one_f_one_b_2x3()) == expected);

  // Comms do not change the picture.
  Plan with_comms = one_f_one_b_2x3();
  with_comms.ranks = {
      actions("0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0F2 0SEND_F2 0RECV_B1 0B1 0RECV_B2 0B2"),
      actions("1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1RECV_F2 1F2 1B2 1SEND_B2")};
  CHECK(timeline(with_comms) == expected);
}

TEST_CASE("emit: timeline of split backwards, groups and single ranks", "[emit]") {
  // Zero-bubble style on 2 ranks, m=1: r0 F0@0, r1 F0@1 I0@2 W0@3, r0 I0@3 W0@4.
  Plan zb;
  zb.meta = PlanMeta{"custom", 2, 1, 1, StageMapping::Loop};
  zb.rank_ids = {0, 1};
  zb.ranks = {actions("0F0 0I0 0W0"), actions("1F0 1I0 1W0")};
  CHECK(timeline(zb) ==
        "       0              5\n"
        "rank 0 F0 .  .  I0 W0\n"
        "rank 1 .  F0 I0 W0 .\n"
        "unit costs F=1 B=2 I=1 W=1, F+B group 3, comms free; makespan 5\n");

  // v > 1 labels carry the stage; an F+B group lasts 3 units.
  Plan v;
  v.meta = PlanMeta{"custom", 1, 2, 2, StageMapping::V};
  v.rank_ids = {0};
  v.ranks = {actions("0F0 1F0 (0F1;1B0)OVERLAP_F_B 1F1 1B1 0B0 0B1")};
  // Unit timing: 0F0@0, 1F0@1, group@2-5 (its B waits for 1F0), 1F1@5 (after
  // the group's 0F1), 1B1@6-8, 0B0@8-10, 0B1@10-12.
  CHECK(timeline(v) ==
        "       0                   5                   10\n"
        "rank 0 0F0 1F0 0F1+1B0---- 1F1 1B1---- 0B0---- 0B1----\n"
        "unit costs F=1 B=2 I=1 W=1, F+B group 3, comms free; makespan 12\n");

  // One rank of a larger plan: laid end to end, no waiting.
  Plan one;
  one.meta = PlanMeta{"1f1b", 4, 2, 1, StageMapping::Loop};
  one.rank_ids = {3};
  one.ranks = {actions("3RECV_F0 3F0 3B0 3SEND_B0 3RECV_F1 3F1 3B1 3SEND_B1")};
  CHECK(timeline(one) ==
        "       0              5\n"
        "rank 3 F0 B0--- F1 B1---\n"
        "single rank: actions laid end to end at unit costs; length 6\n");
}

TEST_CASE("emit: timeline of an order that cannot run still draws it", "[emit]") {
  // Rank 0 waits for the gradient of microbatch 0 before forwarding it.
  Plan stuck;
  stuck.meta = PlanMeta{"custom", 2, 1, 1, StageMapping::Loop};
  stuck.rank_ids = {0, 1};
  stuck.ranks = {actions("0B0 0F0"), actions("1F0 1B0")};
  const std::string out = timeline(stuck);
  // Forced: rank 0's B0 starts at 0 as if its inputs were there; the rest follows.
  CHECK(out.find("rank 0 B0--- F0 .  .  .\nrank 1 .  .  .  F0 B0---\n") != std::string::npos);
  CHECK(out.find("note: the compute order cannot run as written") != std::string::npos);
}

TEST_CASE("emit: timeline of 1F1B p=4 m=8 fits a terminal", "[emit]") {
  const std::string out = timeline(plan(problem("1f1b", 4, 8)));
  std::istringstream ss(out);
  std::string line;
  std::size_t widest = 0, rows = 0;
  while (std::getline(ss, line)) {
    widest = std::max(widest, line.size());
    rows += line.rfind("rank ", 0) == 0;
  }
  CHECK(rows == 4);
  CHECK(widest <= 110);
  // Makespan (m + p - 1) * (F + B) = 33; rank 3 starts after 3 idle units.
  CHECK(out.find("makespan 33\n") != std::string::npos);
  CHECK(out.find("rank 3 .  .  .  F0 B0--- F1 B1---") != std::string::npos);
  CHECK(out.find("rank 0 F0 F1 F2 F3 .  .  .  .  .  .  B0--- F4") != std::string::npos);
}
