// Executor internals: boundary specs on the wire, message tags, microbatch
// slicing. Not installed; only src/exec includes it.
#pragma once

#include <ATen/core/Tensor.h>

#include <exception>
#include <string>

#include "pipeplan/exec/executor.h"

namespace pipeplan::exec::detail {

/// What a message carries; part of its tag so Gloo matches by payload.
enum class Dir : int { Forward = 0, Backward = 1, Shape = 2 };

inline constexpr int kMaxValues = 32;  ///< values per boundary
inline constexpr int kMaxDims = 8;     ///< dims per boundary tensor
inline constexpr int kMetaSlotsPerValue = 3 + kMaxDims;
inline constexpr int kMetaLength = 1 + kMaxValues * kMetaSlotsPerValue;

/// Spec of concrete values; throws InputError past kMaxValues/kMaxDims.
BoundarySpec spec_of(const Values& values, int stage);
/// Fixed-length int64 tensor describing `spec` (so the receiver can post it
/// before knowing anything).
at::Tensor encode_spec(const BoundarySpec& spec, at::Device device);
/// Inverse of encode_spec; throws CommError on a malformed message.
BoundarySpec decode_spec(const at::Tensor& meta);

/// Tags per (dir, stage, microbatch): the payload (0) and, for shapes, the meta (1).
inline constexpr int kTagsPerBoundary = 2;
/// Tag of message `index` from `stage` about `microbatch`. The step parity
/// keeps consecutive steps apart. Precondition: tag_space_ok().
int make_tag(int step, Dir dir, int stage, int microbatch, int index, int num_stages,
             int num_microbatches);
/// Whether every tag of this plan shape fits in a non-negative int.
bool tag_space_ok(int num_stages, int num_microbatches);

/// One message per boundary: a lone tensor travels as itself (no copy);
/// anything else is packed into one byte buffer, each value at an aligned
/// offset (ints as int64). Throws InputError for a tensor off `device`.
at::Tensor pack(const Values& values, const BoundarySpec& spec, at::Device device);
/// A buffer to receive pack(values, spec) into.
at::Tensor empty_message(const BoundarySpec& spec, at::Device device);
/// The values of a received message (views into it; ints as int64_t).
Values unpack(const at::Tensor& message, const BoundarySpec& spec);
/// The differentiable entries of a spec: what the gradient message carries.
BoundarySpec gradient_spec(const BoundarySpec& spec);

/// Whether a value is differentiable across the boundary (floating tensor).
bool is_differentiable(const Value& v);

/// Microbatch `m` of size `rows` of a user value: tensors narrowed along
/// dim 0, scalars unchanged.
Value slice(const Value& v, int m, std::int64_t rows);

/// An exception's message; a c10::Error's without its C++ backtrace.
std::string message_of(const std::exception& e);

/// "0, 2, 5".
std::string join(const std::vector<int>& xs);

/// FNV-1a over the plan text (all ranks) and shape, as a non-negative int64.
std::int64_t fingerprint(const Plan& plan);

}  // namespace pipeplan::exec::detail
