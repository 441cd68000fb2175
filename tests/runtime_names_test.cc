// Runtimes by name (pipeplan/transport.h): the table's rows, the rules each
// adds to its transport model (where a rank waits, whether groups run
// apart), the hangs the runtimes really have reproduced as small plans, and
// the CLI's and the torch exports' use of them.
#include <catch2/catch.hpp>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/prove.h"
#include "pipeplan/simulate.h"
#include "pipeplan/torch_runtime.h"
#include "pipeplan/transport.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;

namespace {

Plan from_lines(int p, int m, int v, bool forward_only, const std::vector<std::string>& lines) {
  Plan plan;
  plan.meta = PlanMeta{"custom", p, m, v, StageMapping::Loop, forward_only, {}};
  for (int r = 0; r < p; ++r) {
    plan.rank_ids.push_back(r);
    plan.ranks.push_back(test::actions(lines[static_cast<std::size_t>(r)]));
  }
  return plan;
}

VerifyResult under(const Plan& plan, const std::string& runtime) {
  return verify(plan, verify_options(runtime_named(runtime)));
}

// p=3, v=2, forward-only, one microbatch: rank 1 posts the receive of stage 4
// (from rank 0's stage 3) before its send of stage 1 to rank 2, and rank 0's
// stage 3 needs rank 2's stage 2. Posted and left, the send goes out and the
// ring turns; waited where it stands, rank 1 never sends: 1 -> 0 -> 2 -> 1.
Plan waited_ring() {
  return from_lines(
      3, 1, 2, true,
      {"0F0 0SEND_F0 3RECV_F0 3F0 3SEND_F0", "1RECV_F0 1F0 4RECV_F0 1SEND_F0 4F0 4SEND_F0",
       "2RECV_F0 2F0 2SEND_F0 5RECV_F0 5F0"});
}

}  // namespace

TEST_CASE("runtime names: the table holds the names the issue fixes, each with its source",
          "[runtime-names]") {
  const std::vector<std::string> want = {
      "torch-2.11", "torch",    "megatron",      "megatron-batched", "megatron-overlap",
      "deepspeed",  "dualpipe", "pipeplan-gloo", "pipeplan-nccl"};
  std::vector<std::string> names;
  for (const Runtime& r : runtimes()) {
    names.emplace_back(r.name);
    CHECK(!r.summary.empty());
    CHECK(!r.source.empty());
  }
  CHECK(names == want);
  // The models, as each runtime's source posts P2P.
  CHECK(runtime_named("torch-2.11").model == Transport::Serial);
  CHECK(runtime_named("torch").model == Transport::Rendezvous);
  CHECK(runtime_named("megatron-batched").model == Transport::Serial);
  CHECK(runtime_named("megatron").rules.waits == Waits::AtPost);
  CHECK(runtime_named("megatron-overlap").rules.waits == Waits::BeforeUse);
  CHECK(runtime_named("dualpipe").rules.waits == Waits::AtPost);
  CHECK(runtime_named("dualpipev").name == "dualpipe");  // an alias
  CHECK_FALSE(runtime_named("pipeplan-gloo").rules.groups_apart);
  CHECK(runtime_named("pipeplan-nccl").rules.groups_apart);
  CHECK_FALSE(find_runtime("nccl").has_value());
  try {
    runtime_named("torch-2.16");
    FAIL("an unknown runtime is refused");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "unknown runtime 'torch-2.16' (runtimes: torch-2.11, torch, megatron, "
          "megatron-batched, megatron-overlap, deepspeed, dualpipe, pipeplan-gloo, "
          "pipeplan-nccl; `pipeplan verify --runtime list` describes them)");
  }
  // The models' table: names, parsing and the predicates the core reads.
  CHECK(transport_names(", ", " or ") == "rendezvous, eager or serial");
  for (const TransportModel& m : kTransportModels) CHECK(parse_transport(m.name) == m.id);
  CHECK(buffered_sends(Transport::Eager));
  CHECK_FALSE(buffered_sends(Transport::Serial));
  CHECK(one_stream_per_rank(Transport::Serial));
  CHECK_FALSE(one_stream_per_rank(Transport::Rendezvous));
}

