// The torch runtime table (include/pipeplan/torch_runtime.h) and the torch
// CSV written for one release. Every expectation below was read from
// torch/distributed/pipelining/schedules.py of the release's wheel on PyPI
// (torch-2.6.0 ... torch-2.15.0; 2.15.0 is also the project's pin,
// scripts/oracles.txt); docs/interop.md, "torch versions", has the table.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/torch_runtime.h"
#include "test_util.h"

using namespace pipeplan;

namespace {

std::string torch_csv(const Plan& plan, TorchVersion v) {
  std::ostringstream s;
  write_torch_csv(plan, s, v);
  return s.str();
}

// 1F1B p=2 m=2 as `pipeplan plan -s 1f1b -p 2 -m 2` lowers it.
Plan lowered_1f1b() {
  return parse_plan(
      "0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n",
      "1f1b.csv");
}

}  // namespace

TEST_CASE("torch_runtime: versions parse as MAJOR.MINOR, bad text and old releases refused",
          "[torch_runtime]") {
  CHECK(parse_torch_version("2.11") == TorchVersion{2, 11});
  CHECK(parse_torch_version("2.15.0") == TorchVersion{2, 15});
  CHECK(parse_torch_version("2.15.0+cu132") == TorchVersion{2, 15});  // torch.__version__
  CHECK(parse_torch_version("2.16") == TorchVersion{2, 16});          // newer: the last row
  CHECK(to_string(parse_torch_version("2.6.3")) == "2.6");
  for (const char* bad :
       {"", "2", "2.", "two.11", "2.11.", "2.11.x", "2.11-rc1", " 2.11", "2.-1", "2.+1"})
    CHECK_THROWS_WITH(parse_torch_version(bad),
                      "torch version '" + std::string(bad) +
                          "' is not MAJOR.MINOR[.PATCH] (e.g. 2.11 or 2.15.0)");
  // torch 2.5.0's _ComputationType has BACKWARD ("B", its kind a schedule
  // setting, use_full_backward) and no I.
  CHECK_THROWS_WITH(parse_torch_version("2.5"),
                    "torch 2.5 is older than the oldest runtime pipeplan writes for (2.6): "
                    "before it torch has no I (2.5 reads B as a backward whose kind is a schedule "
                    "setting; 2.4 has no _load_csv)");
  CHECK_THROWS_WITH(parse_torch_version("3.0"),
                    "torch 3.0: pipeplan knows torch 2.x runtimes (2.6 to 2.15)");
}

TEST_CASE("torch_runtime: the table's columns, release by release", "[torch_runtime]") {
  auto row = [](int minor) { return torch_runtime(TorchVersion{2, minor}); };
  // OVERLAP_F_B: torch 2.9.0 _ComputationType (absent in 2.8.0).
  CHECK_FALSE(row(8).overlap_f_b);
  CHECK(row(9).overlap_f_b);
  // UNSHARD/RESHARD: in _ComputationType since 2.5.0, so every row.
  for (int minor = 6; minor <= 16; ++minor) CHECK(row(minor).unshard_reshard);
  // REDUCE_GRAD: torch 2.10.0 _ComputationType.REDUCE_GRAD (absent in 2.9.0).
  CHECK_FALSE(row(9).reduce_grad);
  CHECK(row(10).reduce_grad);
  // WAIT_SEND_F/B and WAIT_REDUCE_GRAD: torch 2.15.0 (absent in 2.14.0).
  CHECK_FALSE(row(14).send_waits);
  CHECK(row(15).send_waits);
  // _batch_p2p: 2.11.0 always dist.batch_isend_irecv; 2.12.0 posts an
  // all-send or all-recv batch as plain isend/irecv.
  CHECK(row(11).transport == Transport::Serial);
  CHECK(row(12).transport == Transport::Rendezvous);
  CHECK(row(6).compile_guard.find("none") == 0);
  CHECK(row(7).compile_guard.find("ScheduleInterleavedZeroBubble") == 0);
  CHECK(row(10).compile_guard.find("_check_torch_compile_compatibility") == 0);
  CHECK(kTorchDefaultVersion == TorchVersion{2, 15});
}

TEST_CASE("torch_runtime: a CSV for torch before 2.15 has no WAIT cells", "[torch_runtime]") {
  const Plan plan = lowered_1f1b();
  CHECK(torch_csv(plan, TorchVersion{2, 11}) ==
        "0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0RECV_B1,0B1\r\n"
        "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\r\n");
  CHECK(torch_csv(plan, TorchVersion{2, 14}) == torch_csv(plan, TorchVersion{2, 11}));
  // The default is 2.15: the waits, exactly as before the table existed.
  std::ostringstream dflt;
  write_torch_csv(plan, dflt);
  CHECK(dflt.str() ==
        "0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1\r\n"
        "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1WAIT_SEND_B0,1WAIT_SEND_B1\r\n");
  CHECK(torch_csv(plan, TorchVersion{2, 15}) == dflt.str());
  const Plan reduced = add_reduce_grad(plan);
  CHECK(torch_csv(reduced, TorchVersion{2, 12}) ==
        "0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0RECV_B1,0B1,0REDUCE_GRAD\r\n"
        "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1REDUCE_GRAD\r\n");
}

