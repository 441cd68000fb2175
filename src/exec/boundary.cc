#include "exec/boundary.h"

#include <ATen/ATen.h>

#include <limits>
#include <sstream>

#include "pipeplan/error.h"

namespace pipeplan::exec {

std::string to_string(const BoundarySpec& spec) {
  std::ostringstream out;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    if (i) out << ", ";
    if (spec[i].scalar) {
      out << "int";
      continue;
    }
    out << c10::toString(spec[i].dtype) << "[";
    for (std::size_t d = 0; d < spec[i].shape.size(); ++d)
      out << (d ? ", " : "") << spec[i].shape[d];
    out << "]";
  }
  return out.str();
}

namespace detail {

BoundarySpec spec_of(const Values& values, int stage) {
  if (values.size() > static_cast<std::size_t>(kMaxValues))
    throw InputError("stage " + std::to_string(stage) + " returned " +
                     std::to_string(values.size()) + " values; at most " +
                     std::to_string(kMaxValues) + " can cross a stage boundary");
  BoundarySpec spec;
  for (const Value& v : values) {
    ValueSpec s;
    if (const auto* t = std::get_if<at::Tensor>(&v)) {
      if (!t->defined())
        throw InputError("stage " + std::to_string(stage) + " returned an undefined tensor");
      if (t->dim() > kMaxDims)
        throw InputError("stage " + std::to_string(stage) + " returned a " +
                         std::to_string(t->dim()) + "-d tensor; at most " +
                         std::to_string(kMaxDims) + " dims can cross a stage boundary");
      s.dtype = t->scalar_type();
      s.shape = t->sizes().vec();
    } else {
      s.scalar = true;
      s.dtype = at::kLong;
    }
    spec.push_back(std::move(s));
  }
  return spec;
}

at::Tensor encode_spec(const BoundarySpec& spec, at::Device device) {
  std::vector<std::int64_t> words(kMetaLength, 0);
  words[0] = static_cast<std::int64_t>(spec.size());
  for (std::size_t i = 0; i < spec.size(); ++i) {
    std::int64_t* w = &words[1 + i * kMetaSlotsPerValue];
    w[0] = spec[i].scalar ? 1 : 0;
    w[1] = static_cast<std::int64_t>(spec[i].dtype);
    w[2] = static_cast<std::int64_t>(spec[i].shape.size());
    for (std::size_t d = 0; d < spec[i].shape.size(); ++d) w[3 + d] = spec[i].shape[d];
  }
  return at::tensor(words, at::TensorOptions().dtype(at::kLong)).to(device);
}

BoundarySpec decode_spec(const at::Tensor& meta) {
  at::Tensor cpu = meta.to(at::kCPU).contiguous();
  const std::int64_t* w = cpu.data_ptr<std::int64_t>();
  auto bad = [](const std::string& why) {
    return CommError("malformed boundary description from a peer: " + why);
  };
  if (cpu.numel() != kMetaLength) throw bad("wrong length");
  if (w[0] < 0 || w[0] > kMaxValues) throw bad("value count " + std::to_string(w[0]));
  BoundarySpec spec;
  for (std::int64_t i = 0; i < w[0]; ++i) {
    const std::int64_t* v = &w[1 + i * kMetaSlotsPerValue];
    ValueSpec s;
    s.scalar = v[0] == 1;
    if (v[1] < 0 || v[1] >= static_cast<std::int64_t>(at::ScalarType::NumOptions))
      throw bad("dtype " + std::to_string(v[1]));
    s.dtype = static_cast<at::ScalarType>(v[1]);
    if (v[2] < 0 || v[2] > kMaxDims) throw bad("rank " + std::to_string(v[2]));
    for (std::int64_t d = 0; d < v[2]; ++d) {
      if (v[3 + d] < 0) throw bad("negative dimension");
      s.shape.push_back(v[3 + d]);
    }
    spec.push_back(std::move(s));
  }
  return spec;
}

bool tag_space_ok(int num_stages, int num_microbatches) {
  const std::int64_t count = 2LL * 3 * num_stages * static_cast<std::int64_t>(num_microbatches) *
                             kTagsPerBoundary;
  return count < std::numeric_limits<int>::max();
}

int make_tag(int step, Dir dir, int stage, int microbatch, int index, int num_stages,
             int num_microbatches) {
  std::int64_t t = (step & 1) * 3 + static_cast<int>(dir);
  t = t * num_stages + stage;
  t = t * num_microbatches + microbatch;
  t = t * kTagsPerBoundary + index;
  return static_cast<int>(t);
}

at::Tensor empty_for(const ValueSpec& spec, at::Device device) {
  if (spec.scalar) return at::empty({}, at::TensorOptions().dtype(at::kLong).device(device));
  return at::empty(spec.shape, at::TensorOptions().dtype(spec.dtype).device(device));
}

at::Tensor to_wire(const Value& v, at::Device device) {
  if (const auto* t = std::get_if<at::Tensor>(&v)) return t->detach().contiguous();
  return at::full({}, std::get<std::int64_t>(v), at::TensorOptions().dtype(at::kLong).device(device));
}

Value from_wire(const at::Tensor& t, const ValueSpec& spec) {
  if (spec.scalar) return t.item<std::int64_t>();
  return t;
}

bool is_differentiable(const Value& v) {
  const auto* t = std::get_if<at::Tensor>(&v);
  return t != nullptr && t->defined() && t->is_floating_point();
}

int num_differentiable(const BoundarySpec& spec) {
  int n = 0;
  for (const ValueSpec& s : spec) n += !s.scalar && at::isFloatingType(s.dtype);
  return n;
}

Value slice(const Value& v, int m, std::int64_t rows) {
  if (const auto* t = std::get_if<at::Tensor>(&v)) return t->narrow(0, m * rows, rows);
  return v;
}

std::int64_t fingerprint(const Plan& plan) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    h ^= 0xff;
    h *= 1099511628211ULL;
  };
  mix(std::to_string(plan.meta.pp_degree) + "/" + std::to_string(plan.meta.num_microbatches) +
      "/" + std::to_string(plan.meta.stages_per_rank) + "/" +
      std::string(to_string(plan.meta.mapping)));
  for (const auto& actions : plan.ranks) mix(to_string(actions));
  return static_cast<std::int64_t>(h >> 2);
}

}  // namespace detail
}  // namespace pipeplan::exec
