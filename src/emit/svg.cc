// SVG timeline of a simulated plan: one row per rank, time to scale.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "emit/render_util.h"
#include "ir/numbers.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/render.h"

namespace pipeplan {
namespace {

using detail::format_number;

constexpr double kLeft = 64, kRight = 16, kRowHeight = 22, kRowGap = 6;
// The copy stream's lane under a rank's row (plans with OFFLOAD/RELOAD).
constexpr double kCopyHeight = 12, kCopyGap = 2;
constexpr double kTargetWidth = 960;
constexpr double kGroupBand = 4;  // height of a BATCH_P2P group's band

std::string num(double x) { return format_number(x, 2); }
std::string general(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// Text that must not break the markup (schedule names come from files).
std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

struct Rgb {
  int r, g, b;
};

Rgb base_colour(ActionType t) {
  switch (t) {
    case ActionType::F: return {78, 121, 167};          // blue
    case ActionType::B: return {89, 161, 79};           // green
    case ActionType::I: return {242, 142, 43};          // orange
    case ActionType::W: return {176, 122, 161};         // purple
    case ActionType::Recompute: return {156, 117, 95};  // brown
    case ActionType::Offload: return {118, 183, 178};   // teal
    case ActionType::Reload: return {237, 201, 72};     // yellow
    default: return {150, 150, 150};
  }
}

// Later local stages of a rank are drawn lighter (mixed toward white).
Rgb shade(Rgb c, int chunk, int chunks) {
  if (chunks <= 1 || chunk <= 0) return c;
  const double k = 0.55 * chunk / (chunks - 1);
  auto mix = [&](int v) { return static_cast<int>(std::lround(v + (255 - v) * k)); };
  return {mix(c.r), mix(c.g), mix(c.b)};
}

constexpr Rgb kGroupColour{31, 60, 86};  // dark slate: a BATCH_P2P group

std::string hex(Rgb c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

std::string text_colour(Rgb c) {
  const double lum = (0.299 * c.r + 0.587 * c.g + 0.114 * c.b) / 255.0;
  return lum > 0.62 ? "#222" : "#fff";
}

// A "nice" tick step (1, 2 or 5 x 10^k) giving at most ~12 ticks.
double tick_step(double span) {
  if (span <= 0) return 1;
  const double raw = span / 12;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

class SvgWriter {
 public:
  SvgWriter(const Plan& plan, const Timeline& result, const SvgOptions& options, std::ostream& out)
      : plan_(plan), result_(result), options_(options), out_(out) {
    const double span = std::max(result.makespan, 1e-9);
    ppu_ =
        options.px_per_unit > 0 ? options.px_per_unit : std::clamp(kTargetWidth / span, 0.01, 48.0);
    top_ = options.title ? 34 : 10;
    if (detail::has_copies(plan)) lane_ = kCopyHeight + kCopyGap;
    rows_bottom_ = top_ + plan.meta.pp_degree * (kRowHeight + lane_ + kRowGap) - kRowGap;
    // Wide enough for the legend even when the timeline is short.
    width_ = std::max(kLeft + result.makespan * ppu_ + kRight, kLeft + (lane_ > 0 ? 960 : 620));
    if (!(width_ <= limits::kMaxSvgWidth))
      throw InputError("an SVG timeline at " + general(ppu_) + " px per time unit would be " +
                       general(width_) + " px wide, more than the supported " +
                       general(limits::kMaxSvgWidth));
    height_ = rows_bottom_ + 26 + 28;
  }

  void write() {
    out_ << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width_) << "\" height=\""
         << num(height_) << "\" viewBox=\"0 0 " << num(width_) << " " << num(height_)
         << "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
    out_ << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
    if (options_.arrows)
      out_ << "<defs><marker id=\"arrow\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" "
              "markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" "
              "fill=\"#444\"/></marker></defs>\n";
    if (options_.title) write_title();
    for (int r = 0; r < plan_.meta.pp_degree; ++r) write_row(r);
    for (int r = 0; r < plan_.meta.pp_degree; ++r) write_groups(r);
    if (options_.arrows) write_arrows();
    write_axis();
    write_legend();
    out_ << "</svg>\n";
  }

 private:
  double x(double t) const { return kLeft + t * ppu_; }
  double row_y(int r) const { return top_ + r * (kRowHeight + lane_ + kRowGap); }

  void write_title() {
    const PlanMeta& m = plan_.meta;
    out_ << "<text x=\"" << num(kLeft) << "\" y=\"20\" font-size=\"13\" fill=\"#222\">"
         << xml_escape(limits::excerpt(m.schedule)) << ": pp " << m.pp_degree << ", microbatches "
         << m.num_microbatches << ", stages per rank " << m.stages_per_rank << "; makespan "
         << format_number(result_.makespan, 3) << ", bubble "
         << detail::percent(result_.bubble_fraction)
         << (options_.note.empty() ? "" : "; " + xml_escape(options_.note)) << "</text>\n";
  }

  void block(double x0, double y0, double w, double h, Rgb c, const std::string& label,
             const std::string& tip, double font) {
    out_ << "<rect x=\"" << num(x0) << "\" y=\"" << num(y0) << "\" width=\"" << num(w)
         << "\" height=\"" << num(h) << "\" fill=\"" << hex(c)
         << "\" stroke=\"#fff\" stroke-width=\"0.5\"><title>" << tip << "</title></rect>\n";
    // Roughly 0.6em per character; skip labels that would not fit.
    if (w >= 0.62 * font * static_cast<double>(label.size()) + 2)
      out_ << "<text x=\"" << num(x0 + w / 2) << "\" y=\"" << num(y0 + h / 2 + font * 0.35)
           << "\" font-size=\"" << num(font) << "\" text-anchor=\"middle\" fill=\""
           << text_colour(c) << "\">" << label << "</text>\n";
  }

  void write_row(int r) {
    const double y = row_y(r);
    out_ << "<text x=\"" << num(kLeft - 8) << "\" y=\"" << num(y + kRowHeight / 2 + 4)
         << "\" font-size=\"11\" text-anchor=\"end\" fill=\"#222\">rank " << r << "</text>\n";
    out_ << "<rect x=\"" << num(kLeft) << "\" y=\"" << num(y) << "\" width=\""
         << num(result_.makespan * ppu_) << "\" height=\"" << num(kRowHeight)
         << "\" fill=\"#f2f2f2\"/>\n";
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    const auto& times = result_.times[static_cast<std::size_t>(r)];
    const int v = plan_.meta.stages_per_rank;
    const std::vector<int> stages = plan_.meta.stages_of(r);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (!is_compute(a.type)) continue;
      const ActionTime& t = times[i];
      const double x0 = x(t.start), w = (t.end - t.start) * ppu_;
      const std::string tip =
          to_string(a) + " " + format_number(t.start, 3) + ".." + format_number(t.end, 3);
      if (a.type == ActionType::OverlapFB) {
        const int cf = detail::local_chunk(stages, a.stage);
        const int cb = detail::local_chunk(stages, a.sub_stage);
        block(x0, y, w, kRowHeight / 2, shade(base_colour(ActionType::F), cf, v),
              std::to_string(a.microbatch), tip, 8);
        block(x0, y + kRowHeight / 2, w, kRowHeight / 2, shade(base_colour(ActionType::B), cb, v),
              std::to_string(a.sub_microbatch), tip, 8);
      } else {
        const int c = detail::local_chunk(stages, a.stage);
        block(x0, y, w, kRowHeight, shade(base_colour(a.type), c, v), std::to_string(a.microbatch),
              tip, 10);
      }
    }
    if (lane_ > 0) write_copy_lane(r, y + kRowHeight + kCopyGap);
  }

  // The rank's copy stream: its OFFLOADs and RELOADs, to scale.
  void write_copy_lane(int r, double y) {
    out_ << "<text x=\"" << num(kLeft - 8) << "\" y=\"" << num(y + kCopyHeight - 3)
         << "\" font-size=\"8\" text-anchor=\"end\" fill=\"#555\">copy</text>\n";
    out_ << "<rect x=\"" << num(kLeft) << "\" y=\"" << num(y) << "\" width=\""
         << num(result_.makespan * ppu_) << "\" height=\"" << num(kCopyHeight)
         << "\" fill=\"#f8f8f8\"/>\n";
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    const auto& times = result_.times[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (!is_copy(a.type)) continue;
      const ActionTime& t = times[i];
      block(x(t.start), y, (t.end - t.start) * ppu_, kCopyHeight, base_colour(a.type),
            std::to_string(a.microbatch),
            to_string(a) + " " + format_number(t.start, 3) + ".." + format_number(t.end, 3), 8);
    }
  }

  // A BATCH_P2P group: a dark band along the row's bottom edge from its
  // first member's posting to its last completion (its members overlap).
  void write_groups(int r) {
    const double y = row_y(r) + kRowHeight - kGroupBand;
    for (const detail::GroupSpan& g :
         detail::group_spans(plan_.ranks[static_cast<std::size_t>(r)],
                             result_.times[static_cast<std::size_t>(r)])) {
      out_ << "<rect x=\"" << num(x(g.start)) << "\" y=\"" << num(y) << "\" width=\""
           << num(std::max((g.end - g.start) * ppu_, 1.0)) << "\" height=\"" << num(kGroupBand)
           << "\" fill=\"" << hex(kGroupColour) << "\"><title>" << g.label << " "
           << format_number(g.start, 3) << ".." << format_number(g.end, 3) << "</title></rect>\n";
      any_group_ = true;
    }
  }

  void write_arrows() {
    for (const Transfer& tr : result_.transfers) {
      const bool down = tr.dst_rank > tr.src_rank;
      const double y1 = row_y(tr.src_rank) + (down ? kRowHeight : 0);
      const double y2 = row_y(tr.dst_rank) + (down ? 0 : kRowHeight);
      out_ << "<line x1=\"" << num(x(tr.start)) << "\" y1=\"" << num(y1) << "\" x2=\""
           << num(x(tr.end)) << "\" y2=\"" << num(y2)
           << "\" stroke=\"#444\" stroke-width=\"0.8\" stroke-opacity=\"0.7\" "
              "marker-end=\"url(#arrow)\"/>\n";
    }
  }

  void write_axis() {
    const double y = rows_bottom_ + 4;
    out_ << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(y) << "\" x2=\""
         << num(x(result_.makespan)) << "\" y2=\"" << num(y) << "\" stroke=\"#888\"/>\n";
    const double step = tick_step(result_.makespan);
    const long n = static_cast<long>(std::floor(result_.makespan / step + 1e-9));
    for (long k = 0; k <= n; ++k) {
      const double t = static_cast<double>(k) * step;
      out_ << "<line x1=\"" << num(x(t)) << "\" y1=\"" << num(y) << "\" x2=\"" << num(x(t))
           << "\" y2=\"" << num(y + 4) << "\" stroke=\"#888\"/><text x=\"" << num(x(t)) << "\" y=\""
           << num(y + 15) << "\" font-size=\"9\" text-anchor=\"middle\" fill=\"#555\">"
           << format_number(t, 3) << "</text>\n";
    }
  }

  void write_legend() {
    constexpr int kKinds = 8;
    const ActionType types[kKinds] = {
        ActionType::F,         ActionType::B,         ActionType::I,       ActionType::W,
        ActionType::OverlapFB, ActionType::Recompute, ActionType::Offload, ActionType::Reload};
    const char* names[kKinds] = {"F forward",       "B backward",      "I input grad",
                                 "W weight grad",   "F+B overlapped",  "R recompute",
                                 "offload to host", "reload to device"};
    bool present[kKinds] = {};
    for (const auto& list : plan_.ranks)
      for (const Action& a : list)
        for (int k = 0; k < kKinds; ++k) present[k] = present[k] || a.type == types[k];
    double lx = kLeft;
    const double ly = rows_bottom_ + 30;
    for (int k = 0; k < kKinds; ++k) {
      if (!present[k]) continue;
      if (types[k] != ActionType::OverlapFB) {
        out_ << "<rect x=\"" << num(lx) << "\" y=\"" << num(ly)
             << "\" width=\"12\" height=\"12\" fill=\"" << hex(base_colour(types[k])) << "\"/>\n";
      } else {
        out_ << "<rect x=\"" << num(lx) << "\" y=\"" << num(ly)
             << "\" width=\"12\" height=\"6\" fill=\"" << hex(base_colour(ActionType::F))
             << "\"/><rect x=\"" << num(lx) << "\" y=\"" << num(ly + 6)
             << "\" width=\"12\" height=\"6\" fill=\"" << hex(base_colour(ActionType::B))
             << "\"/>\n";
      }
      out_ << "<text x=\"" << num(lx + 16) << "\" y=\"" << num(ly + 10)
           << "\" font-size=\"11\" fill=\"#222\">" << names[k] << "</text>\n";
      lx += 26 + 6.2 * static_cast<double>(std::string(names[k]).size());
    }
    if (any_group_) {
      out_ << "<rect x=\"" << num(lx) << "\" y=\"" << num(ly + 12 - kGroupBand)
           << "\" width=\"12\" height=\"" << num(kGroupBand) << "\" fill=\"" << hex(kGroupColour)
           << "\"/>\n";
      out_ << "<text x=\"" << num(lx + 16) << "\" y=\"" << num(ly + 10)
           << "\" font-size=\"11\" fill=\"#222\">BATCH_P2P group</text>\n";
      lx += 26 + 6.2 * 15;
    }
    std::string note = "numbers: microbatch";
    if (plan_.meta.stages_per_rank > 1) note += "; lighter: later local stage";
    out_ << "<text x=\"" << num(lx) << "\" y=\"" << num(ly + 10)
         << "\" font-size=\"11\" fill=\"#555\">" << note << "</text>\n";
  }

  const Plan& plan_;
  const Timeline& result_;
  const SvgOptions& options_;
  std::ostream& out_;
  double ppu_, top_, rows_bottom_, width_, height_;
  bool any_group_ = false;
  double lane_ = 0.0;  // the copy lane's height and gap, when the plan has copies
};

}  // namespace

std::string picture_problem(const Plan& plan) {
  std::size_t computes = 0;
  for (const auto& list : plan.ranks)
    for (const Action& a : list) computes += is_compute(a.type) ? 1 : 0;
  if (computes <= limits::kMaxDrawnActions) return {};
  return "a picture of " + std::to_string(computes) +
         " compute actions is more than the supported " + std::to_string(limits::kMaxDrawnActions) +
         " (no SVG or Chrome-trace viewer loads it); draw fewer microbatches or ranks";
}

void write_svg(const Plan& plan, const SimResult& result, const SvgOptions& options,
               std::ostream& out) {
  detail::require_rendered(plan, result);
  if (std::string why = picture_problem(plan); !why.empty()) throw InputError(why);
  SvgWriter(plan, result, options, out).write();
}

void write_svg(const Plan& plan, const Timeline& timeline, const SvgOptions& options,
               std::ostream& out) {
  detail::require_timeline(plan, timeline);
  SvgWriter(plan, timeline, options, out).write();
}

}  // namespace pipeplan
