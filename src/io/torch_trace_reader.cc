// parse_torch_trace: the events of a torch.profiler (kineto) Chrome trace
// that the import uses, streamed through nlohmann's SAX interface (no DOM:
// memory follows the kept events, time the file; no recursion).
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "io/json_strict.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = limits::kMaxJsonDepth;
constexpr double kMaxUs = 1e17;  // |ts| and dur in microseconds (year ~5000)

using io::KeySet;

// Element size of a torch dtype name as kineto writes it in NCCL args.
std::int64_t dtype_size(const std::string& d) {
  if (d == "Float" || d == "Int" || d == "float32" || d == "int32") return 4;
  if (d == "BFloat16" || d == "Half" || d == "Short" || d == "bfloat16" || d == "float16") return 2;
  if (d == "Double" || d == "Long" || d == "float64" || d == "int64") return 8;
  if (d == "Byte" || d == "Char" || d == "Bool" || d.rfind("Float8", 0) == 0) return 1;
  return -1;
}

bool contains_nccl(const std::string& name) {
  for (std::size_t i = 0; i + 4 <= name.size(); ++i) {
    bool match = true;
    for (std::size_t k = 0; k < 4 && match; ++k) match = (name[i + k] | 0x20) == "nccl"[k];
    if (match) return true;
  }
  return false;
}

enum class Field : std::uint8_t {
  None,
  Ph,
  Cat,
  Name,
  Ts,
  Dur,
  Pid,
  Tid,
  Id,
  Args,  // event
  Correlation,
  InElems,
  OutElems,
  Dtype,  // event args
  TraceEvents,
  DistributedInfo,
  BaseTime,
  Rank,  // top level
};

// One value: a number (finite double + exact integer when it is one) or a string.
struct Scalar {
  bool is_number = false, is_integer = false, is_string = false;
  double number = 0;
  std::int64_t integer = 0;
  std::string text;
};

class Events : public json::json_sax_t {
 public:
  explicit Events(TorchRankTrace& out) : out_(out) {}

  bool null() override { return scalar_done(); }
  bool boolean(bool) override { return scalar_done(); }
  bool number_integer(number_integer_t v) override {
    value_ = {true, true, false, static_cast<double>(v), v, {}};
    return scalar_done();
  }
  bool number_unsigned(number_unsigned_t v) override {
    const bool fits = v <= static_cast<number_unsigned_t>(INT64_MAX);
    value_ = {true, fits, false, static_cast<double>(v), fits ? static_cast<std::int64_t>(v) : 0,
              {}};
    return scalar_done();
  }
  bool number_float(number_float_t v, const string_t&) override {
    value_ = {std::isfinite(v), false, false, v, 0, {}};
    return scalar_done();
  }
  bool string(string_t& s) override {
    value_ = {false, false, true, 0, 0, std::move(s)};
    return scalar_done();
  }
  bool binary(binary_t&) override { return scalar_done(); }

