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
  REQUIRE(rows.size() == 5);  // header + four transfer costs
  CHECK(rows[0].rfind("schedule,comm,shapes,seed_at_bound,", 0) == 0);
  // 1f1b: p 2..8 with m >= p, v = 1: 196 shapes; the latency-hiding lowering
  // reaches the bound in every one (docs/performance.md).
  CHECK(rows[1].rfind("1f1b,lat 0.1,196,", 0) == 0);
  for (std::size_t i = 1; i < rows.size(); ++i)
    CHECK(rows[i].find(",196,1.0000,") != std::string::npos);
}
