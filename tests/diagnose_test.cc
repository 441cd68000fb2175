// Hang replay: the bounded pickle reader (on real Flight Recorder dumps of
// torch 2.15 in tests/diagnose/, and on hostile bytes), the reading of a
// dump, and the diagnosis from synthetic dumps and from pipeplan's traces.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "pipeplan/diagnose.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/pickle.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::read_source_file;

namespace {

std::string fixture(const std::string& name) { return read_source_file("tests/diagnose/" + name); }

// 1f1b p=2 m=2, as `pipeplan plan -s 1f1b -p 2 -m 2` lowers it.
Plan one_f_one_b() {
  CsvReadOptions o;
  o.schedule = "1f1b";
  return parse_csv_plan(
      "0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n",
      "1f1b.csv", o);
}

FrEntry entry(const std::string& name, const std::string& state, std::int64_t seq) {
  FrEntry e;
  e.record_id = seq - 1;
  e.p2p_seq_id = seq;
  e.pg_name = "0";
  e.profiling_name = "nccl:" + name;
  e.state = state;
  const bool send = name.rfind("send", 0) == 0;
  e.op = send ? "send" : "recv";
  const std::size_t arrow = name.find(send ? "->" : "<-");
  const int a = std::stoi(name.substr(5, arrow - 5)), b = std::stoi(name.substr(arrow + 2));
  if (send) e.src = a, e.dst = b;
  else e.dst = a, e.src = b;
  return e;
}

// Rank `rank`'s dump holding `ops` ("send 0->1", ...) in order, each in `states`.
FlightRecorderDump dump(int rank, const std::vector<std::pair<std::string, std::string>>& ops,
                        int world = 2) {
  FlightRecorderDump d;
  d.source = "rank" + std::to_string(rank);
  d.version = "2.10";
  FrGroup g{"0", "default_pg", {}};
  for (int r = 0; r < world; ++r) g.ranks.push_back(r);
  d.groups.push_back(g);
  std::int64_t seq = 1;
  for (const auto& [op, state] : ops) d.entries.push_back(entry(op, state, seq++));
  return d;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("pickle: reads a real Flight Recorder dump of torch 2.15", "[diagnose]") {
  const PickleValue v = parse_pickle(fixture("ok_rank0"), "ok_rank0");
  REQUIRE(v.kind == PickleValue::Kind::Dict);
  REQUIRE(v.find("version"));
  CHECK(v.find("version")->s == "2.10");
  const PickleValue* entries = v.find("entries");
  REQUIRE(entries);
  REQUIRE(entries->items.size() == 2);
  const PickleValue& e = entries->items[0];
  CHECK(e.find("profiling_name")->s == "gloo_hooked:send 0->1");
  CHECK(e.find("p2p_seq_id")->i == 1);
  CHECK(e.find("time_created_ns")->i > (std::int64_t{1} << 60));  // LONG1, 8 bytes
  CHECK(e.find("is_p2p")->kind == PickleValue::Kind::Bool);
  CHECK(e.find("time_discovered_started_ns")->kind == PickleValue::Kind::None);
  REQUIRE(e.find("process_group")->kind == PickleValue::Kind::Tuple);
  CHECK(e.find("process_group")->items[1].s == "default_pg");  // a memo fetch
  CHECK(e.find("input_sizes")->items[0].items[0].i == 4);

  const FlightRecorderDump d = read_flight_recorder(fixture("hang_rank1"), "hang_rank1");
  CHECK(d.version == "2.10");
  REQUIRE(d.groups.size() == 1);
  CHECK(d.groups[0].desc == "default_pg");
  CHECK(d.groups[0].ranks == std::vector<int>{0, 1});
  REQUIRE(d.entries.size() == 1);
  CHECK(d.entries[0].op == "recv");
  CHECK(d.entries[0].dst == 1);
  CHECK(d.entries[0].src == 0);
  CHECK(d.entries[0].state == "scheduled");
}

TEST_CASE("pickle: hostile bytes are refused with the offset, never a crash", "[diagnose]") {
  const std::string good = fixture("hang_rank0");
  // Every truncation of a real dump.
  for (std::size_t n = 0; n < good.size(); ++n)
    CHECK_THROWS_AS(parse_pickle(good.substr(0, n), "cut"), InputError);
  CHECK(message_of([&] {
          parse_pickle(good.substr(0, 100), "cut");
        }).find("cut: offset 98: truncated") == 0);
  CHECK(message_of([] { parse_pickle("", "e"); }) == "e: offset 0: empty input: not a pickle");
  CHECK(message_of([] { parse_pickle("{\"format\": 1}", "j"); }) ==
        "j: offset 0: not a pickle (a pickle of protocol 2 or later starts with 0x80, this "
        "starts with 0x7b)");
  // GLOBAL 'os\nsystem\n': would construct an object.
  CHECK(message_of([] {
          parse_pickle(std::string("\x80\x02"
                                   "cos\nsystem\n",
                                   13),
                       "g");
        }).find("g: offset 2: opcode 0x63 'c' (GLOBAL) is not supported") == 0);
  CHECK(message_of([] {
          parse_pickle(std::string("\x80\x02\xff", 3), "u");
        }).find("u: offset 2: opcode 0xff is not a known pickle opcode") == 0);
  // Deep nesting: lists in lists, and MARKs.
  std::string deep = "\x80\x02";
  for (int i = 0; i < 100; ++i) deep += "]";
  for (int i = 0; i < 99; ++i) deep += "a";
  deep += ".";
  CHECK(message_of([&] { parse_pickle(deep, "d"); }).find("nested deeper than 64 levels") !=
        std::string::npos);
  CHECK(message_of([] {
          parse_pickle("\x80\x02" + std::string(1000, '('), "m");
        }).find("m: offset 66: nested deeper than 64 levels (limit)") == 0);
  // A string longer than the bytes left, and a memo fetch of what was never put.
  CHECK(message_of([] {
          parse_pickle(std::string("\x80\x02X\xff\xff\xff\x7f", 7), "s");
        }).find("s: offset 2: a string of 2147483647 bytes (limit 16777216)") == 0);
  CHECK(message_of([] {
          parse_pickle(std::string("\x80\x02X\x10\x00\x00\x00"
                                   "abc",
                                   10),
                       "t");
        }) == "t: offset 2: truncated: a string needs 16 bytes, 3 left");
  CHECK(message_of([] { parse_pickle(std::string("\x80\x02h\x07.", 5), "h"); }) ==
        "h: offset 2: memo index 7 was never put");
  // One string fetched from the memo again and again: the copies count.
  std::string laughs = std::string("\x80\x02]q\x00(", 6);
  laughs += std::string("X\x00\x04\x00\x00", 5) + std::string(1024, 'a') + "q\x01";
  for (int i = 0; i < 2000; ++i) laughs += "h\x01";
  laughs += "e.";
  PickleLimits small;
  small.max_bytes = 1 << 20;
  CHECK(message_of([&] {
          parse_pickle(laughs, "l", small);
        }).find("more than 1048576 bytes of strings (limit)") != std::string::npos);
  CHECK(parse_pickle(laughs, "l").items.size() == 2001);
  // A well-formed pickle that is not a dump.
  CHECK(message_of([] { read_flight_recorder(std::string("\x80\x02]q\x00.", 6), "x"); }) ==
        "x: the pickle holds a list, not a Flight Recorder dump (a dict)");
  CHECK(message_of([] { read_flight_recorder(std::string("\x80\x02}.", 4), "y"); }) ==
        "y: the dump has no \"version\" (not a Flight Recorder dump?)");
}

TEST_CASE("diagnose: the real Gloo dumps name both ranks and the cycle", "[diagnose]") {
  Plan plan = parse_csv_plan(fixture("hang.csv"), "hang.csv");
  const HangReport r =
      diagnose_flight_recorder(plan, {read_flight_recorder(fixture("hang_rank0"), "hang_rank0"),
                                      read_flight_recorder(fixture("hang_rank1"), "hang_rank1")});
  CHECK_FALSE(r.completed);
  REQUIRE(r.ranks.size() == 2);
  CHECK(r.ranks[0].status == RankDiagnosis::Status::Waiting);
  CHECK(to_string(r.ranks[0].first_unmatched->action) == "0RECV_B0");
  CHECK(*r.ranks[0].waits_for == 1);
  CHECK(to_string(r.ranks[1].first_unmatched->action) == "1RECV_F0");
  CHECK(r.chain == std::vector<int>{0, 1});
  CHECK(r.cycle);
  CHECK(r.summary ==
        "hang: 2 of 2 ranks waiting (0, 1); waiting chain: rank 0 (at 0RECV_B0) -> rank 1 (at "
        "1RECV_F0) -> rank 0 [cycle]");

  plan = parse_csv_plan(fixture("ok.csv"), "ok.csv");
  const HangReport ok =
      diagnose_flight_recorder(plan, {read_flight_recorder(fixture("ok_rank1"), "ok_rank1"),
                                      read_flight_recorder(fixture("ok_rank0"), "ok_rank0")});
  CHECK(ok.completed);
  CHECK(ok.summary == "completed: every rank finished 1 step(s) of the plan");
  CHECK(to_string(ok.ranks[1].last_completed->action) == "1SEND_B0");
}

TEST_CASE("diagnose: states of a backend that reports completion, over steps", "[diagnose]") {
  const Plan plan = one_f_one_b();
  // Two steps, all completed.
  std::vector<std::pair<std::string, std::string>> r0, r1;
  for (int step = 0; step < 2; ++step) {
    for (const char* op : {"send 0->1", "recv 0<-1", "send 0->1", "recv 0<-1"})
      r0.emplace_back(op, "completed");
    for (const char* op : {"recv 1<-0", "send 1->0", "recv 1<-0", "send 1->0"})
      r1.emplace_back(op, "completed");
  }
  HangReport done = diagnose_flight_recorder(plan, {dump(0, r0), dump(1, r1)});
  CHECK(done.completed);
  CHECK(done.ranks[0].steps_done == 2);
  CHECK(done.notes.empty());

  // Step 2: rank 1 received 1RECV_F0 and never sent 1SEND_B0 (it stopped
  // computing 1F0/1B0, or died); rank 0 posted 0RECV_B0 and waits.
  r0.resize(4);
  r0.emplace_back("send 0->1", "completed");
  r0.emplace_back("recv 0<-1", "started");
  r1.resize(4);
  r1.emplace_back("recv 1<-0", "completed");
  const HangReport hang = diagnose_flight_recorder(plan, {dump(0, r0), dump(1, r1)});
  CHECK_FALSE(hang.completed);
  const RankDiagnosis& a = hang.ranks[0];
  CHECK(a.status == RankDiagnosis::Status::Waiting);
  CHECK(a.steps_done == 1);
  CHECK(a.last_completed->step == 2);
  CHECK(to_string(a.last_completed->action) == "0SEND_F0");
  CHECK(a.first_unmatched->index == 3);
  CHECK(a.why == "posted 0RECV_B0, which waits for 1SEND_B0 on rank 1");
  const RankDiagnosis& b = hang.ranks[1];
  CHECK(b.status == RankDiagnosis::Status::Stopped);
  CHECK(to_string(b.first_unmatched->action) == "1SEND_B0");
  CHECK(hang.summary ==
        "hang: 1 of 2 ranks waiting (0); waiting chain: rank 0 (at 0RECV_B0) -> rank 1 (stopped "
        "before 1SEND_B0)");

  // Without rank 1's dump: the chain ends at the rank nobody heard from.
  const HangReport lone = diagnose_flight_recorder(plan, {dump(0, r0)});
  CHECK(lone.ranks[1].status == RankDiagnosis::Status::NoRecord);
  CHECK(lone.summary.find("-> rank 1 (no record)") != std::string::npos);

  // A rank that finished while its peer still waits for it.
  std::vector<std::pair<std::string, std::string>> one_step(r1.begin(), r1.begin() + 4);
  const HangReport early = diagnose_flight_recorder(plan, {dump(0, r0), dump(1, one_step)});
  CHECK(early.ranks[1].status == RankDiagnosis::Status::Finished);
  CHECK(early.summary.find("-> rank 1 (finished 1 step(s))") != std::string::npos);
}

TEST_CASE("diagnose: dumps that do not fit the plan are refused by name", "[diagnose]") {
  const Plan plan = one_f_one_b();
  CHECK(message_of([&] {
          diagnose_flight_recorder(plan, {dump(0, {{"send 0->1", "completed"}}, 3)});
        }) == "rank0: the dump is of 3 ranks (process group '0'), the plan of 2");
  CHECK(message_of([&] {
          diagnose_flight_recorder(
              plan, {dump(0, {{"send 0->1", "completed"}}), dump(0, {{"send 0->1", "completed"}})});
        }) == "rank0: a second dump of rank 0 (the first: rank0)");
  CHECK(message_of([&] {
          diagnose_flight_recorder(
              plan, {dump(0, {{"send 0->1", "completed"}, {"send 0->1", "completed"}})});
        }) ==
        "rank0: P2P op 1 of rank 0 (nccl:send 0->1, record 1) differs from the plan, whose op 1 "
        "there is 0RECV_B0 (step 1, index 3), a receive from rank 1");
  FlightRecorderDump nameless = dump(0, {});
  nameless.source = "dump";
  CHECK(message_of([&] {
          diagnose_flight_recorder(plan, {nameless});
        }).find("dump: cannot tell which rank the dump is of") == 0);
  // A dump without P2P entries takes its rank from its name, as torch's loader does.
  const HangReport idle = diagnose_flight_recorder(plan, {dump(0, {}), dump(1, {})});
  CHECK(idle.ranks[0].status == RankDiagnosis::Status::Stopped);
  CHECK(idle.ranks[0].why.find("stopped before 0SEND_F0") == 0);
}

TEST_CASE("diagnose: a dump whose ring buffer dropped the oldest entries", "[diagnose]") {
  const Plan plan = one_f_one_b();
  // Rank 0 kept only step 2's ops (p2p_seq_id 5..8); rank 1 all of both steps.
  FlightRecorderDump d0 = dump(0, {{"send 0->1", "completed"},
                                   {"recv 0<-1", "completed"},
                                   {"send 0->1", "completed"},
                                   {"recv 0<-1", "completed"}});
  for (FrEntry& e : d0.entries) e.p2p_seq_id += 4;
  std::vector<std::pair<std::string, std::string>> r1;
  for (int step = 0; step < 2; ++step)
    for (const char* op : {"recv 1<-0", "send 1->0", "recv 1<-0", "send 1->0"})
      r1.emplace_back(op, "completed");
  const HangReport r = diagnose_flight_recorder(plan, {d0, dump(1, r1)});
  CHECK(r.completed);
  CHECK(r.ranks[0].steps_done == 2);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0] ==
        "rank 0: the dump starts at P2P op 4 (the ring buffer dropped older entries)");
}

