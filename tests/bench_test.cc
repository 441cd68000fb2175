// pipeplan bench, run as a user would on a tiny shape: every pass runs,
// checks its own result (proofs, round trips) and reports one row per case
// and pass. No timing is asserted.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

using pipeplan::test::run_cli;

namespace {

const std::vector<std::string> kPasses = {"plan+lower+verify+csv",
                                          "plan",
                                          "lower",
                                          "lower --lowering seed",
                                          "plan --rank",
                                          "verify rendezvous",
                                          "verify eager",
                                          "verify serial",
                                          "simulate",
                                          "write csv",
                                          "write json",
                                          "parse csv",
                                          "parse json"};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("bench: csv output has one checked row per case and pass", "[bench]") {
  auto r = run_cli({"bench", "-s", "1f1b", "-s", "zbv", "-p", "4", "-m", "8,32", "--repeat", "1",
                    "--min-time", "0", "--no-memory", "--csv"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> rows = lines(r.out);
  REQUIRE(rows.size() == 1 + 2 * 2 * kPasses.size());
  CHECK(rows[0] ==
        "schedule,pp,v,m,actions,pass,items,seconds,items_per_s,bytes,mb_per_s,peak_growth_bytes,"
        "growth_bytes_per_action");
  // 1f1b p=4 m=8: 4 stages, 2 x 4 x 8 computes + 4 x 3 x 8 SEND/RECV = 160.
  std::size_t k = 1;
  for (const char* prefix : {"1f1b,4,1,8,160,", "1f1b,4,1,32,640,", "zbv,4,2,8,", "zbv,4,2,32,"})
    for (const std::string& pass : kPasses) {
      INFO(rows[k]);
      CHECK(rows[k].rfind(prefix, 0) == 0);
      CHECK(rows[k].find("," + pass + ",") != std::string::npos);
      ++k;
    }
}

TEST_CASE("bench: the table ends with the scaling ratios; bad input is a usage error", "[bench]") {
  auto r = run_cli({"bench", "-s", "1f1b", "-p", "4", "-m", "8,32", "--repeat", "1", "--min-time",
                    "0", "--no-memory"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("scaling: time(4m) / time(m), target <= 4.5") != std::string::npos);
  for (const std::string& pass : kPasses) {
    INFO(pass);
    CHECK(r.out.find(pass) != std::string::npos);
  }
  CHECK(r.out.find("m=   8->32") != std::string::npos);
  auto bad = run_cli({"bench", "-s", "no-such-schedule", "-m", "8"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("unknown schedule 'no-such-schedule'") != std::string::npos);
}

TEST_CASE("bench: --latency tables each lowering against the bound and torch", "[bench]") {
  auto r = run_cli({"bench", "--latency", "-s", "1f1b", "--csv"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> rows = lines(r.out);
  REQUIRE(rows.size() == 1 + 3 * 8);  // header + three cost sets x eight latencies
  CHECK(rows[0].rfind("schedule,costs,latency,shapes,seed_at_bound,", 0) == 0);
  CHECK(rows[0].find(",out_of_reach,out_of_reach_by_search,neither,optimal,") != std::string::npos);
  CHECK(rows[0].find(",batched_at_bound,batched_worst") != std::string::npos);
  CHECK(rows[1].rfind("1f1b,F=1 B=2 I=W=1,0.1,196,", 0) == 0);
  CHECK(rows[24].rfind("1f1b,F=1 B=3 I=2 W=1,3,196,", 0) == 0);
  // 1f1b: p 2..8 with m >= p, v = 1: 196 shapes; every one is at the bound
  // or proved out of reach, none neither (docs/performance.md).
  for (std::size_t i = 1; i < rows.size(); ++i) {
    INFO(rows[i]);
    std::vector<std::string> cells;
    std::istringstream in(rows[i]);
    for (std::string c; std::getline(in, c, ',');) cells.push_back(c);
    REQUIRE(cells.size() == 19);
    CHECK(std::stoi(cells[6]) + std::stoi(cells[12]) == 196);  // at bound + out of reach
    CHECK(cells[14] == "0");                                   // neither
    // The batched lowering (--batch-p2p): never below the eager bound, and
    // at most as many shapes at it as there are shapes.
    CHECK(std::stod(cells[18]) >= 1.0);
    CHECK(std::stoi(cells[17]) <= 196);
  }
}
