// Layer cost profiles: what one microbatch of each model layer costs, and
// how a contiguous split of the layers into stages turns them into stage
// costs and activation sizes for the simulator.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/costs.h"
#include "pipeplan/ir.h"

namespace pipeplan {

/// One layer, for one microbatch. B is the whole backward; W is its
/// weight-gradient part (0 <= W <= B), so the input-gradient part is B - W.
/// `activation` is what the layer keeps alive from its F until its backward
/// finishes (B, or W when the backward is split), in the user's unit.
struct Layer {
  std::string name;
  double f = 0.0, b = 0.0, w = 0.0, activation = 0.0;
  double i() const { return b - w; }
  friend bool operator==(const Layer& x, const Layer& y) {
    return x.name == y.name && x.f == y.f && x.b == y.b && x.w == y.w &&
           x.activation == y.activation;
  }
};

/// A model as its layers in pipeline order.
struct LayerProfile {
  std::vector<Layer> layers;
  std::size_t size() const { return layers.size(); }
};

/// Parses CSV "name,F,B,W,activation" (the header is required; '#' starts a
/// comment; blank lines are skipped). Throws InputError "<source>:<line>: ..."
/// naming the bad column. Implemented in src/io (layer_profile.cc).
LayerProfile parse_layer_profile(std::string_view text, const std::string& source = "<layers>");

/// A contiguous split: counts[s] layers go to stage s (every count >= 1).
using Partition = std::vector<int>;

/// F + B of layers [begin, end): the work a stage of them does per microbatch.
double layer_work(const LayerProfile& profile, int begin, int end);

/// The contiguous split of the layers into `num_stages` stages that
/// minimises the most expensive stage (F + B); among those, the most even
/// one (least sum of squared stage costs). Throws ShapeError when there are
/// fewer layers than stages.
Partition balanced_partition(const LayerProfile& profile, int num_stages);

/// Throws InputError when `partition` does not split the profile into
/// `num_stages` non-empty stages (names what is wrong).
void check_partition(const LayerProfile& profile, const Partition& partition, int num_stages);

/// The cost model of `base` (comm, overlap) with per-stage F, B, I, W and
/// activation sizes summed from each stage's layers.
CostModel stage_costs(const LayerProfile& profile, const Partition& partition,
                      const CostModel& base = {});

/// The partition a plan records (meta.partition), else the balanced one.
Partition partition_for(const LayerProfile& profile, const PlanMeta& meta);

}  // namespace pipeplan