TEST_CASE("runtime names: waiting where it posts turns a running ring into a hang",
          "[runtime-names]") {
  const Plan ring = waited_ring();
  REQUIRE(check_structure(ring).empty());
  // Posted and left (torch, Megatron with overlap_p2p_comm): it runs.
  CHECK(under(ring, "torch").ok());
  CHECK(under(ring, "megatron-overlap").ok());
  CHECK(verify(ring, {Transport::Rendezvous}).ok());
  CHECK(verify(ring, {Transport::Eager}).ok());
  // Megatron without batch_p2p_comm waits right after each call: rank 1
  // waits at 4RECV_F0, so its 1SEND_F0 is never posted.
  const VerifyResult megatron = under(ring, "megatron");
  REQUIRE_FALSE(megatron.ok());
  std::string all;
  for (const Diagnostic& d : megatron.diagnostics) all += d.code + ": " + d.message + "\n";
  INFO(all);
  CHECK(all.find("4RECV_F0") != std::string::npos);
  CHECK(all.find("rank 1") != std::string::npos);
  // One stream per rank hangs it anyway (the receive heads rank 1's stream).
  CHECK_FALSE(under(ring, "torch-2.11").ok());
  CHECK_FALSE(under(ring, "deepspeed").ok());
  CHECK_FALSE(under(ring, "dualpipe").ok());
  // The fix: post the send before the receive; then every runtime runs it.
  const Plan fixed = from_lines(
      3, 1, 2, true,
      {"0F0 0SEND_F0 3RECV_F0 3F0 3SEND_F0", "1RECV_F0 1F0 1SEND_F0 4RECV_F0 4F0 4SEND_F0",
       "2RECV_F0 2F0 2SEND_F0 5RECV_F0 5F0"});
  for (const Runtime& r : runtimes()) {
    INFO(r.name);
    CHECK(verify(fixed, verify_options(r)).ok());
  }
}

TEST_CASE("runtime names: a waited single is a unit of one on its pair's stream",
          "[runtime-names]") {
  // Library plans lowered for rendezvous post each pair in one order; waited
  // where they stand they still run wherever the plain plan runs on one
  // stream per rank (the schedules' default lowerings are serial-safe).
  int planned = 0;
  for (const ScheduleInfo& info : schedules()) {
    for (int p : {2, 3, 4}) {
      for (int m : {4, 8}) {
        const std::string s = info.name;
        std::optional<Planner> maybe;
        try {
          maybe.emplace(Problem{s, p, m, 0});
        } catch (const InputError&) {
          continue;  // the schedule cannot run this shape
        }
        const Planner& planner = *maybe;
        ++planned;
        const Plan plan = planner.plan(planner.lowering({}, {}));
        INFO(s << " p=" << p << " m=" << m);
        const bool serial = verify(plan, {Transport::Serial}).ok();
        // Waiting only removes runs: never accepted where posting is refused.
        if (!verify(plan, {Transport::Rendezvous}).ok()) CHECK_FALSE(under(plan, "megatron").ok());
        // On one stream per rank the wait changes nothing.
        CHECK(under(plan, "deepspeed").ok() == serial);
        CHECK(under(plan, "dualpipe").ok() == serial);
        // Where one stream per rank runs, waiting at each single does too.
        if (serial) CHECK(under(plan, "megatron").ok());
      }
    }
  }
  CHECK(planned >= 40);
}

TEST_CASE("runtime names: a group meeting a single is refused only where groups run apart",
          "[runtime-names]") {
  // Rank 0 posts its two sends as one group; rank 1 receives them alone.
  const Plan plan = from_lines(2, 2, 1, false,
                               {"0F0 0F1 (0SEND_F0;0SEND_F1)BATCH_P2P 0RECV_B0 0RECV_B1 0B0 0B1",
                                "1RECV_F0 1RECV_F1 1F0 1F1 1B0 1B1 1SEND_B0 1SEND_B1"});
  REQUIRE(check_structure(plan).empty());
  for (const char* apart : {"torch", "pipeplan-nccl"}) {
    INFO(apart);
    const VerifyResult r = under(plan, apart);
    REQUIRE(r.diagnostics.size() == 2);
    CHECK(r.diagnostics[0].code == "group-meets-single");
  }
  // Gloo does not coalesce: the group's members go out one by one per pair.
  CHECK(under(plan, "pipeplan-gloo").ok());
  CHECK(under(plan, "megatron-overlap").ok());
  // The bare model keeps its verdict (a group runs apart by default).
  CHECK(verify(plan, {Transport::Rendezvous}).diagnostics[0].code == "group-meets-single");
}

