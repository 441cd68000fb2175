// write_layer_profile: the CSV that parse_layer_profile reads, every column
// spelled out, numbers in their shortest exact form.
#include <charconv>
#include <string>

#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/profile.h"

namespace pipeplan {
namespace {

void append_number(std::string& line, double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v == 0.0 ? 0.0 : v);  // no "-0"
  line.append(buf, res.ptr);
}

// A name the reader gives back unchanged: no separator, comment or line
// break inside, no space it would trim.
bool writable(const std::string& name) {
  if (name.empty() || name.front() == ' ' || name.back() == ' ' || name.front() == '\t' ||
      name.back() == '\t')
    return false;
  for (char c : name)
    if (c == ',' || c == '#' || c == '\n' || c == '\r') return false;
  return true;
}

}  // namespace

void write_layer_profile(const LayerProfile& profile, std::ostream& out,
                         const std::vector<std::string>& comment) {
  for (const Layer& l : profile.layers)
    if (!writable(l.name))
      throw InputError("layer name '" + limits::excerpt(l.name) +
                       "' cannot be written to a layer CSV (a comma, '#', a line break or "
                       "spaces around it)");
  for (const std::string& c : comment) {
    std::string text = c;
    for (char& ch : text)
      if (ch == '\n' || ch == '\r') ch = ' ';
    out << "# " << text << '\n';
  }
  if (profile.seq_len) {
    std::string len = "# seq_len: ";
    append_number(len, *profile.seq_len);
    out << len << '\n';
  }
  const bool quadratic = profile.has_quadratic();
  out << "name,F,B,W,activation,input,recompute" << (quadratic ? ",F_quad,B_quad,W_quad" : "")
      << '\n';
  std::string line;
  for (const Layer& l : profile.layers) {
    line = l.name;
    for (double v : {l.f, l.b, l.w, l.activation, l.input_size(), l.recompute_time()}) {
      line += ',';
      append_number(line, v);
    }
    if (quadratic)
      for (double v : {l.f_quad, l.b_quad, l.w_quad}) {
        line += ',';
        append_number(line, v);
      }
    line += '\n';
    out << line;
  }
}

}  // namespace pipeplan
