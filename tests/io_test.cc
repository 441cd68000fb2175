// Reading plans: strict JSON, torch-style CSV with inferred metadata, and the
// exact wording of every input error.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::actions;

namespace {

Plan small_plan() {
  Plan p;
  p.meta = PlanMeta{"1f1b", 2, 2, 1, StageMapping::Loop};
  p.rank_ids = {0, 1};
  p.ranks = {actions("0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1"),
             actions("1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1")};
  return p;
}

// A JSON document with one field replaced (by text surgery, so that any
// malformed value can be injected).
std::string json_with(const std::string& field_line, const std::string& replacement) {
  std::ostringstream ss;
  write_json(small_plan(), ss);
  std::string doc = ss.str();
  auto at = doc.find(field_line);
  REQUIRE(at != std::string::npos);
  doc.replace(at, field_line.size(), replacement);
  return doc;
}

std::string json_error(const std::string& text) {
  try {
    parse_json_plan(text, "plan.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string csv_error(const std::string& text, const CsvReadOptions& options = {}) {
  try {
    parse_csv_plan(text, "plan.csv", options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("io: JSON plans round-trip exactly", "[io]") {
  Plan p = small_plan();
  std::ostringstream ss;
  write_json(p, ss);
  CHECK(parse_json_plan(ss.str(), "plan.json") == p);

  // A single-rank plan and a compute-only V plan with pass-through actions.
  Plan one;
  one.meta = PlanMeta{"custom", 4, 3, 2, StageMapping::V};
  one.rank_ids = {2};
  one.ranks = {actions("2UNSHARD 5UNSHARD 2F0 5F0 (2F1;5B0)OVERLAP_F_B 5B1 2B0 2B1 5REDUCE_GRAD")};
  std::ostringstream ss1;
  write_json(one, ss1);
  CHECK(parse_json_plan(ss1.str()) == one);
}

TEST_CASE("io: JSON field order and spacing do not matter", "[io]") {
  const std::string text = R"({"ranks":[{"actions":["0F0","0B0"],"rank":0}],"compute_only":true,
    "stage_to_rank":"loop","stages_per_rank":1,"num_microbatches":1,"pp_degree":1,
    "schedule":"gpipe","version":1,"format":"pipeplan.plan"})";
  Plan p = parse_json_plan(text);
  CHECK(p.meta == PlanMeta{"gpipe", 1, 1, 1, StageMapping::Loop});
  CHECK(p.rank_ids == std::vector<int>{0});
  CHECK(p.ranks[0] == actions("0F0 0B0"));
}

TEST_CASE("io: JSON errors name the source and the field", "[io]") {
  CHECK(json_error(json_with("\"1SEND_B0\", \"1RECV_F1\"", "\"1SEND_B0\", \"0BW0\"")) ==
        "plan.json: ranks[1].actions[4]: unknown action '0BW0': 'BW' is not an action type "
        "(types: F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD, "
        "OFFLOAD, RELOAD, RECOMPUTE)");
  CHECK(
      json_error(json_with("\"0F1\"", "\"0F1x\"")) ==
      "plan.json: ranks[0].actions[2]: unknown action '0F1x': unexpected 'x' after the microbatch");
  CHECK(json_error(json_with("\"0F1\"", "7")) ==
        "plan.json: ranks[0].actions[2]: expected a string, got number");
  CHECK(json_error(json_with("\"version\": 1", "\"version\": 2")) ==
        "plan.json: version: 2 is not supported (this pipeplan reads version 1)");
  CHECK(json_error(json_with("\"format\": \"pipeplan.plan\"", "\"format\": \"torch\"")) ==
        "plan.json: format: expected \"pipeplan.plan\", got \"torch\" (not a pipeplan plan)");
  CHECK(json_error(json_with("\"pp_degree\": 2", "\"pp_degree\": \"2\"")) ==
        "plan.json: pp_degree: expected an integer, got string \"2\"");
  CHECK(json_error(json_with("\"pp_degree\": 2", "\"pp_degree\": 2.5")) ==
        "plan.json: pp_degree: expected an integer, got a fractional number 2.5");
  CHECK(json_error(json_with("\"num_microbatches\": 2", "\"num_microbatches\": 0")) ==
        "plan.json: num_microbatches: 0 is below the minimum 1");
  CHECK(json_error(json_with("\"pp_degree\": 2", "\"pp_degree\": 100000")) ==
        "plan.json: pp_degree: 100000 is larger than the supported 65536");
  CHECK(json_error(json_with("\"stage_to_rank\": \"loop\"", "\"stage_to_rank\": \"zigzag\"")) ==
        "plan.json: stage_to_rank: expected \"loop\" or \"v\", got \"zigzag\"");
  CHECK(json_error(json_with("\"schedule\": \"1f1b\",", "")) ==
        "plan.json: missing field 'schedule'");
  CHECK(json_error(json_with("\"schedule\": \"1f1b\"", "\"schedule\": \"1f1b\", \"speed\": 3")) ==
        "plan.json: unknown field 'speed'");
  CHECK(json_error(json_with("{\"rank\": 1, ", "{\"rank\": 1, \"note\": 0, ")) ==
        "plan.json: ranks[1]: unknown field 'note'");
  CHECK(json_error(json_with("{\"rank\": 1, ", "{\"rank\": 2, ")) ==
        "plan.json: ranks[1].rank: rank 2 is out of range 0..1");
  CHECK(json_error(json_with("{\"rank\": 1, ", "{\"rank\": 0, ")) ==
        "plan.json: ranks[1].rank: rank 0 appears twice (also ranks[0])");
  CHECK(json_error(json_with("{\"rank\": 1, ", "{\"rank\": -1, ")) ==
        "plan.json: ranks[1].rank: -1 is below the minimum 0");
  CHECK(json_error(json_with("{\"rank\": 1, \"actions\"", "{\"actions\"")) ==
        "plan.json: ranks[1]: missing field 'rank'");
  CHECK(json_error(json_with("\"compute_only\": false", "\"compute_only\": true")) ==
        "plan.json: compute_only: true, but ranks[0].actions[1] is 0SEND_F0");
  CHECK(json_error(json_with("\"compute_only\": false", "\"compute_only\": 0")) ==
        "plan.json: compute_only: expected true or false, got number");
  CHECK(json_error("[1, 2]") == "plan.json: expected a JSON object at the top level, got array");
  CHECK(json_error("{\"format\": ") ==
        "plan.json: not valid JSON: parse error at line 1, column 12: syntax error while parsing "
        "value - unexpected end of input; expected '[', '{', or a literal");
  CHECK(json_error(json_with("\"ranks\": [", "\"ranks\": [], \"x\": [")) ==
        "plan.json: unknown field 'x'");
}

TEST_CASE("io: JSON rank lists are ascending and non-empty", "[io]") {
  std::ostringstream ss;
  write_json(small_plan(), ss);
  std::string doc = ss.str();
  // Swap the two rank entries.
  auto r0 = doc.find("    {\"rank\": 0");
  auto r1 = doc.find("    {\"rank\": 1");
  auto end = doc.find("\n  ]");
  std::string first = doc.substr(r0, r1 - r0 - 2);  // without ",\n"
  std::string second = doc.substr(r1, end - r1);
  std::string swapped = doc.substr(0, r0) + second + ",\n" + first + doc.substr(end);
  CHECK(
      json_error(swapped) ==
      "plan.json: ranks[1].rank: rank 0 listed after rank 1 (ranks are listed in ascending order)");

  Plan compute = small_plan();
  compute.ranks = {actions("0F0 0F1 0B0 0B1"), actions("1F0 1B0 1F1 1B1")};
  std::ostringstream cs;
  write_json(compute, cs);
  std::string flipped = cs.str();
  flipped.replace(flipped.find("\"compute_only\": true"), 20, "\"compute_only\": false");
  CHECK(json_error(flipped) ==
        "plan.json: compute_only: false, but the plan holds no SEND/RECV action");
}

// The reader streams the document, but a complaint never depends on where
// the keys sit: a syntax error outranks everything, the metadata outranks the
// ranks, an entry's "rank" outranks its "actions"; a repeated key is refused.
// Expected texts are the ones the DOM reader gave.
TEST_CASE("io: JSON errors do not depend on key order (streamed reading)", "[io]") {
  const std::string meta =
      R"("format": "pipeplan.plan", "version": 1, "schedule": "custom", "pp_degree": 2, )"
      R"("num_microbatches": 1, "stages_per_rank": 1, "stage_to_rank": "loop", "compute_only": true)";
  auto doc = [&](const std::string& ranks, const std::string& extra = "") {
    return "{\"ranks\": " + ranks + ", " + meta + extra + "}";
  };
  const std::string good =
      R"([{"actions": ["0F0", "0B0"], "rank": 0}, {"rank": 1, "actions": ["1F0", "1B0"]}])";
  Plan p = parse_json_plan(doc(good));
  CHECK(p.rank_ids == std::vector<int>{0, 1});
  CHECK(p.ranks[1] == actions("1F0 1B0"));

  const std::string bad_action = R"([{"rank": 0, "actions": ["0BW0"]}])";
  std::string v2 = doc(bad_action);
  v2.replace(v2.find("\"version\": 1"), 12, "\"version\": 2");
  CHECK(json_error(v2) == "plan.json: version: 2 is not supported (this pipeplan reads version 1)");
  CHECK(json_error(doc(bad_action) + " x") ==
        "plan.json: not valid JSON: parse error at line 1, column 218: syntax error while parsing "
        "value - "
        "invalid literal; last read: '\"compute_only\": true} x'; expected end of input");
  CHECK(json_error(doc(R"([{"actions": ["0BW0"], "rank": 5}])")) ==
        "plan.json: ranks[0].rank: rank 5 is out of range 0..1");
  CHECK(json_error(doc(R"([{"rank": "0", "b": 1, "actions": [], "a": {}}])")) ==
        "plan.json: ranks[0]: unknown field 'a'");
  CHECK(json_error(doc(R"([{"rank": 0, "actions": [3]}, 7])")) ==
        "plan.json: ranks[0].actions[0]: expected a string, got number");
  CHECK(
      json_error(doc(R"([{"rank": 1, "actions": ["1F0"]}, {"actions": [3], "rank": 0}])")) ==
      "plan.json: ranks[1].rank: rank 0 listed after rank 1 (ranks are listed in ascending order)");

  // Repeated keys are refused (a strict reader does not pick "the last one").
  CHECK(json_error("{\"ranks\": " + bad_action + ", \"version\": 2, " + meta +
                   ", \"ranks\": " + good + "}") == "plan.json: duplicate key 'version'");
  CHECK(json_error(
            doc(R"([{"rank": 0, "actions": ["0BW0"], "actions": ["0F0", "0B0"], "rank": 1}])")) ==
        "plan.json: ranks[0]: duplicate key 'actions'");

  // nlohmann reports a number out of double range apart from syntax errors;
  // it is malformed input all the same (the DOM reader let it escape as an
  // internal error).
  CHECK(json_error(R"({"version": 1e400})") ==
        "plan.json: not valid JSON: number overflow parsing '1e400'");
}

TEST_CASE("io: detect_format looks at the first non-blank character", "[io]") {
  CHECK(detect_format("  \n{\"format\": 1}") == PlanFormat::Json);
  CHECK(detect_format("\xEF\xBB\xBF{}") == PlanFormat::Json);
  CHECK(detect_format("0F0,0B0\n") == PlanFormat::Csv);
  CHECK(detect_format("") == PlanFormat::Csv);
  CHECK(parse_plan("0F0,1F0\n", "x.csv").meta.stages_per_rank == 2);
}

TEST_CASE("io: CSV reading infers pp, v, m and the mapping", "[io]") {
  // torch's compute-only style: blank idle cells, CRLF line ends.
  Plan p = parse_csv_plan("0F0,,0B0\r\n,1F0,1B0\r\n", "plan.csv");
  CHECK(p.meta == PlanMeta{"custom", 2, 1, 1, StageMapping::Loop});
  CHECK(p.rank_ids == std::vector<int>{0, 1});
  CHECK(p.ranks[0] == actions("0F0 0B0"));
  CHECK(p.ranks[1] == actions("1F0 1B0"));

  // Interleaved (loop, v=2), spaces around cells, trailing blank lines.
  Plan loop = parse_csv_plan(" 0F0 , 2F0,0F1 ,2F1\n1F0,3F0,1F1,3F1\n\n  \n", "plan.csv");
  CHECK(loop.meta == PlanMeta{"custom", 2, 2, 2, StageMapping::Loop});
  CHECK(loop.ranks[0] == actions("0F0 2F0 0F1 2F1"));

  // V placement: rank 0 holds stages 0 and 3.
  Plan v = parse_csv_plan("0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n", "plan.csv");
  CHECK(v.meta.mapping == StageMapping::V);
  CHECK(v.meta.stages_per_rank == 2);

  // A byte order mark is not part of the first cell.
  CHECK(parse_csv_plan("\xEF\xBB\xBF"
                       "0F0,0B0\r\n",
                       "plan.csv")
            .ranks[0] == actions("0F0 0B0"));

  // Quoted cells (csv.writer would quote only odd content; accept it anyway).
  Plan q = parse_csv_plan("\"0F0\",\" 0B0 \"\n", "plan.csv");
  CHECK(q.ranks[0] == actions("0F0 0B0"));

  // Explicit options win over inference.
  CsvReadOptions opts;
  opts.num_microbatches = 5;
  opts.schedule = "mine";
  Plan m = parse_csv_plan("0F0,0B0\n", "plan.csv", opts);
  CHECK(m.meta == PlanMeta{"mine", 1, 5, 1, StageMapping::Loop});
}

TEST_CASE("io: CSV errors carry file:line:column", "[io]") {
  CHECK(
      csv_error("0F0,0B0\n1F0, 2BW0\n") ==
      "plan.csv:2:7: unknown action '2BW0': 'BW' is not an action type (types: F, B, I, W, "
      "SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD, OFFLOAD, RELOAD, RECOMPUTE)");
  CHECK(csv_error("0F0,0F1junk\n") ==
        "plan.csv:1:8: unknown action '0F1junk': unexpected 'j' after the microbatch");
  CHECK(csv_error("0F0,0f1\n") ==
        "plan.csv:1:6: unknown action '0f1': expected an action type after the stage, got 'f' "
        "(types: F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD, "
        "OFFLOAD, RELOAD, RECOMPUTE)");
  CHECK(csv_error("0F\n") == "plan.csv:1:3: unknown action '0F': missing microbatch after 'F'");
  CHECK(csv_error("F0\n") == "plan.csv:1:1: unknown action 'F0': expected a stage number, got 'F'");
  CHECK(csv_error("0UNSHARD3\n") ==
        "plan.csv:1:9: unknown action '0UNSHARD3': UNSHARD takes no microbatch");
  CHECK(csv_error("0F0,0OVERLAP_F_B1\n") ==
        "plan.csv:1:5: unknown action '0OVERLAP_F_B1': OVERLAP_F_B is written as a group: "
        "(<s>F<m>;<s>B<m>)OVERLAP_F_B");
  CHECK(csv_error("(0F1;1F0)OVERLAP_F_B\n") ==
        "plan.csv:1:6: unknown action '(0F1;1F0)OVERLAP_F_B': an OVERLAP_F_B group ends with a "
        "full backward (B), got '1F0'");
  CHECK(csv_error("(0F1;1B0)OVERLAP\n") ==
        "plan.csv:1:10: unknown action '(0F1;1B0)OVERLAP': expected 'OVERLAP_F_B' after ')', got "
        "'OVERLAP'");
  CHECK(csv_error("(0F1;1B0;2B0)OVERLAP_F_B\n") ==
        "plan.csv:1:2: unknown action '(0F1;1B0;2B0)OVERLAP_F_B': an OVERLAP_F_B group holds "
        "exactly two actions: (<s>F<m>;<s>B<m>)");
  CHECK(csv_error("0F99999999999\n") ==
        "plan.csv:1:3: unknown action '0F99999999999': microbatch number 99999999999 is larger "
        "than the "
        "supported 1048575");
  CHECK(csv_error("0F0,\"0B0\n") == "plan.csv:1:5: unterminated quoted cell");
  CHECK(csv_error("\"0F0\"x\n") == "plan.csv:1:6: unexpected text after a quoted cell");
  CHECK(csv_error("") == "plan.csv: empty file: expected one row of actions per rank");
  CHECK(csv_error(",,\n,\n") == "plan.csv: no actions in any row");
}

TEST_CASE("io: CSV placement errors name both ranks", "[io]") {
  CHECK(
      csv_error("0F0,1F0\n1B0,0B0\n") ==
      "plan.csv:2:1: stage 1 is on rank 1 here but on rank 0 at 1:5; a stage belongs to one rank");
  CHECK(csv_error("0F0,2F0\n1F0\n") ==
        "plan.csv:1:5: 2 rows (ranks) but stages 0..2: the number of stages (3) must be a multiple "
        "of the number of ranks");
  // Rank 0 holds stages 0 and 1: neither loop (1 -> rank 1) nor v (1 -> rank 1).
  CHECK(csv_error("0F0,1F0\n2F0,3F0\n") ==
        "plan.csv:1:5: stage placement fits neither stage_to_rank loop nor v: rank 0 runs stage 1 "
        "(1F0), which both place on rank 1");
  // p=2, v=3: loop wants stage 4 on rank 0, v wants stage 2 on rank 1.
  CHECK(csv_error("0F0,2F0,5F0\n1F0,3F0,4F0\n") ==
        "plan.csv:2:9: stage placement fits neither stage_to_rank loop nor v: rank 1 runs stage 4 "
        "(4F0), which loop places on rank 0; rank 0 runs stage 2 (2F0) at 1:5, which v places on "
        "rank 1");
  CsvReadOptions v;
  v.mapping = StageMapping::V;
  CHECK(csv_error("0F0,2F0\n1F0,3F0\n", v) ==
        "plan.csv:1:5: rank 0 runs stage 2 (2F0), but stage_to_rank v places stage 2 on rank 1");
  CsvReadOptions loop;
  loop.mapping = StageMapping::Loop;
  CHECK(parse_csv_plan("0F0,2F0\n1F0,3F0\n", "plan.csv", loop).meta.mapping == StageMapping::Loop);
}

TEST_CASE("io: CSV and JSON convert into each other exactly", "[io]") {
  Plan p = small_plan();
  std::ostringstream csv;
  write_csv(p, csv);
  CsvReadOptions opts;
  opts.schedule = "1f1b";
  Plan back = parse_csv_plan(csv.str(), "plan.csv", opts);
  CHECK(back == p);
  std::ostringstream json1, json2;
  write_json(p, json1);
  write_json(back, json2);
  CHECK(json1.str() == json2.str());
}

TEST_CASE("io: an in-memory action table reads like its CSV, errors by rank and step", "[io]") {
  using Row = std::vector<std::optional<std::string>>;
  const std::string csv = "0F0,,2F0,2B0,0B0\n1F0,3F0,3B0,,1B0\n";
  const Plan from_csv = parse_csv_plan(csv, "plan.csv");
  const Plan from_table = parse_action_table({Row{"0F0", std::nullopt, "2F0", "2B0", "0B0"},
                                              Row{"1F0", "3F0", "3B0", std::nullopt, "1B0"}});
  CHECK(from_table == from_csv);
  CHECK(from_table.meta.stages_per_rank == 2);
  CsvReadOptions options;
  options.num_microbatches = 3;
  options.schedule = "interleaved-1f1b";
  CHECK(parse_action_table({Row{"0F0", "0B0"}}, "order", options).meta.num_microbatches == 3);

  auto table_error = [](const std::vector<Row>& rows) {
    try {
      parse_action_table(rows, "order");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(table_error({Row{"0F0", std::nullopt, "0BW0"}}) ==
        "order: rank 0 step 2: unknown action '0BW0': 'BW' is not an action type (types: F, B, "
        "I, W, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD, OFFLOAD, RELOAD, "
        "RECOMPUTE)");
  CHECK(table_error({Row{"0F0"}, Row{"1F0", std::nullopt, "0B0"}}) ==
        "order: rank 1 step 2: stage 0 is on rank 1 here but on rank 0 at rank 0 step 0; a "
        "stage belongs to one rank");
  CHECK(table_error({}) == "order: no ranks: expected one list of actions per rank");
  CHECK(table_error({Row{std::nullopt}}) == "order: no actions in any row");
}

TEST_CASE("io: BATCH_P2P groups read as marked members and round-trip exactly", "[io][groups]") {
  // The issue's smallest Megatron 1F1B plan (p=2, m=2).
  const std::string csv =
      "0F0,0SEND_F0,0F1,(0SEND_F1;0RECV_B0)BATCH_P2P,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1B0,( 1SEND_B0 ; 1RECV_F1 )BATCH_P2P,1F1,1B1,1SEND_B1\n";
  const Plan p = parse_csv_plan(csv, "plan.csv");
  REQUIRE(p.ranks[0].size() == 8);
  CHECK(p.ranks[0][3] == Action(ActionType::SendF, 0, 1, -1, -1, /*batched=*/true));
  CHECK(p.ranks[0][4] == make(ActionType::RecvB, 0, 0));
  CHECK(p.ranks[1][3] == Action(ActionType::SendB, 1, 0, -1, -1, true));
  CHECK(cell_size(p.ranks[0], 3) == 2);
  CHECK(cell_size(p.ranks[0], 4) == 1);
  std::ostringstream c1, j1, c2, j2;
  write_csv(p, c1);
  CHECK(c1.str() ==
        "0F0,0SEND_F0,0F1,(0SEND_F1;0RECV_B0)BATCH_P2P,0B0,0RECV_B1,0B1\n"
        "1RECV_F0,1F0,1B0,(1SEND_B0;1RECV_F1)BATCH_P2P,1F1,1B1,1SEND_B1\n");
  write_json(p, j1);
  const Plan from_json = parse_json_plan(j1.str(), "plan.json");
  CHECK(from_json == p);
  write_csv(from_json, c2);
  CHECK(c2.str() == c1.str());  // CSV -> JSON -> CSV
  write_json(parse_csv_plan(c2.str(), "plan.csv"), j2);
  CHECK(j2.str() == j1.str());  // JSON -> CSV -> JSON
  // Groups of three and four, to several peers (a middle rank of Megatron's
  // interleaved steady state), in an in-memory table too.
  using Row = std::vector<std::optional<std::string>>;
  const Plan t =
      parse_action_table({Row{"0F0", "0SEND_F0", "0RECV_B0", "0B0"},
                          Row{"1RECV_F0", "1F0", "(1SEND_F0;1RECV_F1;1RECV_B1)BATCH_P2P", "1F1",
                              "1B0", "(1SEND_B0;1SEND_F1;1RECV_B0)BATCH_P2P", "1B1"},
                          Row{"(2RECV_F0;2RECV_F1)BATCH_P2P", "2F0", "2B0",
                              "(2SEND_B0;2SEND_B1)BATCH_P2P", "2F1", "2B1"}},
                         "order");
  CHECK(cell_size(t.ranks[1], 2) == 3);
  CHECK(to_string(t.ranks[2]) ==
        "(2RECV_F0;2RECV_F1)BATCH_P2P 2F0 2B0 (2SEND_B0;2SEND_B1)BATCH_P2P 2F1 2B1");
}

TEST_CASE("io: malformed BATCH_P2P groups are input errors naming the cell", "[io][groups]") {
  auto csv_error = [](const std::string& cell) {
    try {
      parse_csv_plan("0F0,0SEND_F0," + cell + "\n1RECV_F0,1F0\n", "plan.csv");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(csv_error("()BATCH_P2P") ==
        "plan.csv:1:15: bad BATCH_P2P group '()BATCH_P2P': the group is empty; write "
        "(<A>;<B>;...)BATCH_P2P of one or more SEND_F, RECV_F, SEND_B, RECV_B");
  CHECK(csv_error("(0SEND_F1;0F1)BATCH_P2P") ==
        "plan.csv:1:24: bad BATCH_P2P group '(0SEND_F1;0F1)BATCH_P2P': 0F1 is not a SEND/RECV: a "
        "group holds only SEND_F, RECV_F, SEND_B and RECV_B (computes run outside it)");
  CHECK(csv_error("((0SEND_F1;0RECV_B0)BATCH_P2P;0RECV_B1)BATCH_P2P") ==
        "plan.csv:1:15: bad BATCH_P2P group '((0SEND_F1;0RECV_B0)BATCH_P2P;0RECV_B1)BATCH_P2P': "
        "groups do not nest: each member is one SEND/RECV");
  CHECK(csv_error("(0SEND_F1;(0F1;1B0)OVERLAP_F_B)BATCH_P2P").find("groups do not nest") !=
        std::string::npos);
  CHECK(csv_error("(0SEND_F1;0RECV_B0;0SEND_F1)BATCH_P2P") ==
        "plan.csv:1:33: bad BATCH_P2P group '(0SEND_F1;0RECV_B0;0SEND_F1)BATCH_P2P': 0SEND_F1 is "
        "twice in the group");
  CHECK(csv_error("BATCH_P2P") ==
        "plan.csv:1:14: bad BATCH_P2P group 'BATCH_P2P': BATCH_P2P is written as a group: "
        "(<A>;<B>;...)BATCH_P2P of one or more SEND_F, RECV_F, SEND_B, RECV_B");
  CHECK(csv_error("0BATCH_P2P1").find("BATCH_P2P is written as a group") != std::string::npos);
  CHECK(csv_error("(0SEND_F1;;0RECV_B0)BATCH_P2P").find("an empty member") != std::string::npos);
  CHECK(csv_error("(0SEND_F1;0RECV_B0)BATCH_P2Px") ==
        "plan.csv:1:42: bad BATCH_P2P group '(0SEND_F1;0RECV_B0)BATCH_P2Px': unexpected 'x' "
        "after BATCH_P2P");
  CHECK(csv_error("(0SEND_F1;0RECV_BW0)BATCH_P2P") ==
        "plan.csv:1:25: bad BATCH_P2P group '(0SEND_F1;0RECV_BW0)BATCH_P2P': unknown action "
        "'0RECV_BW0': 'RECV_BW' is not an action type (types: F, B, I, W, SEND_F, RECV_F, "
        "SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD, OFFLOAD, RELOAD, RECOMPUTE)");
  // JSON names the entry (ranks[r].actions[k] counts cells).
  const std::string json =
      "{\"format\": \"pipeplan.plan\", \"version\": 1, \"schedule\": \"custom\", "
      "\"pp_degree\": 2, \"num_microbatches\": 1, \"stages_per_rank\": 1, "
      "\"stage_to_rank\": \"loop\", \"compute_only\": false, \"ranks\": ["
      "{\"rank\": 0, \"actions\": [\"0F0\", \"(0SEND_F0)BATCH_P2P\"]},"
      "{\"rank\": 1, \"actions\": [\"1RECV_F0\", \"1F0\"]}]}";
  // A group of one is an explicit wait: the action, marked waited; written back as it was.
  const Plan one = parse_json_plan(json, "plan.json");
  REQUIRE(one.ranks[0].size() == 2);
  CHECK(one.ranks[0][1].waited);
  CHECK_FALSE(one.ranks[0][1].batch_next);
  CHECK(to_string(one.ranks[0][1]) == "(0SEND_F0)BATCH_P2P");
  CHECK(parse_plan("0F0,(0SEND_F0)BATCH_P2P\n1RECV_F0,1F0\n", "one.csv").ranks == one.ranks);
  CHECK(csv_error("(0F1)BATCH_P2P").find("0F1 is not a SEND/RECV") != std::string::npos);
}
