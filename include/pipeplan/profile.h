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
/// For variable-length microbatches (docs/lengths.md), `f_quad`, `b_quad`
/// and `w_quad` are the parts of F, B and W that grow with the square of
/// the sequence length (attention's core; 0 <= X_quad <= X, W_quad <=
/// B_quad); the rest grows linearly.
struct Layer {
  std::string name;
  double f = 0.0, b = 0.0, w = 0.0, activation = 0.0;
  std::optional<double> input, recompute;
  double f_quad = 0.0, b_quad = 0.0, w_quad = 0.0;
  double i() const { return b - w; }
  double i_quad() const { return b_quad - w_quad; }
  /// `input`, or `activation` when the profile gives none.
  double input_size() const { return input.value_or(activation); }
  /// `recompute`, or F when the profile gives none.
  double recompute_time() const { return recompute.value_or(f); }
  /// Equal values (an absent optional column equals its default spelled out).
  friend bool operator==(const Layer& x, const Layer& y) {
    return x.name == y.name && x.f == y.f && x.b == y.b && x.w == y.w &&
           x.activation == y.activation && x.input_size() == y.input_size() &&
           x.recompute_time() == y.recompute_time() && x.f_quad == y.f_quad &&
           x.b_quad == y.b_quad && x.w_quad == y.w_quad;
  }
};

/// A model as its layers in pipeline order, and the sequence length (tokens
/// per microbatch) its costs were measured or computed at, when stated.
struct LayerProfile {
  std::vector<Layer> layers;
  std::optional<double> seq_len;
  std::size_t size() const { return layers.size(); }
  /// Whether any layer states a quadratic part.
  bool has_quadratic() const {
    for (const Layer& l : layers)
      if (l.f_quad > 0 || l.b_quad > 0 || l.w_quad > 0) return true;
    return false;
  }
};

/// Parses CSV "name,F,B,W,activation" plus the optional columns "input",
/// "recompute", "F_quad", "B_quad" and "W_quad" in any order after them (the
/// header is required; '#' starts a comment; blank lines are skipped). A
/// comment line "# seq_len: N" before the header states the sequence length
/// the costs are for (LayerProfile::seq_len). Throws InputError
/// "<source>:<line>: ..." naming the bad column. Implemented in src/io
/// (layer_profile.cc).
LayerProfile parse_layer_profile(std::string_view text, const std::string& source = "<layers>");

/// Writes the profile as parse_layer_profile reads it, with the columns
/// "name,F,B,W,activation,input,recompute" (defaults spelled out), then
/// "F_quad,B_quad,W_quad" when a layer has a quadratic part, numbers in the
/// shortest form that reads back exactly; `comment` lines first, each
/// prefixed "# ", then "# seq_len: N" when the profile states it. Throws InputError for a layer name the CSV cannot hold (a
/// comma, '#', a line break, or spaces around it). Implemented in src/emit.
void write_layer_profile(const LayerProfile& profile, std::ostream& out,
                         const std::vector<std::string>& comment = {});

/// Equal layers in order, at the same stated length.
inline bool operator==(const LayerProfile& a, const LayerProfile& b) {
  return a.layers == b.layers && a.seq_len == b.seq_len;
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

/// The cost model of `base` (comm, overlap, host copies, microbatch lengths)
/// with per-stage F, B, I, W, activation sizes and recompute times summed
/// from each stage's layers, as each stage's input its first layer's
/// (Layer::input_size), and each stage's quadratic fractions
/// (CostModel::stage_quadratic) from its layers' quadratic parts.
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
