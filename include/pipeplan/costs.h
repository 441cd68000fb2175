// The simulator's cost model: how long each action and each transfer takes.
// Reading a cost spec or a stage-costs file lives in io.h.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/ir.h"

namespace pipeplan {

/// Per-stage multipliers of the action-type costs (1 = the base cost).
struct StageScale {
  double f = 1.0, b = 1.0, i = 1.0, w = 1.0;
  friend bool operator==(const StageScale& a, const StageScale& b) {
    return a.f == b.f && a.b == b.b && a.i == b.i && a.w == b.w;
  }
};

/// Durations of compute actions and transfers, in one abstract time unit.
struct CostModel {
  double f = 1.0, b = 2.0, i = 1.0, w = 1.0;
  /// OVERLAP_F_B duration; unset means F(fwd stage) + B(bwd stage).
  std::optional<double> overlap;
  /// Stage -> multipliers; stages not listed use 1.
  std::map<int, StageScale> stage_scales;
  /// Stage -> the compute types a calibration could not measure ("B,I,W"):
  /// simulate() refuses a plan that runs one, never costing it as 0.
  std::map<int, std::string> unmeasured;
  double comm_latency = 0.0;
  double comm_bandwidth = 0.0;  ///< bytes per time unit; 0 = infinite
  double transfer_bytes = 0.0;  ///< size of every transfer
  /// Activation size of one microbatch of each stage (a layer profile's
  /// unit); empty: every stage holds 1.
  std::vector<double> stage_memory;
  /// Memory actions (docs/memory.md). What a stage keeps of one microbatch
  /// when it recomputes (its first layer's input; empty: its activation)
  /// and how long its RECOMPUTE takes (empty: its F).
  std::vector<double> stage_input, stage_recompute;
  /// The copy stream: an OFFLOAD or RELOAD of size X (activation units)
  /// takes host_latency + X / host_bandwidth; host_bandwidth 0 = infinite.
  double host_bandwidth = 0.0, host_latency = 0.0;
  /// Variable-length microbatches (docs/lengths.md): the tokens of each
  /// microbatch, in microbatch order, and the length the costs above are
  /// stated at (0: the longest microbatch's). Set with set_lengths().
  std::vector<double> microbatch_tokens;
  double stated_tokens = 0.0;
  /// Derived by set_lengths(): microbatch -> its tokens over the stated
  /// length (r, what linear parts grow by), and the sum over its sequences
  /// of their squared ratios (what quadratic parts grow by: r^2 for a
  /// microbatch of one sequence, less for one packed of several). Empty (or
  /// a microbatch past its end): at the stated length.
  std::vector<double> length_ratio, square_ratio;
  /// Microbatches packed of several sequences (set_sequences): each one's
  /// sequence lengths; empty when each microbatch is one sequence.
  std::vector<std::vector<double>> microbatch_sequences;
  /// Stage -> the fractions of its F, B, I and W that grow with the square
  /// of the length (attention); the rest, activations and transfers grow
  /// linearly. Stages not listed grow linearly.
  std::map<int, StageScale> stage_quadratic;

  /// Tokens of microbatch `mb` over the stated length (1 without lengths).
  double ratio(int mb) const {
    return mb >= 0 && static_cast<std::size_t>(mb) < length_ratio.size()
               ? length_ratio[static_cast<std::size_t>(mb)]
               : 1.0;
  }
  /// What quadratic parts of microbatch `mb` grow by (1 without lengths).
  double square(int mb) const {
    return mb >= 0 && static_cast<std::size_t>(mb) < square_ratio.size()
               ? square_ratio[static_cast<std::size_t>(mb)]
               : 1.0;
  }
  /// Activation size of one microbatch of `stage`.
  double memory(int stage) const {
    return stage_memory.empty() ? 1.0 : stage_memory[static_cast<std::size_t>(stage)];
  }
  /// What `stage` keeps of one microbatch for a RECOMPUTE.
  double input(int stage) const {
    return stage_input.empty() ? memory(stage) : stage_input[static_cast<std::size_t>(stage)];
  }
  /// Activation size of microbatch `mb` of `stage` (per token).
  double memory(int stage, int mb) const { return memory(stage) * ratio(mb); }
  /// What `stage` keeps of microbatch `mb` for a RECOMPUTE.
  double input(int stage, int mb) const { return input(stage) * ratio(mb); }
  /// How long an OFFLOAD or RELOAD of `size` takes on the copy stream.
  double copy_time(double size) const {
    return host_latency + (host_bandwidth > 0 ? size / host_bandwidth : 0.0);
  }

  /// Duration of a compute action, RECOMPUTE included (0 for SEND/RECV,
  /// copies and pass-through types: copies take copy_time()), for the
  /// length of its microbatch.
  double duration(const Action& a) const;
  /// latency + bytes / bandwidth (just latency when either is 0).
  double transfer_time() const;
  /// transfer_time() of a value of microbatch `mb`: its bytes grow with
  /// its tokens.
  double transfer_time(int mb) const;
  /// Whether microbatches differ in length (length_ratio not all 1).
  bool variable_lengths() const;
  /// Sets the microbatches' tokens and the stated length (0: the longest)
  /// and derives length_ratio. Throws InputError for a length that is not
  /// a positive finite number.
  void set_lengths(std::vector<double> tokens, double stated = 0.0);
  /// Microbatches packed of sequences: microbatch k holds sequences of
  /// `sequences[k]` tokens; its tokens are their sum and its quadratic parts
  /// grow by the sum of their squared ratios (attention stays within a
  /// sequence). `stated` as in set_lengths(); 0: the longest microbatch.
  void set_sequences(std::vector<std::vector<double>> sequences, double stated = 0.0);
  /// The same microbatches (and packing) stated at `stated` tokens instead.
  void restate_lengths(double stated);
  /// Takes `other`'s microbatch lengths (all the fields above).
  void take_lengths(const CostModel& other);
  /// Throws InputError unless no lengths are set or one per microbatch.
  void check_lengths(int num_microbatches) const;
};

/// A stage-costs file as read (io.h: read_stage_costs). One written by
/// `pipeplan calibrate` holds absolute durations ("absolute": true, in
/// `time_unit`), the stage layout they were measured on and the measured
/// transfer cost.
struct StageCosts {
  std::map<int, StageScale> stages;
  bool absolute = false;
  std::string time_unit;                  ///< "ms" for calibrated files
  int stages_per_rank = 0;                ///< layout measured on (0: not stated)
  std::map<int, std::string> unmeasured;  ///< stage -> types not measured ("B,I,W")
  std::optional<double> comm_latency, comm_bandwidth, transfer_bytes;
};

/// The cost model of a stage-costs file on its own: for an absolute file,
/// base costs F = B = I = W = 1 (so each stage's values are its durations)
/// and the file's transfer cost; else the defaults with its multipliers.
CostModel cost_model_of(const StageCosts& file);

}  // namespace pipeplan