TEST_CASE("runtime names: torch 2.11's one stream per rank hangs a plan torch 2.12+ runs",
          "[runtime-names]") {
  // The case: plan -s interleaved-1f1b -p 3 -m 1 -v 2 --comm 0.5,
  // accepted under rendezvous, deadlocks in a ring on torch 2.11.
  const Planner planner(Problem{"interleaved-1f1b", 3, 1, 2});
  LoweringChoice choice;
  choice.transfer_cost_stated = true;
  CostModel costs;
  costs.comm_latency = 0.5;
  const LowerOptions options = planner.lowering(choice, costs);
  const Plan plan = planner.plan(options);
  REQUIRE(verify(plan, {Transport::Rendezvous}).ok());
  CHECK(under(plan, "torch").ok());
  const VerifyResult old = under(plan, "torch-2.11");
  REQUIRE_FALSE(old.ok());
  // The torch export proves both runtimes unless told which torch loads it.
  try {
    require_torch_runs(plan, torch_target("", ""));
    FAIL("the default torch target proves torch-2.11 too");
  } catch (const PlanRejected& e) {
    CHECK(std::string(e.what()).find("torch's runtime 'torch-2.11'") != std::string::npos);
  }
  CHECK_NOTHROW(require_torch_runs(plan, torch_target("", "torch")));
  CHECK_NOTHROW(require_torch_runs(plan, torch_target("2.12", "")));
  CHECK_THROWS_AS(require_torch_runs(plan, torch_target("2.11", "")), PlanRejected);
  // The fix: lowered serial-safe, it runs on both.
  const RuntimeLowering fixed =
      lower_for_runtimes([&](const LowerOptions& o) { return planner.plan(o); }, options,
                         torch_target("", "").runtimes, true, "the plan");
  CHECK(fixed.serial_safe_for == "torch-2.11");
  CHECK(under(fixed.plan, "torch-2.11").ok());
  CHECK(under(fixed.plan, "torch").ok());
  // Without leave to change the lowering, it is refused with the runtime named.
  try {
    lower_for_runtimes([&](const LowerOptions& o) { return planner.plan(o); }, options,
                       {runtime_named("torch-2.11")}, false, "the plan");
    FAIL("refused");
  } catch (const PlanRejected& e) {
    CHECK(std::string(e.what()).rfind("the plan is not deadlock-free under runtime 'torch-2.11' "
                                      "(serial transport, receives waited before use, groups on "
                                      "a communicator of their own):",
                                      0) == 0);
  }
}

TEST_CASE("runtime names: torch targets from a release, a runtime, both or neither",
          "[runtime-names]") {
  const TorchTarget neither = torch_target("", "");
  CHECK(neither.version == kTorchDefaultVersion);
  REQUIRE(neither.runtimes.size() == 2);
  CHECK(neither.runtimes[0].name == "torch-2.11");
  CHECK(neither.runtimes[1].name == "torch");
  const TorchTarget old = torch_target("2.9", "");
  CHECK(old.version == TorchVersion{2, 9});
  REQUIRE(old.runtimes.size() == 1);
  CHECK(old.runtimes[0].name == "torch-2.11");
  CHECK(torch_target("2.12.1", "").runtimes[0].name == "torch");
  CHECK(torch_target("", "torch-2.11").version == TorchVersion{2, 11});
  CHECK(torch_target("", "torch").version == kTorchDefaultVersion);
  CHECK(torch_target("2.10", "torch-2.11").version == TorchVersion{2, 10});
  CHECK_THROWS_WITH(torch_target("2.10", "torch"),
                    "torch 2.10 runs the 'torch-2.11' runtime, not 'torch': give one of "
                    "--torch-version and --runtime");
  CHECK_THROWS_WITH(torch_target("", "megatron"),
                    "runtime 'megatron': a torch schedule CSV runs on torch's own runtime "
                    "(torch-2.11 or torch)");
}

