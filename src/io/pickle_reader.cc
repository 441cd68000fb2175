// parse_pickle: a stack machine over the opcodes torch's C++ pickler writes
// (torch/csrc/jit/serialization/pickler.cpp, protocol 2), plus the few
// protocol 4 ones that carry the same values (FRAME, SHORT_BINUNICODE,
// MEMOIZE). Every other opcode is refused by name and offset: GLOBAL, REDUCE
// and friends would construct objects, which a diagnosis never needs.
//
// Bounds: nesting (containers and MARKs) is capped, every value made counts
// against a total (memo fetches copy, so they count too; this is what stops a
// pickle that fetches one large value many times), and a string's length is
// checked against the bytes left before anything is allocated.
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/pickle.h"

namespace pipeplan {

const PickleValue* PickleValue::find(std::string_view key) const {
  if (kind != Kind::Dict) return nullptr;
  for (const auto& [k, v] : entries)
    if (k.kind == Kind::Str && k.s == key) return &v;
  return nullptr;
}

const char* PickleValue::kind_name() const {
  switch (kind) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::Str: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
  }
  return "?";
}

namespace {

// Names of the opcodes this reader refuses, so the message says what it met.
const char* opcode_name(unsigned char op) {
  struct Row {
    unsigned char op;
    const char* name;
  };
  static constexpr Row kNames[] = {
      {'c', "GLOBAL"},
      {'R', "REDUCE"},
      {'b', "BUILD"},
      {'i', "INST"},
      {'o', "OBJ"},
      {0x81, "NEWOBJ"},
      {0x92, "NEWOBJ_EX"},
      {0x93, "STACK_GLOBAL"},
      {'P', "PERSID"},
      {'Q', "BINPERSID"},
      {'I', "INT"},
      {'L', "LONG"},
      {'S', "STRING"},
      {'V', "UNICODE"},
      {'F', "FLOAT"},
      {'d', "DICT"},
      {'l', "LIST"},
      {'T', "BINSTRING"},
      {'U', "SHORT_BINSTRING"},
      {'g', "GET"},
      {'p', "PUT"},
      {0x82, "EXT1"},
      {0x83, "EXT2"},
      {0x84, "EXT4"},
      {0x8f, "EMPTY_SET"},
      {0x90, "ADDITEMS"},
      {0x91, "FROZENSET"},
      {0x8d, "BINUNICODE8"},
      {0x8e, "BINBYTES8"},
      {0x96, "BYTEARRAY8"},
      {0x97, "NEXT_BUFFER"},
      {0x98, "READONLY_BUFFER"},
      {'2', "DUP"},
      {'1', "POP_MARK"},
  };
  for (const Row& r : kNames)
    if (r.op == op) return r.name;
  return nullptr;
}

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& source, const PickleLimits& limits)
      : in_(bytes), source_(source), limits_(limits) {}

  PickleValue run() {
    if (in_.empty()) fail(0, "empty input: not a pickle");
    if (static_cast<unsigned char>(in_[0]) != 0x80)
      fail(0, "not a pickle (a pickle of protocol 2 or later starts with 0x80, this starts with " +
                  hex(static_cast<unsigned char>(in_[0])) + ")");
    while (true) {
      if (pos_ >= in_.size())
        fail(pos_,
             "truncated: the pickle ends without STOP (" + std::to_string(in_.size()) + " bytes)");
      const std::size_t at = pos_;
      const auto op = static_cast<unsigned char>(in_[pos_++]);
      if (op == '.') {
        if (stack_.size() != 1 || !marks_.empty())
          fail(at,
               "STOP with " + std::to_string(stack_.size()) + " values on the stack (1 expected)");
        return std::move(stack_.back().value);
      }
      step(op, at);
    }
  }

 private:
  struct Slot {
    PickleValue value;
    int depth = 0;  // 0 for a scalar, 1 + the deepest child for a container
  };
  struct Memo {
    PickleValue value;
    int depth = 0;
    std::size_t size = 1;   // values in it, what a fetch costs
    std::size_t bytes = 0;  // and the bytes of its strings
  };

  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    throw InputError(source_ + ": offset " + std::to_string(at) + ": " + what);
  }
  static std::string hex(unsigned char c) {
    static const char* digits = "0123456789abcdef";
    return std::string("0x") + digits[c >> 4] + digits[c & 15];
  }

  std::string_view take(std::size_t n, std::size_t at, const char* what) {
    if (n > in_.size() - pos_)
      fail(at, std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes, " +
                   std::to_string(in_.size() - pos_) + " left");
    std::string_view out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  std::uint64_t le(std::size_t n, std::size_t at, const char* what) {
    std::string_view b = take(n, at, what);
    std::uint64_t v = 0;
    for (std::size_t k = 0; k < n; ++k)
      v |= std::uint64_t(static_cast<unsigned char>(b[k])) << (8 * k);
    return v;
  }

  void count(std::size_t n, std::size_t at, std::size_t bytes = 0) {
    values_ += n;
    bytes_ += bytes;
    if (values_ > limits_.max_values)
      fail(at, "more than " + std::to_string(limits_.max_values) + " values (limit)");
    if (bytes_ > limits_.max_bytes)
      fail(at, "more than " + std::to_string(limits_.max_bytes) + " bytes of strings (limit)");
  }
  void push(PickleValue v, std::size_t at, int depth = 0) {
    count(1, at);
    stack_.push_back({std::move(v), depth});
  }
  void push_scalar(PickleValue::Kind k, std::size_t at) {
    PickleValue v;
    v.kind = k;
    push(std::move(v), at);
  }
  Slot pop(std::size_t at, const char* op) {
    if (stack_.size() <= floor()) fail(at, std::string(op) + " on an empty stack (or past a MARK)");
    Slot s = std::move(stack_.back());
    stack_.pop_back();
    return s;
  }
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // The values since the last MARK, which is removed.
  std::vector<Slot> pop_mark(std::size_t at, const char* op) {
    if (marks_.empty()) fail(at, std::string(op) + " without a MARK");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Slot> out(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(m)),
                          std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return out;
  }
  int deeper(int child, std::size_t at) {
    if (child + 1 > limits_.max_depth)
      fail(at, "nested deeper than " + std::to_string(limits_.max_depth) + " levels (limit)");
    return child + 1;
  }
  Slot& top_container(std::size_t at, PickleValue::Kind kind, const char* op) {
    if (stack_.size() <= floor()) fail(at, std::string(op) + " on an empty stack (or past a MARK)");
    Slot& s = stack_.back();
    if (s.value.kind != kind) fail(at, std::string(op) + " on a " + s.value.kind_name());
    return s;
  }
  void add_items(Slot& list, std::vector<Slot>& items, std::size_t at) {
    for (Slot& it : items) {
      list.depth = std::max(list.depth, deeper(it.depth, at));
      list.value.items.push_back(std::move(it.value));
    }
  }
  void add_entries(Slot& dict, std::vector<Slot>& kv, std::size_t at, const char* op) {
    if (kv.size() % 2 != 0) fail(at, std::string(op) + " with an odd number of values");
    for (std::size_t k = 0; k < kv.size(); k += 2) {
      dict.depth = std::max(dict.depth, deeper(std::max(kv[k].depth, kv[k + 1].depth), at));
      dict.value.entries.emplace_back(std::move(kv[k].value), std::move(kv[k + 1].value));
    }
  }
  void tuple_of(std::vector<Slot> items, std::size_t at) {
    Slot t;
    t.value.kind = PickleValue::Kind::Tuple;
    add_items(t, items, at);
    count(1, at);
    stack_.push_back(std::move(t));
  }
  void str(std::size_t n, std::size_t at, PickleValue::Kind kind) {
    if (n > limits_.max_string)
      fail(at, "a string of " + std::to_string(n) + " bytes (limit " +
                   std::to_string(limits_.max_string) + ")");
    PickleValue v;
    v.kind = kind;
    v.s = std::string(take(n, at, "a string"));
    count(0, at, n);
    push(std::move(v), at);
  }
  void put(std::uint64_t index, std::size_t at) {
    if (stack_.size() <= floor()) fail(at, "memo put on an empty stack");
    const Slot& s = stack_.back();
    if (index > limits_.max_values) fail(at, "memo index " + std::to_string(index) + " (limit)");
    std::size_t bytes = 0;
    const std::size_t size = size_of(s.value, bytes);
    count(size, at, bytes);  // the memo holds a copy
    memo_[index] = Memo{s.value, s.depth, size, bytes};
  }
  void get(std::uint64_t index, std::size_t at) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail(at, "memo index " + std::to_string(index) + " was never put");
    const Memo& m = it->second;
    // Lists and dicts are memoized before they are filled; a copy would miss
    // what comes later. torch's pickler memoizes only immutable values.
    if (m.value.kind == PickleValue::Kind::List || m.value.kind == PickleValue::Kind::Dict)
      fail(at, std::string("memo ") + std::to_string(index) + " is a shared " +
                   m.value.kind_name() + " (not supported)");
    count(m.size, at, m.bytes);
    stack_.push_back({m.value, m.depth});
  }
  static std::size_t size_of(const PickleValue& v, std::size_t& bytes) {
    std::size_t n = 1;
    bytes += v.s.size();
    for (const auto& c : v.items) n += size_of(c, bytes);
    for (const auto& [k, x] : v.entries) n += size_of(k, bytes) + size_of(x, bytes);
    return n;
  }

  void step(unsigned char op, std::size_t at) {
    using K = PickleValue::Kind;
    switch (op) {
      case 0x80: take(1, at, "PROTO"); return;
      case 0x95: take(8, at, "FRAME"); return;  // framing only; the bytes follow inline
      case '}': push_scalar(K::Dict, at); return;
      case ']': push_scalar(K::List, at); return;
      case ')': push_scalar(K::Tuple, at); return;
      case 'N': push_scalar(K::None, at); return;
      case 0x88:
      case 0x89: {
        PickleValue v;
        v.kind = K::Bool;
        v.b = op == 0x88;
        push(std::move(v), at);
        return;
      }
      case '(':
        if (static_cast<int>(marks_.size()) >= limits_.max_depth)
          fail(at, "nested deeper than " + std::to_string(limits_.max_depth) + " levels (limit)");
        marks_.push_back(stack_.size());
        return;
      case 'K': return integer(static_cast<std::int64_t>(le(1, at, "BININT1")), at);
      case 'M': return integer(static_cast<std::int64_t>(le(2, at, "BININT2")), at);
      case 'J':
        return integer(static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4, at, "BININT"))),
                       at);
      case 0x8a: return long_n(le(1, at, "LONG1"), at);
      case 0x8b: return long_n(le(4, at, "LONG4"), at);
      case 'G': {
        std::string_view b = take(8, at, "BINFLOAT");
        std::uint64_t bits = 0;
        for (char c : b) bits = (bits << 8) | static_cast<unsigned char>(c);
        PickleValue v;
        v.kind = K::Float;
        std::memcpy(&v.f, &bits, sizeof v.f);
        push(std::move(v), at);
        return;
      }
      case 'X': return str(le(4, at, "BINUNICODE"), at, K::Str);
      case 0x8c: return str(le(1, at, "SHORT_BINUNICODE"), at, K::Str);
      case 'B': return str(le(4, at, "BINBYTES"), at, K::Bytes);
      case 'C': return str(le(1, at, "SHORT_BINBYTES"), at, K::Bytes);
      case 'q': return put(le(1, at, "BINPUT"), at);
      case 'r': return put(le(4, at, "LONG_BINPUT"), at);
      case 0x94: return put(memo_.size(), at);
      case 'h': return get(le(1, at, "BINGET"), at);
      case 'j': return get(le(4, at, "LONG_BINGET"), at);
      case '0': pop(at, "POP"); return;
      case 't': return tuple_of(pop_mark(at, "TUPLE"), at);
      case 0x85:
      case 0x86:
      case 0x87: {
        const std::size_t n = op - 0x84u;
        if (stack_.size() < floor() + n)
          fail(at, "TUPLE" + std::to_string(n) + " needs " + std::to_string(n) + " values");
        std::vector<Slot> items(
            std::make_move_iterator(stack_.end() - static_cast<std::ptrdiff_t>(n)),
            std::make_move_iterator(stack_.end()));
        stack_.resize(stack_.size() - n);
        return tuple_of(std::move(items), at);
      }
      case 'a': {
        Slot item = pop(at, "APPEND");
        std::vector<Slot> one;
        one.push_back(std::move(item));
        add_items(top_container(at, K::List, "APPEND"), one, at);
        return;
      }
      case 'e': {
        std::vector<Slot> items = pop_mark(at, "APPENDS");
        add_items(top_container(at, K::List, "APPENDS"), items, at);
        return;
      }
      case 's': {
        std::vector<Slot> kv;
        Slot v = pop(at, "SETITEM");
        Slot k = pop(at, "SETITEM");
        kv.push_back(std::move(k));
        kv.push_back(std::move(v));
        add_entries(top_container(at, K::Dict, "SETITEM"), kv, at, "SETITEM");
        return;
      }
      case 'u': {
        std::vector<Slot> kv = pop_mark(at, "SETITEMS");
        add_entries(top_container(at, K::Dict, "SETITEMS"), kv, at, "SETITEMS");
        return;
      }
      default: break;
    }
    const char* name = opcode_name(op);
    std::string text = "opcode " + hex(op);
    if (op >= 0x20 && op < 0x7f) text += std::string(" '") + static_cast<char>(op) + "'";
    fail(at, text +
                 (name ? std::string(" (") + name + ") is not supported"
                       : " is not a known pickle opcode") +
                 " (the reader takes the dicts, lists, tuples, strings and numbers torch's "
                 "pickler writes)");
  }

  void integer(std::int64_t i, std::size_t at) {
    PickleValue v;
    v.kind = PickleValue::Kind::Int;
    v.i = i;
    push(std::move(v), at);
  }
  void long_n(std::uint64_t n, std::size_t at) {
    if (n > 8) fail(at, "an integer of " + std::to_string(n) + " bytes (at most 8 supported)");
    std::string_view b = take(n, at, "a long");
    std::uint64_t u = 0;
    for (std::size_t k = 0; k < n; ++k)
      u |= std::uint64_t(static_cast<unsigned char>(b[k])) << (8 * k);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(b[n - 1]) & 0x80))
      u |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    integer(static_cast<std::int64_t>(u), at);
  }

  std::string_view in_;
  const std::string& source_;
  PickleLimits limits_;
  std::size_t pos_ = 0;
  std::size_t values_ = 0;
  std::size_t bytes_ = 0;
  std::vector<Slot> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Memo> memo_;
};

}  // namespace

PickleValue parse_pickle(std::string_view bytes, const std::string& source,
                         const PickleLimits& limits) {
  return Reader(bytes, source, limits).run();
}

}  // namespace pipeplan
