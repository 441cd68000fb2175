// parse_layer_profile: the CSV layer cost profile "name,F,B,W,activation".
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/profile.h"

namespace pipeplan {
namespace {

constexpr const char* kColumns[] = {"name", "F", "B", "W", "activation"};

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

}  // namespace

LayerProfile parse_layer_profile(std::string_view text, const std::string& source) {
  LayerProfile profile;
  bool header = false;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    const std::string where = source + ":" + std::to_string(line_no) + ": ";
    const auto cells = split_cells(line);
    if (!header) {
      bool ok = cells.size() == 5;
      for (std::size_t c = 0; ok && c < 5; ++c) ok = same_name(cells[c], kColumns[c]);
      if (!ok)
        throw InputError(where + "expected the header 'name,F,B,W,activation', got '" +
                         limits::excerpt(line) + "'");
      header = true;
      continue;
    }
    if (cells.size() != 5)
      throw InputError(where + "expected 5 columns (name,F,B,W,activation), got " +
                       std::to_string(cells.size()));
    if (profile.layers.size() >= static_cast<std::size_t>(limits::kMaxLayers))
      throw InputError(where + "more than the supported " + std::to_string(limits::kMaxLayers) +
                       " layers");
    Layer layer;
    if (cells[0].empty()) throw InputError(where + "column 'name' is empty");
    layer.name = std::string(cells[0]);
    double* fields[] = {&layer.f, &layer.b, &layer.w, &layer.activation};
    for (std::size_t c = 1; c < 5; ++c) {
      const std::string_view cell = cells[c];
      double v = 0;
      auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
      if (cell.empty() || ec != std::errc() || ptr != cell.data() + cell.size() ||
          !std::isfinite(v) || v < 0)
        throw InputError(where + "column '" + kColumns[c] + "' of layer '" +
                         limits::excerpt(layer.name) + "': '" + limits::excerpt(cell) +
                         "' is not a finite non-negative number");
      if (v > limits::kMaxCost)
        throw InputError(where + "column '" + kColumns[c] + "' of layer '" +
                         limits::excerpt(layer.name) + "': " + limits::excerpt(cell) +
                         " is more than the supported 1e+12");
      *fields[c - 1] = v;
    }
    if (layer.w > layer.b)
      throw InputError(where + "layer '" + limits::excerpt(layer.name) + "': W (" +
                       limits::excerpt(cells[3]) + ") exceeds B (" + limits::excerpt(cells[2]) +
                       "); W is the weight-gradient part of the backward");
    profile.layers.push_back(std::move(layer));
  }
  if (!header)
    throw InputError(source +
                     ": empty layer profile (expected the header 'name,F,B,W,activation')");
  if (profile.layers.empty()) throw InputError(source + ": the layer profile lists no layers");
  return profile;
}

}  // namespace pipeplan