  bool start_object(std::size_t) override {
    const Field via = take_field();
    if (!open()) return false;
    keys_at(depth_).clear();
    if (in_events() && depth_ == 3) begin_event();
    if (in_events() && depth_ == 4 && via == Field::Args) args_open_ = true;
    if (!in_events() && depth_ == 2 && via == Field::DistributedInfo) dist_open_ = true;
    return true;
  }
  bool end_object() override {
    if (in_events() && depth_ == 4) args_open_ = false;
    if (depth_ == 2) dist_open_ = false;
    if (in_events() && depth_ == 3 && !end_event()) return false;
    return close();
  }
  bool start_array(std::size_t) override {
    const Field via = take_field();
    if (!open()) return false;
    if (depth_ == 2 && via == Field::TraceEvents) events_array_ = true;
    return true;
  }
  bool end_array() override {
    if (depth_ == 2 && events_array_) events_array_ = false, seen_events_ = true;
    return close();
  }
  bool key(string_t& k) override {
    if (!keys_at(depth_).insert(k)) {
      error_ = where() + "duplicate key '" + limits::excerpt(k) + "'";
      return false;
    }
    field_at_[static_cast<std::size_t>(depth_)] = classify(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    if (auto close = what.find("] ");
        what.rfind("[json.exception", 0) == 0 && close != std::string::npos)
      what = what.substr(close + 2);
    if (auto last = what.find("; last read: '"); last != std::string::npos)
      what = what.substr(0, last);
    error_ = "not valid JSON: " + what;
    return false;
  }

  const std::string& error() const { return error_; }
  bool saw_events() const { return seen_events_; }

 private:
  bool in_events() const { return events_array_; }
  std::string where() const {
    return in_events() ? "traceEvents[" + std::to_string(event_index_) + "]: " : std::string();
  }

  bool open() {
    if (++depth_ > kMaxDepth) {
      error_ = where() + io::too_deep_text();
      return false;
    }
    field_at_[static_cast<std::size_t>(depth_)] = Field::None;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  // The key that led into the container opening now (consumed).
  Field take_field() {
    const Field f = field_at_[static_cast<std::size_t>(depth_)];
    field_at_[static_cast<std::size_t>(depth_)] = Field::None;
    return f;
  }
  KeySet& keys_at(int depth) {
    if (keys_.size() < static_cast<std::size_t>(depth))
      keys_.resize(static_cast<std::size_t>(depth));
    return keys_[static_cast<std::size_t>(depth - 1)];
  }

  // The meaning of key `k` in the object open at the current depth.
  Field classify(const std::string& k) const {
    if (depth_ == 1) {
      if (k == "traceEvents") return Field::TraceEvents;
      if (k == "distributedInfo") return Field::DistributedInfo;
      if (k == "baseTimeNanoseconds") return Field::BaseTime;
      return Field::None;
    }
    if (depth_ == 2 && dist_open_) return k == "rank" ? Field::Rank : Field::None;
    if (in_events() && depth_ == 3) {
      static const std::pair<const char*, Field> names[] = {
          {"ph", Field::Ph},   {"cat", Field::Cat}, {"name", Field::Name},
          {"ts", Field::Ts},   {"dur", Field::Dur}, {"pid", Field::Pid},
          {"tid", Field::Tid}, {"id", Field::Id},   {"args", Field::Args}};
      for (const auto& [n, f] : names)
        if (k == n) return f;
      return Field::None;
    }
    if (in_events() && depth_ == 4 && args_open_) {
      if (k == "correlation") return Field::Correlation;
      if (k == "In msg nelems") return Field::InElems;
      if (k == "Out msg nelems") return Field::OutElems;
      if (k == "dtype") return Field::Dtype;
    }
    return Field::None;
  }

  // A scalar value ended: store it when its key is one we read.
  bool scalar_done() {
    const Field f = take_field();
    if (f == Field::None) return true;
    if (depth_ == 1) {
      // Non-negative only: offsets between files are then differences that fit.
      if (f == Field::BaseTime && value_.is_integer && value_.integer >= 0)
        out_.base_time_ns = value_.integer;
      return true;
    }
    if (depth_ == 2 && f == Field::Rank) {
      if (value_.is_integer && value_.integer >= 0 && value_.integer < limits::kMaxRanks)
        out_.rank = static_cast<int>(value_.integer);
      return true;
    }
    if (!in_events()) return true;
    switch (f) {
      case Field::Ph: ev_.ph = value_.text; break;
      case Field::Cat: ev_.cat = value_.text; break;
      case Field::Name: ev_.name = std::move(value_.text); break;
      case Field::Ts: ev_.ts = value_; break;
      case Field::Dur: ev_.dur = value_; break;
      case Field::Pid: ev_.pid = id_of(value_); break;
      case Field::Tid: ev_.tid = id_of(value_); break;
      case Field::Id:
        ev_.id = value_.is_integer ? value_.integer : static_cast<std::int64_t>(id_of(value_) >> 1);
        break;
      case Field::Correlation:
        if (value_.is_integer) ev_.correlation = value_.integer;
        break;
      case Field::InElems:
        if (value_.is_integer) ev_.in_elems = value_.integer;
        break;
      case Field::OutElems:
        if (value_.is_integer) ev_.out_elems = value_.integer;
        break;
      case Field::Dtype: ev_.dtype = value_.text; break;
      default: break;
    }
    return true;
  }

  static std::uint64_t id_of(const Scalar& v) {
    if (v.is_integer) return static_cast<std::uint64_t>(v.integer);
    if (v.is_string) return std::hash<std::string>{}(v.text) | (std::uint64_t{1} << 63);
    // A whole number in range is that id; any other number (a fraction, a
    // negative or huge value, which no cast may take) an id of its bits.
    if (v.number >= 0 && v.number < 9.2e18 && v.number == std::floor(v.number))
      return static_cast<std::uint64_t>(v.number);
    return std::hash<double>{}(v.number) | (std::uint64_t{1} << 63);
  }

  struct Raw {
    std::string ph, cat, name, dtype;
    Scalar ts, dur;
    std::uint64_t pid = 0, tid = 0;
    std::int64_t id = -1, correlation = -1, in_elems = -1, out_elems = -1;
  };

  void begin_event() {
    ev_.ph.clear(), ev_.cat.clear(), ev_.name.clear(), ev_.dtype.clear();
    ev_.ts = {}, ev_.dur = {};
    ev_.pid = ev_.tid = 0;
    ev_.id = ev_.correlation = ev_.in_elems = ev_.out_elems = -1;
  }

  // Which kind of kept event the raw one is, if any.
  bool kind_of(TorchEvent::Kind& kind) const {
    const Raw& e = ev_;
    if (e.ph == "s" || e.ph == "f") {
      if (e.cat != "ac2g") return false;
      kind = e.ph == "s" ? TorchEvent::Kind::FlowStart : TorchEvent::Kind::FlowEnd;
      return true;
    }
    if (e.ph != "X") return false;
    // torch records c10d's host P2P ops under USER_SCOPE: `user_annotation`
    // in the trace (torch 2.15 Gloo: "gloo:send", "gloo:recv"; NCCL titles
    // them "nccl:send 0->1", "nccl:recv 0<-1"), some builds as `cpu_op`.
    if (is_host_p2p(e.name)) return kind = TorchEvent::Kind::HostComm, true;
    // c10d's message sizes sit on record_param_comms (args "In msg nelems",
    // "Out msg nelems", "dtype"), not on the NCCL kernel in every build.
    if (e.name == "record_param_comms")
      return (e.in_elems >= 0 || e.out_elems >= 0) && (kind = TorchEvent::Kind::CommSize, true);
    if (e.cat == "user_annotation") {
      if (e.name.rfind("PP:", 0) == 0) return kind = TorchEvent::Kind::Action, true;
      if (e.name.rfind("ProfilerStep#", 0) == 0) return kind = TorchEvent::Kind::ProfilerStep, true;
      return false;
    }
    if (e.cat == "cuda_runtime" || e.cat == "cuda_driver")
      return kind = TorchEvent::Kind::Launch, true;
    if (e.cat == "kernel" || e.cat == "gpu_memcpy" || e.cat == "gpu_memset")
      return kind = TorchEvent::Kind::Device, true;
    return false;
  }

  // "gloo:send", "nccl:recv", "nccl:send 0->1", "nccl:recv 0<-1": the name
  // alone or followed by a space and the peers.
  static bool is_host_p2p(const std::string& name) {
    for (const char* op : {"gloo:send", "gloo:recv", "nccl:send", "nccl:recv"}) {
      const std::size_t n = std::char_traits<char>::length(op);
      if (name.compare(0, n, op) == 0 && (name.size() == n || name[n] == ' ')) return true;
    }
    return false;
  }

  bool end_event() {
    ++event_index_;
    TorchEvent::Kind kind{};
    if (!kind_of(kind)) return true;
    auto bad = [&](const char* what) {
      error_ = "traceEvents[" + std::to_string(event_index_ - 1) + "] (" +
               limits::excerpt(ev_.name) + "): " + what;
      return false;
    };
    TorchEvent out;
    out.kind = kind;
    if (!ev_.ts.is_number || std::fabs(ev_.ts.number) > kMaxUs)
      return bad("'ts' must be a finite number of microseconds");
    out.ts = ev_.ts.number;
    const bool flow = kind == TorchEvent::Kind::FlowStart || kind == TorchEvent::Kind::FlowEnd;
    if (!flow) {
      if (!ev_.dur.is_number || ev_.dur.number < 0 || ev_.dur.number > kMaxUs)
        return bad("'dur' must be a finite non-negative number of microseconds");
      out.dur = ev_.dur.number;
    }
    out.pid = ev_.pid;
    out.tid = ev_.tid;
    out.correlation = flow ? ev_.id : ev_.correlation;
    if (kind == TorchEvent::Kind::Device) out.nccl = contains_nccl(ev_.name);
    if (kind == TorchEvent::Kind::Action) out.name = ev_.name.substr(3);
    if (kind == TorchEvent::Kind::ProfilerStep) out.name = ev_.name;
    const std::int64_t elems = std::max(ev_.in_elems, ev_.out_elems);
    const std::int64_t size = dtype_size(ev_.dtype);
    if (elems >= 0 && size > 0 && elems < (std::int64_t{1} << 50) / size) out.bytes = elems * size;
    out_.events.push_back(std::move(out));
    return true;
  }

  TorchRankTrace& out_;
  int depth_ = 0;
  bool args_open_ = false, dist_open_ = false;
  Field field_at_[kMaxDepth + 2] = {};
  std::vector<KeySet> keys_;
  bool events_array_ = false, seen_events_ = false;
  std::size_t event_index_ = 0;
  Scalar value_;
  Raw ev_;
  std::string error_;
};

}  // namespace

TorchRankTrace parse_torch_trace(std::string_view text, const std::string& source) {
  TorchRankTrace out;
  out.source = source;
  Events events(out);
  if (!json::sax_parse(text.begin(), text.end(), &events))
    throw InputError(source + ": " +
                     (events.error().empty() ? std::string("not valid JSON") : events.error()));
  if (!events.saw_events())
    throw InputError(source + ": no 'traceEvents' array (not a torch.profiler Chrome trace)");
  return out;
}

}  // namespace pipeplan
