// Every schedule in the table x pp 1..8 x m 1..32 x v 1..4: planned, lowered
// and verified under every model (the default plan, as --serial-safe's help
// promises, and the plan lowered serial-safe), or refused with a ShapeError.
#include <catch2/catch.hpp>

#include "pipeplan/error.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/verify.h"

using namespace pipeplan;

TEST_CASE("sweep: every schedule over the grid is deadlock-free or refused", "[sweep]") {
  for (const auto& info : schedules()) {
    int accepted = 0, refused = 0;
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 32; ++m)
        for (int v = 1; v <= 4; ++v) {
          Problem pr{info.name, p, m, v};
          Plan lowered;
          try {
            lowered = plan(pr);
          } catch (const ShapeError& e) {
            ++refused;
            // A refusal names the schedule, the constraint and a fix.
            INFO(e.what());
            CHECK(std::string(e.what()).rfind(info.name + ": ", 0) == 0);
            CHECK(std::string(e.what()).find("; ") != std::string::npos);
            continue;
          }
          ++accepted;
          INFO(info.name << " p=" << p << " m=" << m << " v=" << v);
          REQUIRE(lowered.meta.stages_per_rank == v);
          REQUIRE(check_structure(plan_compute(pr)).empty());
          // The default plan runs under the serial model too: the seed order
          // (gpipe, 1f1b) and the per-pair orders of the schedules whose ranks
          // talk to their two neighbours only, by themselves; the loop-mapped
          // multi-stage schedules keep one order per rank (registry.cc).
          for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial}) {
            VerifyResult r = verify(lowered, {t});
            INFO(to_string(t) << "\n" << format_diagnostics(r.diagnostics));
            REQUIRE(r.ok());
          }
          // Serial safety asked for (--serial-safe): every schedule's
          // latency-hiding lowering; the seed order has it by itself.
          LowerOptions safe = info.lowering;
          safe.serial_safe = true;
          const Plan serial = info.lowering.mode == LowerMode::Seed ? lowered : plan(pr, safe);
          for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial}) {
            VerifyResult r = verify(serial, {t});
            INFO("serial-safe, " << to_string(t) << "\n" << format_diagnostics(r.diagnostics));
            REQUIRE(r.ok());
          }
        }
    INFO(info.name);
    CHECK(accepted > 0);
    CHECK(accepted + refused == 8 * 32 * 4);
  }
}

TEST_CASE("sweep: v defaults to the schedule's own and a fixed v is enforced", "[sweep]") {
  for (const auto& info : schedules()) {
    PlanMeta meta;
    try {
      meta = resolve(Problem{info.name, 4, 16, 0});
    } catch (const ShapeError&) {
      continue;
    }
    CHECK(meta.stages_per_rank == info.default_stages_per_rank);
    CHECK(meta.mapping == info.mapping);
  }
}

// The batched lowering (--batch-p2p): every schedule over a grid, training
// and inference, planned, lowered and verified under every model; each group
// holds one SEND and one RECV with one peer, and the peer holds their
// partners as one group too.
TEST_CASE("sweep: batched lowering of every schedule verifies under every model", "[sweep]") {
  LoweringChoice batched;
  batched.batch_p2p = true;
  int grouped_plans = 0;
  for (const auto& info : schedules())
    for (bool forward_only : {false, true})
      for (int p = 1; p <= 6; ++p)
        for (int m = 1; m <= 12; ++m)
          for (int v = 1; v <= 3; ++v) {
            Problem pr{info.name, p, m, v};
            pr.forward_only = forward_only;
            Plan lowered;
            try {
              lowered = plan(pr, batched, CostModel{});
            } catch (const ShapeError&) {
              continue;
            }
            INFO(info.name << " p=" << p << " m=" << m << " v=" << v
                           << (forward_only ? " forward-only" : ""));
            for (Transport t : {Transport::Rendezvous, Transport::Serial, Transport::Eager}) {
              VerifyResult r = verify(lowered, {t});
              INFO(to_string(t) << "\n" << format_diagnostics(r.diagnostics));
              REQUIRE(r.ok());
            }
            // Same compute order as the plan without groups.
            CHECK(compute_projection(lowered) == plan_compute(pr));
            bool any = false;
            for (std::size_t r = 0; r < lowered.ranks.size(); ++r) {
              const auto& list = lowered.ranks[r];
              for (std::size_t i = 0; i < list.size(); i += cell_size(list, i)) {
                if (cell_size(list, i) == 1) continue;
                any = true;
                REQUIRE(cell_size(list, i) == 2);
                const Action& x = list[i];
                const Action& y = list[i + 1];
                CHECK(is_send(x.type) != is_send(y.type));
                CHECK(is_comm(x.type));
                CHECK(is_comm(y.type));
              }
            }
            grouped_plans += any ? 1 : 0;
          }
  CHECK(grouped_plans > 100);
}
