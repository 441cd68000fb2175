#include "exec/boundary.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

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

std::string message_of(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

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
  const std::int64_t count =
      2LL * 3 * num_stages * static_cast<std::int64_t>(num_microbatches) * kTagsPerBoundary;
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

namespace {

constexpr std::int64_t kAlign = 16;  // any dtype's element size divides it

std::int64_t bytes_of(const ValueSpec& v) {
  if (v.scalar) return 8;
  std::int64_t n = static_cast<std::int64_t>(c10::elementSize(v.dtype));
  for (std::int64_t d : v.shape) n *= d;
  return n;
}

bool lone_tensor(const BoundarySpec& spec) { return spec.size() == 1 && !spec[0].scalar; }

// Byte offset of every value, and the total, in a packed message.
std::vector<std::int64_t> layout(const BoundarySpec& spec, std::int64_t& total) {
  std::vector<std::int64_t> offsets;
  total = 0;
  for (const ValueSpec& v : spec) {
    offsets.push_back(total);
    total += (bytes_of(v) + kAlign - 1) / kAlign * kAlign;
  }
  return offsets;
}

// The bytes of one packed value, viewed as its dtype and shape.
at::Tensor view_of(const at::Tensor& message, std::int64_t offset, const ValueSpec& v) {
  at::Tensor bytes = message.narrow(0, offset, bytes_of(v));
  if (v.scalar) return bytes.view(at::kLong).reshape({});
  return bytes.view(v.dtype).reshape(v.shape);
}

}  // namespace

at::Tensor pack(const Values& values, const BoundarySpec& spec, at::Device device) {
  for (const Value& v : values)
    if (const auto* t = std::get_if<at::Tensor>(&v); t != nullptr && t->device() != device)
      throw InputError("a boundary tensor is on " + t->device().str() +
                       " but the process group moves tensors on " + device.str());
  if (lone_tensor(spec)) return std::get<at::Tensor>(values[0]).detach().contiguous();
  std::int64_t total = 0;
  std::vector<std::int64_t> offsets = layout(spec, total);
  at::Tensor message = at::empty({total}, at::TensorOptions().dtype(at::kByte).device(device));
  for (std::size_t i = 0; i < spec.size(); ++i) {
    at::Tensor dst = view_of(message, offsets[i], spec[i]);
    if (const auto* t = std::get_if<at::Tensor>(&values[i])) dst.copy_(t->detach());
    else dst.fill_(std::get<std::int64_t>(values[i]));
  }
  return message;
}

at::Tensor empty_message(const BoundarySpec& spec, at::Device device) {
  if (lone_tensor(spec))
    return at::empty(spec[0].shape, at::TensorOptions().dtype(spec[0].dtype).device(device));
  std::int64_t total = 0;
  layout(spec, total);
  return at::empty({total}, at::TensorOptions().dtype(at::kByte).device(device));
}

Values unpack(const at::Tensor& message, const BoundarySpec& spec) {
  if (lone_tensor(spec)) return {message};
  std::int64_t total = 0;
  std::vector<std::int64_t> offsets = layout(spec, total);
  Values values;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    at::Tensor v = view_of(message, offsets[i], spec[i]);
    if (spec[i].scalar) values.emplace_back(v.item<std::int64_t>());
    else values.emplace_back(v);
  }
  return values;
}

bool is_differentiable(const Value& v) {
  const auto* t = std::get_if<at::Tensor>(&v);
  return t != nullptr && t->defined() && t->is_floating_point();
}

BoundarySpec gradient_spec(const BoundarySpec& spec) {
  BoundarySpec out;
  for (const ValueSpec& s : spec)
    if (!s.scalar && at::isFloatingType(s.dtype)) out.push_back(s);
  return out;
}

Value slice(const Value& v, int m, std::int64_t rows) {
  if (const auto* t = std::get_if<at::Tensor>(&v)) return t->narrow(0, m * rows, rows);
  return v;
}

std::string join(const std::vector<int>& xs) {
  std::string out;
  for (int x : xs) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
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
  mix(std::to_string(plan.meta.pp_degree) + "/" + std::to_string(plan.meta.num_microbatches) + "/" +
      std::to_string(plan.meta.stages_per_rank) + "/" + std::string(to_string(plan.meta.mapping)));
  for (const auto& actions : plan.ranks) mix(to_string(actions));
  return static_cast<std::int64_t>(h >> 2);
}

}  // namespace detail
}  // namespace pipeplan::exec
