// Checking a JSON plan once read (json_plan_events.h): every check in the
// DOM reader's order, the first failure thrown as an InputError.
#include <string>
#include <utility>
#include <vector>

#include "io/json_plan_events.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan::io::json_plan {

Plan PlanEvents::finish(const std::string& source) && {
  auto fail = [&](const std::string& path, const std::string& what) {
    throw InputError(source + ": " + (path.empty() ? "" : path + ": ") + what);
  };
  auto field = [&](TopField f) -> const Value& {
    const Value& v = f == TopField::Ranks ? ranks_ : top_[static_cast<std::size_t>(f)];
    if (!v.present())
      fail("", std::string("missing field '") + kTopFields[static_cast<std::size_t>(f)] + "'");
    return v;
  };
  auto text_field = [&](TopField f, const char* path) -> const std::string& {
    const Value& v = field(f);
    if (v.kind != Value::Kind::String) fail(path, "expected a string, got " + describe(v));
    return v.string;
  };
  auto int_field = [&](TopField f, const char* path, long long min, long long max) {
    const Value& v = field(f);
    if (std::string why = integer_problem(v, min, max); !why.empty()) fail(path, why);
    return as_int(v);
  };

  if (root_.kind != Value::Kind::Object)
    fail("", "expected a JSON object at the top level, got " + describe(root_));
  if (duplicate_) fail("", "duplicate key '" + *duplicate_ + "'");
  if (unknown_) fail("", "unknown field '" + limits::excerpt(*unknown_) + "'");

  const std::string& format = text_field(TopField::Format, "format");
  if (format != kPlanFormatName)
    fail("format", "expected \"" + std::string(kPlanFormatName) + "\", got \"" +
                       limits::excerpt(format) + "\" (not a pipeplan plan)");
  const Value& version = field(TopField::Version);
  if (version.big_integer) fail("version", limits::excerpt(version.string) + " is not supported");
  if (!version.is_integer()) fail("version", "expected an integer, got " + describe(version));
  const bool supported =
      version.kind == Value::Kind::Unsigned
          ? version.unsigned_ == static_cast<unsigned long long>(kPlanFormatVersion)
          : version.integer == kPlanFormatVersion;
  if (!supported)
    fail("version", (version.kind == Value::Kind::Unsigned ? std::to_string(version.unsigned_)
                                                           : std::to_string(version.integer)) +
                        " is not supported (this pipeplan reads version " +
                        std::to_string(kPlanFormatVersion) + ")");

  PlanMeta& meta = plan_.meta;
  meta.schedule = text_field(TopField::Schedule, "schedule");
  if (meta.schedule.empty()) fail("schedule", "must not be empty");
  meta.pp_degree = int_field(TopField::PpDegree, "pp_degree", 1, limits::kMaxRanks);
  meta.num_microbatches =
      int_field(TopField::NumMicrobatches, "num_microbatches", 1, limits::kMaxMicrobatches);
  meta.stages_per_rank =
      int_field(TopField::StagesPerRank, "stages_per_rank", 1, limits::kMaxStagesPerRank);
  if (std::string why =
          limits::shape_problem(meta.pp_degree, meta.stages_per_rank, meta.num_microbatches);
      !why.empty())
    fail("", why);
  const std::string& mapping = text_field(TopField::StageToRank, "stage_to_rank");
  auto parsed_mapping = parse_stage_mapping(mapping);
  if (!parsed_mapping)
    fail("stage_to_rank", "expected \"loop\" or \"v\", got \"" + limits::excerpt(mapping) + "\"");
  meta.mapping = *parsed_mapping;

  const Value& compute_only = field(TopField::ComputeOnly);
  if (compute_only.kind != Value::Kind::Boolean)
    fail("compute_only", "expected true or false, got " + describe(compute_only));

  // Optional; absent means a training plan.
  const Value& forward_only = top_[static_cast<std::size_t>(TopField::ForwardOnly)];
  if (forward_only.present()) {
    if (forward_only.kind != Value::Kind::Boolean)
      fail("forward_only", "expected true or false, got " + describe(forward_only));
    meta.forward_only = forward_only.boolean;
  }

  if (partition_.present()) {
    if (partition_.kind != Value::Kind::Array)
      fail("partition", "expected an array of layer counts, got " + describe(partition_));
    const int stages = meta.num_stages();  // bounded by shape_problem above
    if (partition_items_.size() != static_cast<std::size_t>(stages))
      fail("partition", "holds " + std::to_string(partition_items_.size()) + " layer counts for " +
                            std::to_string(stages) + " stages (pp_degree * stages_per_rank)");
    for (std::size_t s = 0; s < partition_items_.size(); ++s) {
      if (std::string why = integer_problem(partition_items_[s], 1, limits::kMaxLayers);
          !why.empty())
        fail("partition[" + std::to_string(s) + "]", why);
      meta.partition.push_back(as_int(partition_items_[s]));
    }
  }

  // Optional; absent means every microbatch crosses every stage.
  if (routes_.present()) {
    if (routes_.kind != Value::Kind::Array)
      fail("routes", "expected an array of \"first-last\" stage ranges, got " + describe(routes_));
    if (routes_items_.size() != static_cast<std::size_t>(meta.num_microbatches))
      fail("routes", "holds " + std::to_string(routes_items_.size()) + " routes for " +
                         std::to_string(meta.num_microbatches) +
                         " microbatches (one per microbatch)");
    const int stages = meta.num_stages();
    for (std::size_t mb = 0; mb < routes_items_.size(); ++mb) {
      const Value& v = routes_items_[mb];
      const std::string path = "routes[" + std::to_string(mb) + "]";
      if (v.kind != Value::Kind::String)
        fail(path, "expected a string \"first-last\", got " + describe(v));
      const auto route = parse_route(v.string);
      if (!route)
        fail(path, "expected \"first-last\" with first <= last (e.g. \"0-3\"), got \"" +
                       limits::excerpt(v.string) + "\"");
      if (route->last >= stages)
        fail(path, "stage " + std::to_string(route->last) + " is out of range 0.." +
                       std::to_string(stages - 1));
      meta.routes.push_back(*route);
    }
  }

  const Value& ranks = field(TopField::Ranks);
  if (ranks.kind != Value::Kind::Array) fail("ranks", "expected an array, got " + describe(ranks));
  if (entries_ == 0) fail("ranks", "must hold at least one rank");
  if (entries_ > static_cast<std::size_t>(meta.pp_degree))
    fail("ranks",
         std::to_string(entries_) + " entries for pp_degree " + std::to_string(meta.pp_degree));

  // The checks between an entry's "rank" and its "actions", entry by entry up
  // to the first entry that failed one of its own.
  std::vector<long long> listed_at(static_cast<std::size_t>(meta.pp_degree), -1);  // id -> entry
  auto check_id = [&](std::size_t i, int id, int previous) {
    const std::string path = entry_path(i) + ".rank";
    if (id >= meta.pp_degree)
      fail(path, "rank " + std::to_string(id) + " is out of range 0.." +
                     std::to_string(meta.pp_degree - 1));
    if (const long long j = listed_at[static_cast<std::size_t>(id)]; j >= 0)
      fail(path,
           "rank " + std::to_string(id) + " appears twice (also ranks[" + std::to_string(j) + "])");
    listed_at[static_cast<std::size_t>(id)] = static_cast<long long>(i);
    if (previous >= 0 && id < previous)
      fail(path, "rank " + std::to_string(id) + " listed after rank " + std::to_string(previous) +
                     " (ranks are listed in ascending order)");
  };
  for (std::size_t i = 0; i < plan_.rank_ids.size(); ++i)
    check_id(i, plan_.rank_ids[i], i > 0 ? plan_.rank_ids[i - 1] : -1);
  if (bad_) {
    if (bad_->id)
      check_id(bad_->index, *bad_->id, plan_.rank_ids.empty() ? -1 : plan_.rank_ids.back());
    fail(bad_->failure.path, bad_->failure.what);
  }

  // The flag is redundant with the actions; a disagreement means a hand edit
  // went wrong, so say where.
  if (compute_only.boolean) {
    for (std::size_t i = 0; i < plan_.ranks.size(); ++i)
      for (std::size_t k = 0; k < plan_.ranks[i].size(); ++k)
        if (is_comm(plan_.ranks[i][k].type))
          fail("compute_only", "true, but ranks[" + std::to_string(i) + "].actions[" +
                                   std::to_string(k) + "] is " + to_string(plan_.ranks[i][k]));
  } else if (plan_.is_compute_only()) {
    fail("compute_only", "false, but the plan holds no SEND/RECV action");
  }
  return std::move(plan_);
}

}  // namespace pipeplan::io::json_plan
