// Layer cost profiles: what one microbatch of each model layer costs, and
// how a contiguous split of the layers into stages turns them into stage
// costs and activation sizes for the simulator.
#pragma once

#include <optional>
#include <ostream>
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
/// Optional, for memory planning: `input` is the size of the layer's input
/// (what a recomputing stage keeps; default: `activation`) and `recompute`
/// the time to re-run its forward (default: F).
struct Layer {
  std::string name;
  double f = 0.0, b = 0.0, w = 0.0, activation = 0.0;
  std::optional<double> input, recompute;
  double i() const { return b - w; }
  /// `input`, or `activation` when the profile gives none.
  double input_size() const { return input.value_or(activation); }
  /// `recompute`, or F when the profile gives none.
  double recompute_time() const { return recompute.value_or(f); }
  /// Equal values (an absent optional column equals its default spelled out).
  friend bool operator==(const Layer& x, const Layer& y) {
    return x.name == y.name && x.f == y.f && x.b == y.b && x.w == y.w &&
           x.activation == y.activation && x.input_size() == y.input_size() &&
           x.recompute_time() == y.recompute_time();
  }
};

/// A model as its layers in pipeline order.
struct LayerProfile {
  std::vector<Layer> layers;
  std::size_t size() const { return layers.size(); }
};

/// Parses CSV "name,F,B,W,activation" plus the optional columns "input" and
/// "recompute" in either order after them (the header is required; '#'
/// starts a comment; blank lines are skipped). Throws InputError
/// "<source>:<line>: ..." naming the bad column. Implemented in src/io
/// (layer_profile.cc).
LayerProfile parse_layer_profile(std::string_view text, const std::string& source = "<layers>");

/// Writes the profile as parse_layer_profile reads it, with the columns
/// "name,F,B,W,activation,input,recompute" (defaults spelled out), numbers in
/// the shortest form that reads back exactly; `comment` lines first, each
/// prefixed "# ". Throws InputError for a layer name the CSV cannot hold (a
/// comma, '#', a line break, or spaces around it). Implemented in src/emit.
void write_layer_profile(const LayerProfile& profile, std::ostream& out,
                         const std::vector<std::string>& comment = {});

/// Equal layers in order.
inline bool operator==(const LayerProfile& a, const LayerProfile& b) {
  return a.layers == b.layers;
}

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

/// The cost model of `base` (comm, overlap, host copies) with per-stage F,
/// B, I, W, activation sizes and recompute times summed from each stage's
/// layers, and as each stage's input its first layer's (Layer::input_size).
CostModel stage_costs(const LayerProfile& profile, const Partition& partition,
                      const CostModel& base = {});

/// The partition a plan records (meta.partition), else the balanced one.
Partition partition_for(const LayerProfile& profile, const PlanMeta& meta);

/// The stages of a calibrated stage-costs file (absolute durations, as
/// `pipeplan calibrate` writes them) as a profile of one layer per stage, for
/// a search whose partition is fixed to one layer per stage: layer s is
/// named "stage<s>", F and B are the stage's measured F and B, W its share
/// of B in the measured ratio W / (I + W) (a profile's I is B - W), and its
/// activation is 1 (the file holds no memory: budgets then count
/// (stage, microbatch) activations). Throws InputError for a file of
/// multipliers, or one whose stages are not 0..n-1 (names the first gap).
LayerProfile stage_cost_profile(const StageCosts& file, const std::string& source);

}  // namespace pipeplan