TEST_CASE("diagnose: pipeplan's own trace of a stuck run", "[diagnose]") {
  const Plan plan = one_f_one_b();
  Trace t;
  t.plan = plan;
  auto record = [&](int step, int rank, int index) {
    TraceRecord r;
    r.step = step, r.rank = rank, r.index = index;
    r.action = plan.ranks[static_cast<std::size_t>(rank)][static_cast<std::size_t>(index)];
    t.records.push_back(r);
  };
  for (int rank = 0; rank < 2; ++rank)
    for (int i = 0; i < 8; ++i) record(1, rank, i);
  HangReport done = diagnose_trace(plan, t, "run.json");
  CHECK(done.completed);
  CHECK(done.observed == "all");

  // Step 2: rank 0 ran 0F0 0SEND_F0 0F1 and posted 0RECV_B0; rank 1 ran
  // 1RECV_F0 1F0 1B0 and posted 1SEND_B0: both ends of one transfer are
  // posted, and it never completed.
  for (int i : {0, 1, 2}) record(2, 0, i);
  for (int i : {0, 1, 2}) record(2, 1, i);
  const HangReport met = diagnose_trace(plan, t, "run.json");
  CHECK_FALSE(met.completed);
  CHECK(to_string(met.ranks[0].last_completed->action) == "0F1");
  CHECK(to_string(met.ranks[0].first_unmatched->action) == "0RECV_B0");
  CHECK(met.ranks[0].why ==
        "posted 0RECV_B0, which waits for 1SEND_B0 on rank 1, posted too: the transfer met and "
        "never completed (the transport, or an earlier operation on its stream)");
  CHECK(to_string(met.ranks[1].first_unmatched->action) == "1SEND_B0");

  // Both ranks receive first (tests/diagnose/hang.csv): rank 0 ran 0F0,
  // posted 0RECV_B0 and waits at 0B0; rank 1 posted 1RECV_F0 and waits at 1F0.
  const Plan deadlock = parse_csv_plan(fixture("hang.csv"), "hang.csv");
  Trace stuck;
  stuck.plan = deadlock;
  TraceRecord f0;
  f0.action = deadlock.ranks[0][0];
  stuck.records.push_back(f0);
  const HangReport hang = diagnose_trace(deadlock, stuck, "stuck.json");
  CHECK(hang.cycle);
  std::ostringstream text, json;
  write_hang_report_text(hang, text);
  CHECK(text.str() ==
        "hang replay of 2 rank(s) from a pipeplan trace (observed: all)\n"
        "rank 0: waiting (stuck.json)\n"
        "  last completed:  0F0 (step 1, index 0)\n"
        "  first unmatched: 0RECV_B0 (step 1, index 1)\n"
        "  posted 0RECV_B0, which waits for 1SEND_B0 on rank 1\n"
        "rank 1: waiting (stuck.json)\n"
        "  last completed:  none\n"
        "  first unmatched: 1RECV_F0 (step 1, index 0)\n"
        "  posted 1RECV_F0, which waits for 0SEND_F0 on rank 0\n"
        "hang: 2 of 2 ranks waiting (0, 1); waiting chain: rank 0 (at 0RECV_B0) -> rank 1 (at "
        "1RECV_F0) -> rank 0 [cycle]\n");
  write_hang_report_json(hang, json);
  CHECK(json.str().find("\"format\": \"pipeplan.diagnosis\"") != std::string::npos);
  CHECK(json.str().find("\"cycle\": [\n    0,\n    1\n  ]") != std::string::npos);

  Plan other = plan;
  other.ranks[1][0] = make(ActionType::RecvF, 1, 1);
  CHECK(message_of([&] { diagnose_trace(other, t, "run.json"); }) ==
        "run.json: the trace's plan differs from the plan at rank 1 index 0: the trace has "
        "1RECV_F0, the plan 1RECV_F1");
}