TEST_CASE("runtime names: the CLI's --runtime", "[runtime-names][cli]") {
  using test::run_cli;
  const test::CliResult list = run_cli({"verify", "--runtime", "list"});
  REQUIRE(list.exit_code == 0);
  for (const Runtime& r : runtimes()) {
    const bool named = list.out.find(std::string(r.name) + " (") != std::string::npos ||
                       list.out.find(std::string(r.name) + ": ") != std::string::npos;
    CHECK(named);
    CHECK(list.out.find(std::string(r.source)) != std::string::npos);
  }
  CHECK(list.out.find("dualpipe (also dualpipev): serial transport") != std::string::npos);

  const std::string ring = test::temp_file("ring.csv",
                                           "0F0,0SEND_F0,3RECV_F0,3F0,3SEND_F0\n"
                                           "1RECV_F0,1F0,4RECV_F0,1SEND_F0,4F0,4SEND_F0\n"
                                           "2RECV_F0,2F0,2SEND_F0,5RECV_F0,5F0\n");
  const std::vector<std::string> shape = {"-m", "1", "--forward-only"};
  auto verify_with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"verify", ring};
    args.insert(args.end(), shape.begin(), shape.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  const test::CliResult torch = verify_with({"--runtime", "torch"});
  INFO(torch.out << torch.err);
  CHECK(torch.exit_code == 0);
  CHECK(torch.out.find("is deadlock-free under runtime torch (rendezvous transport)") !=
        std::string::npos);
  const test::CliResult megatron = verify_with({"--runtime", "megatron"});
  CHECK(megatron.exit_code == 1);
  CHECK(megatron.out.find("FAILED under runtime megatron (rendezvous transport)") !=
        std::string::npos);
  const test::CliResult json = verify_with({"--runtime", "megatron", "-f", "json"});
  CHECK(json.out.find("\"runtime\": \"megatron\"") != std::string::npos);
  const test::CliResult both = verify_with({"--runtime", "torch", "--model", "serial"});
  CHECK(both.exit_code == 2);
  CHECK(both.err.find("--model") != std::string::npos);
  const test::CliResult unknown = verify_with({"--runtime", "nccl"});
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.err.find("unknown runtime 'nccl'") != std::string::npos);

  // plan --runtime torch-2.11 lowers the case serial-safe; writing
  // it as a torch CSV without a runtime proves both torch runtimes.
  const std::vector<std::string> hang = {"plan", "-s", "interleaved-1f1b", "-p", "3", "-m", "1",
                                         "-v",   "2",  "--comm",           "0.5"};
  auto plan_with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = hang;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  const test::CliResult plain = plan_with({"-f", "csv"});
  REQUIRE(plain.exit_code == 0);
  const test::CliResult old = plan_with({"-f", "csv", "--runtime", "torch-2.11"});
  REQUIRE(old.exit_code == 0);
  CHECK(old.out != plain.out);
  CHECK(old.err.find("lowered serial-safe") != std::string::npos);
  const std::string old_csv = test::temp_file("old.csv", old.out);
  CHECK(run_cli({"verify", old_csv, "--runtime", "torch-2.11"}).exit_code == 0);
  const std::string plain_csv = test::temp_file("plain.csv", plain.out);
  CHECK(run_cli({"verify", plain_csv, "--runtime", "torch-2.11"}).exit_code == 1);
  CHECK(run_cli({"convert", plain_csv, "-f", "torch-csv"}).exit_code == 1);
  CHECK(run_cli({"convert", plain_csv, "-f", "torch-csv", "--runtime", "torch"}).exit_code == 0);
  CHECK(run_cli({"convert", plain_csv, "-f", "json", "--runtime", "torch-2.11"}).exit_code == 1);
  CHECK(run_cli({"convert", old_csv, "-f", "torch-csv"}).exit_code == 0);
  const test::CliResult mixed =
      run_cli({"convert", plain_csv, "-f", "torch-csv", "--runtime", "megatron"});
  CHECK(mixed.exit_code == 2);
  CHECK(mixed.err.find("torch-2.11 or torch") != std::string::npos);
}

