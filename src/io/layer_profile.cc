// parse_layer_profile: the CSV layer cost profile "name,F,B,W,activation"
// with the optional columns "input", "recompute" and the quadratic parts
// "F_quad", "B_quad", "W_quad", and the "# seq_len: N" statement.
#include <cctype>
#include <charconv>
#include <cmath>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "ir/numbers.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/profile.h"

namespace pipeplan {
namespace {

constexpr const char* kColumns[] = {"name",  "F",         "B",      "W",      "activation",
                                    "input", "recompute", "F_quad", "B_quad", "W_quad"};
constexpr std::size_t kRequired = 5;
constexpr std::size_t kAllColumns = std::size(kColumns);

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_cells(std::string_view line) {
  std::vector<std::string_view> cells;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == ',') {
      cells.push_back(trim(line.substr(start, i - start)));
      start = i + 1;
    }
  }
  return cells;
}

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// The header: the five required columns in order, then the optional ones
// in any order, each at most once. Returns which field each column fills.
std::vector<std::size_t> read_header(const std::vector<std::string_view>& cells,
                                     std::string_view line, const std::string& where) {
  std::vector<std::size_t> fields;
  bool ok = cells.size() >= kRequired && cells.size() <= kAllColumns;
  for (std::size_t c = 0; ok && c < kRequired; ++c) ok = same_name(cells[c], kColumns[c]);
  if (!ok)
    throw InputError(where + "expected the header 'name,F,B,W,activation', got '" +
                     limits::excerpt(line) + "'");
  for (std::size_t c = 0; c < kRequired; ++c) fields.push_back(c);
  for (std::size_t c = kRequired; c < cells.size(); ++c) {
    std::size_t f = kRequired;
    while (f < kAllColumns && !same_name(cells[c], kColumns[f])) ++f;
    if (f == kAllColumns)
      throw InputError(where + "unknown column '" + limits::excerpt(cells[c]) +
                       "' (the optional columns are 'input', 'recompute', 'F_quad', "
                       "'B_quad' and 'W_quad')");
    for (std::size_t g : fields)
      if (g == f) throw InputError(where + "column '" + kColumns[f] + "' is given twice");
    fields.push_back(f);
  }
  return fields;
}

// "name,F,B,W,activation[,...]" as the header gave them.
std::string header_text(const std::vector<std::size_t>& fields) {
  std::string out;
  for (std::size_t f : fields) out += (out.empty() ? "" : ",") + std::string(kColumns[f]);
  return out;
}

double read_number(std::string_view cell, const char* column, const std::string& layer,
                   const std::string& where) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (cell.empty() || ec != std::errc() || ptr != cell.data() + cell.size() || !std::isfinite(v) ||
      v < 0)
    throw InputError(where + "column '" + column + "' of layer '" + limits::excerpt(layer) +
                     "': '" + limits::excerpt(cell) + "' is not a finite non-negative number");
  if (v > limits::kMaxCost)
    throw InputError(where + "column '" + column + "' of layer '" + limits::excerpt(layer) +
                     "': " + limits::excerpt(cell) + " is more than the supported 1e+12");
  return v;
}

// A quadratic part is a part of its cost: at most F (B, W), and W's at most B's.
void check_quadratic(const Layer& l, const std::string& where) {
  const auto bad = [&](const char* part, double v, const char* whole, double w) {
    throw InputError(where + "layer '" + limits::excerpt(l.name) + "': " + part + " (" +
                     detail::format_number(v) + ") exceeds " + whole + " (" +
                     detail::format_number(w) + "); it is the part of " + whole +
                     " that grows with the square of the length");
  };
  if (l.f_quad > l.f) bad("F_quad", l.f_quad, "F", l.f);
  if (l.b_quad > l.b) bad("B_quad", l.b_quad, "B", l.b);
  if (l.w_quad > l.w) bad("W_quad", l.w_quad, "W", l.w);
  if (l.w_quad > l.b_quad) bad("W_quad", l.w_quad, "B_quad", l.b_quad);
}

Layer read_layer(const std::vector<std::string_view>& cells, const std::vector<std::size_t>& fields,
                 const std::string& where) {
  if (cells.size() != fields.size())
    throw InputError(where + "expected " + std::to_string(fields.size()) + " columns (" +
                     header_text(fields) + "), got " + std::to_string(cells.size()));
  Layer layer;
  if (cells[0].empty()) throw InputError(where + "column 'name' is empty");
  layer.name = std::string(cells[0]);
  std::string_view b_cell, w_cell;
  for (std::size_t c = 1; c < cells.size(); ++c) {
    const std::size_t f = fields[c];
    const double v = read_number(cells[c], kColumns[f], layer.name, where);
    switch (f) {
      case 1: layer.f = v; break;
      case 2: layer.b = v, b_cell = cells[c]; break;
      case 3: layer.w = v, w_cell = cells[c]; break;
      case 4: layer.activation = v; break;
      case 5: layer.input = v; break;
      case 6: layer.recompute = v; break;
      case 7: layer.f_quad = v; break;
      case 8: layer.b_quad = v; break;
      default: layer.w_quad = v; break;
    }
  }
  if (layer.w > layer.b)
    throw InputError(where + "layer '" + limits::excerpt(layer.name) + "': W (" +
                     limits::excerpt(w_cell) + ") exceeds B (" + limits::excerpt(b_cell) +
                     "); W is the weight-gradient part of the backward");
  check_quadratic(layer, where);
  return layer;
}

// "# seq_len: N" (spaces optional, the key in any case): the length the
// costs are stated at; nullopt for any other comment.
std::optional<double> seq_len_statement(std::string_view comment, const std::string& where) {
  comment = trim(comment);
  const std::size_t colon = comment.find(':');
  if (colon == std::string_view::npos || !same_name(trim(comment.substr(0, colon)), "seq_len"))
    return std::nullopt;
  const std::string_view cell = trim(comment.substr(colon + 1));
  double v = 0;
  auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (cell.empty() || ec != std::errc() || ptr != cell.data() + cell.size() || !std::isfinite(v) ||
      v <= 0 || v > limits::kMaxCost)
    throw InputError(where + "seq_len '" + limits::excerpt(cell) +
                     "' is not a positive number of tokens");
  return v;
}

}  // namespace

LayerProfile parse_layer_profile(std::string_view text, const std::string& source) {
  LayerProfile profile;
  std::vector<std::size_t> fields;  // empty until the header is read
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    const std::string where = source + ":" + std::to_string(line_no) + ": ";
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) {
      if (fields.empty() && trim(line.substr(0, hash)).empty())
        if (std::optional<double> len = seq_len_statement(line.substr(hash + 1), where)) {
          if (profile.seq_len) throw InputError(where + "seq_len is stated twice");
          profile.seq_len = len;
        }
      line = line.substr(0, hash);
    }
    line = trim(line);
    if (line.empty()) continue;
    const auto cells = split_cells(line);
    if (fields.empty()) {
      fields = read_header(cells, line, where);
      continue;
    }
    if (profile.layers.size() >= static_cast<std::size_t>(limits::kMaxLayers))
      throw InputError(where + "more than the supported " + std::to_string(limits::kMaxLayers) +
                       " layers");
    profile.layers.push_back(read_layer(cells, fields, where));
  }
  if (fields.empty())
    throw InputError(source +
                     ": empty layer profile (expected the header 'name,F,B,W,activation')");
  if (profile.layers.empty()) throw InputError(source + ": the layer profile lists no layers");
  return profile;
}

}  // namespace pipeplan