TEST_CASE("torch_runtime: actions a release lacks are refused with the first one that has them",
          "[torch_runtime]") {
  const Plan reduced = add_reduce_grad(lowered_1f1b());
  std::ostringstream out;
  CHECK_THROWS_WITH(write_torch_csv(reduced, out, TorchVersion{2, 9}),
                    "torch-csv: torch 2.9's runtime has no REDUCE_GRAD, and the plan holds "
                    "0REDUCE_GRAD (rank 0 index 8); torch has REDUCE_GRAD from 2.10 on");
  CHECK(out.str().empty());
  CHECK_THROWS_AS(require_torch_runs(reduced, TorchVersion{2, 9}), InputError);
  const Plan overlap = parse_plan("0F0,0F1,(0F2;1B0)OVERLAP_F_B,1B1,1B2\n", "overlap.csv");
  CHECK(torch_version_refusal(overlap, TorchVersion{2, 8}) ==
        "torch 2.8's runtime has no OVERLAP_F_B, and the plan holds (0F2;1B0)OVERLAP_F_B (rank 0 "
        "index 2); torch has OVERLAP_F_B from 2.9 on");
  CHECK(torch_version_refusal(overlap, TorchVersion{2, 9}).empty());
}

TEST_CASE("torch_runtime: a plan is proved under its release's transport", "[torch_runtime]") {
  // 1F1B's lowering is serial-safe: every release runs it.
  const Plan plan = lowered_1f1b();
  CHECK_NOTHROW(require_torch_runs(plan, TorchVersion{2, 11}));
  CHECK_NOTHROW(require_torch_runs(plan, TorchVersion{2, 15}));
  // `pipeplan plan -s interleaved-1f1b -p 3 -m 1 -v 2 --comm 0.5`: receives
  // prefetched from two peers; fine on per-pair streams (torch 2.12 on), a
  // cycle on one stream per rank (torch 2.11's batch_isend_irecv).
  const Plan prefetched = parse_plan(
      "3RECV_F0,0F0,0SEND_F0,3F0,3SEND_F0,3RECV_B0,0RECV_B0,3B0,3SEND_B0,0B0\n"
      "1RECV_F0,4RECV_F0,1F0,1SEND_F0,4F0,4SEND_F0,4RECV_B0,1RECV_B0,4B0,4SEND_B0,1B0,1SEND_B0\n"
      "2RECV_F0,5RECV_F0,2F0,2SEND_F0,2RECV_B0,5F0,5B0,5SEND_B0,2B0,2SEND_B0\n",
      "prefetched.csv");
  CHECK_NOTHROW(require_torch_runs(prefetched, TorchVersion{2, 12}));
  try {
    require_torch_runs(prefetched, TorchVersion{2, 11});
    FAIL("not refused");
  } catch (const PlanRejected& e) {
    const std::string what = e.what();
    CHECK(what.rfind("torch 2.11's runtime ('torch-2.11') posts P2P as the serial transport "
                     "model, under which this plan is not deadlock-free:\nerror[stuck] rank 0 "
                     "index 3 (3F0): ",
                     0) == 0);
    CHECK(what.find("waiting chain: rank 0 (at 3F0) -> rank 2 (at 2F0) -> rank 1 (at 1F0) -> "
                    "rank 2 (at 2F0) [cycle]") != std::string::npos);
    CHECK(e.diagnostics().size() == 4);
  }
  // Compute-only plans are lowered by torch itself: not proved here.
  CHECK_NOTHROW(require_torch_runs(parse_plan("0F0,0B0\n1F0,1B0\n", "c.csv"), TorchVersion{2, 6}));
}

TEST_CASE("torch_runtime: split backward warns that torch skips its compile guard",
          "[torch_runtime]") {
  CHECK(torch_compile_guard_warning(lowered_1f1b(), TorchVersion{2, 15}).empty());
  const Plan split = parse_plan("0F0,0I0,0W0\n", "split.csv");
  CHECK(
      torch_compile_guard_warning(split, TorchVersion{2, 11}) ==
      "the plan splits backward (I/W), which torch.compile'd stages do not support; torch 2.11 "
      "does not check it for a schedule loaded with _load_csv (_check_torch_compile_compatibility "
      "in ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble and ScheduleDualPipeV): do not "
      "compile the stages (pytorch#143599, #161904)");
}