TEST_CASE("runtime names: a group of one is an explicit wait, in the plan itself",
          "[runtime-names][waits]") {
  // The waited ring, with the wait written in the file: rank 1's
  // (4RECV_F0)BATCH_P2P is committed alone and waited where it stands, so it
  // hangs under every model, as Megatron's one-operation call does.
  const Plan ring = from_lines(3, 1, 2, true,
                               {"0F0 0SEND_F0 3RECV_F0 3F0 3SEND_F0",
                                "1RECV_F0 1F0 (4RECV_F0)BATCH_P2P 1SEND_F0 4F0 4SEND_F0",
                                "2RECV_F0 2F0 2SEND_F0 5RECV_F0 5F0"});
  REQUIRE(check_structure(ring).empty());
  REQUIRE(ring.ranks[1][2].waited);
  CHECK(to_string(ring.ranks[1]) == "1RECV_F0 1F0 (4RECV_F0)BATCH_P2P 1SEND_F0 4F0 4SEND_F0");
  for (const TransportModel& m : kTransportModels) {
    INFO(m.name);
    const VerifyResult r = verify(ring, {m.id});
    REQUIRE_FALSE(r.ok());
    std::string all;
    for (const Diagnostic& d : r.diagnostics) all += d.message + "\n";
    CHECK(all.find("(4RECV_F0)BATCH_P2P") != std::string::npos);
  }
  // Posted before the receive, the send leaves and the wait is harmless.
  const Plan fixed = from_lines(3, 1, 2, true,
                                {"0F0 0SEND_F0 3RECV_F0 3F0 3SEND_F0",
                                 "1RECV_F0 1F0 1SEND_F0 (4RECV_F0)BATCH_P2P 4F0 4SEND_F0",
                                 "2RECV_F0 2F0 2SEND_F0 5RECV_F0 5F0"});
  // (Rank 0's plain 3SEND_F0 meets the commit of one: on NCCL, where groups
  // run apart, they never meet; everywhere else it runs.)
  for (const Runtime& r : runtimes()) {
    INFO(r.name);
    const VerifyResult v = verify(fixed, verify_options(r));
    if (r.rules.groups_apart && r.model == Transport::Rendezvous) {
      REQUIRE(v.diagnostics.size() == 1);
      CHECK(v.diagnostics[0].code == "group-meets-single");
    } else {
      CHECK(v.ok());
    }
  }
  // A commit of one runs on the group's communicator: on NCCL it never meets
  // a plain send on the pair's (torch, pipeplan-nccl); Gloo and one stream
  // per rank meet them.
  const Plan mixed = from_lines(2, 1, 1, true, {"0F0 (0SEND_F0)BATCH_P2P", "1RECV_F0 1F0"});
  CHECK(under(mixed, "torch").diagnostics.at(0).code == "group-meets-single");
  CHECK(under(mixed, "pipeplan-gloo").ok());
  CHECK(under(mixed, "dualpipe").ok());
  const Plan both =
      from_lines(2, 1, 1, true, {"0F0 (0SEND_F0)BATCH_P2P", "(1RECV_F0)BATCH_P2P 1F0"});
  for (const Runtime& r : runtimes()) {
    INFO(r.name);
    CHECK(verify(both, verify_options(r)).ok());
  }
  // The simulator honours it: the hang is a sim-deadlock, the fix runs, and
  // a waited send holds its rank until the receive is posted.
  SimOptions o;
  CHECK_FALSE(simulate(ring, o).ok());
  CHECK(simulate(fixed, o).ok());
  // Refused where it cannot be written: torch's CSV has no groups.
  std::ostringstream out;
  CHECK_THROWS_WITH(write_torch_csv(both, out),
                    Catch::Contains("(0SEND_F0)BATCH_P2P is a batched P2P group"));
}
