// Internal to src/search: one search() as its phases and the state they
// share (the pool of compute-only candidates, the library's runs and plans,
// and the context: the memory budget, the clock, the evaluation count).
// search.cc runs the phases in order; they live in baselines.cc (the option
// checks, the library baselines, the budget), candidates.cc (list-scheduled
// candidates, partitions refined, W placed anew, local improvement, memory
// decisions) and finalists.cc (lowering, verification, the exact search,
// the winner's figures).
#pragma once

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/memory_policy.h"
#include "pipeplan/planner.h"
#include "pipeplan/search.h"
#include "search/context.h"
#include "search/greedy.h"
#include "search/memory.h"

namespace pipeplan::detail {

struct Config {
  StageMapping mapping;
  int v;
};

// A compute-only plan the list scheduler built, or a library order.
struct Candidate {
  Plan compute;
  double makespan = 0.0;  // compute-only model
  double peak = 0.0;
  std::string origin;
  bool refilled = false;  // its W placed anew (step 3a)
};

// search()'s refusals, before any work (baselines.cc). Returns the v of a
// given partition (0: none given).
int check_options(const LayerProfile& profile, const SearchOptions& o);
std::string library_origin(const std::string& schedule, int v);  // baselines.cc
std::string config_text(const Config& c);                        // candidates.cc
std::vector<GreedyKnobs> all_knobs();                            // candidates.cc
/// all_knobs() and the paced variants only the first pass (step 2) tries.
std::vector<GreedyKnobs> first_pass_knobs();  // candidates.cc

// One search, its phases in run() order. They share the pool of compute-only
// candidates, the library's runs and plans, and the context (context.h).
class Search {
 public:
  Search(const LayerProfile& profile, const SearchOptions& o, int fixed_v);
  SearchResult run();

 private:
  struct Seed {
    Config config;
    Partition partition;
    double makespan;
    bool paced = false;  ///< its list schedule was paced (GreedyKnobs::pace)
  };

  // search.cc: what the phases share.
  bool v_fits(int v) const;
  SimOptions sim_options(const Partition& partition) const;
  detail::StageTable table_of(const Plan& compute) const;
  void sort_pool();
  void offer(Plan plan, double makespan, std::string origin);
  detail::MemoryAllowed allowed() const;
  static MemoryPolicy full_recompute();

  // baselines.cc: 1. the library, the budget.
  void run_library();
  void run_library_one(const ScheduleInfo& info, int v, const MemoryPolicy& memory,
                       std::vector<LibraryRun>& runs, std::vector<Plan>& plans);
  void choose_budget();
  void add_library_orders();

  // candidates.cc: 2.-3c. compute-only candidates.
  std::optional<GreedyOutcome> try_one(const Config& c, const Partition& part, const GreedyKnobs& k,
                                       double limit);
  std::vector<Config> configs() const;
  void list_schedule();
  std::vector<Partition> partitions_for(const Config& c) const;
  void list_schedule_one(const Config& c, const Partition& part);
  void refine_partitions();
  void climb(const Seed& seed);
  void refill_weights();
  void improve_locally();
  void decide_memory();
  void require_candidates();

  // finalists.cc: 4.-7. lowered, verified, the exact search, the figures.
  void lower_finalists();
  void keep_best_library();
  void refine_library_partitions();
  void solve_exactly();
  void finish();

  const LayerProfile& profile_;
  const SearchOptions& o_;
  const int fixed_v_;
  SearchContext ctx_;
  const std::function<bool()> expired_ = [this] { return ctx_.expired(); };
  const std::vector<GreedyKnobs> knobs_ = all_knobs();               // step 3
  const std::vector<GreedyKnobs> first_knobs_ = first_pass_knobs();  // step 2
  SearchResult res_;
  std::vector<Plan> library_plans_;    // with res_.library, index for index
  std::vector<Plan> recompute_plans_;  // with res_.library_recompute
  std::vector<Candidate> pool_;
  std::vector<Seed> seeds_;
  double smallest_peak_ = std::numeric_limits<double>::infinity();
  bool found_ = false;
};

}  // namespace pipeplan::detail
