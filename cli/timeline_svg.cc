#include "cli/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cli/format.h"
#include "cli/markup.h"

namespace memplan {

namespace {

constexpr double kKiB = 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The smallest of 1, 2, 2.5, 5, 10 x 10^k that is >= raw.
double NiceStep(double raw) {
  if (!(raw > 0)) {
    return 1;
  }
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw * (1 - 1e-9)) {
      return m * mag;
    }
  }
  return 10 * mag;
}

// "%.0f"/"%.1f"/"%.2f": as few decimals as the step needs.
std::string TickNumber(double v, double step) {
  int decimals = 0;
  while (decimals < 3 && std::fabs(step * std::pow(10.0, decimals) -
                                   std::round(step * std::pow(10.0, decimals))) > 1e-6) {
    ++decimals;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Short numbers for SVG coordinates.
std::string N(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) {
    s.resize(s.size() - 2);
  }
  return s;
}

std::string Truncate(const std::string& s, size_t n) {
  if (s.size() <= n) {
    return s;
  }
  return s.substr(0, n - 3) + "...";
}

const char* PhaseFill(Phase p) {
  switch (p) {
    case Phase::kForward:
      return "#eef3fb";
    case Phase::kBackward:
      return "#fbf1e8";
    case Phase::kOptimizer:
      return "#f1ecf7";
  }
  return "#ffffff";
}

// One drawn column: x range and the point shown there (the highest in its bucket).
struct Column {
  double x0 = 0, x1 = 0;
  const TimelinePoint* p = nullptr;
  int64_t reserved = 0;
};

}  // namespace

const char* CategoryColor(Category c) {
  switch (c) {
    case Category::kParameters:
      return "#4e79a7";
    case Category::kGradients:
      return "#f28e2b";
    case Category::kOptimizerState:
      return "#b07aa1";
    case Category::kSavedActivations:
      return "#59a14f";
    case Category::kTransients:
      return "#edc948";
    case Category::kWorkspaces:
      return "#76b7b2";
  }
  return "#999999";
}

AxisTicks BytesTicks(int64_t max_bytes, int target_count) {
  AxisTicks t;
  const double maxb = std::max<double>(static_cast<double>(max_bytes), 1.0);
  double unit = 1;
  const char* name = "B";
  if (maxb >= kGiB) {
    unit = kGiB, name = "GiB";
  } else if (maxb >= kMiB) {
    unit = kMiB, name = "MiB";
  } else if (maxb >= kKiB) {
    unit = kKiB, name = "KiB";
  }
  const double step =
      std::max(NiceStep(maxb / unit / std::max(target_count - 1, 1)), unit == 1 ? 1.0 : 0.001);
  const int n = static_cast<int>(std::ceil(maxb / unit / step - 1e-9));
  for (int i = 0; i <= std::max(n, 1); ++i) {
    const double v = i * step;
    t.values.push_back(static_cast<int64_t>(std::llround(v * unit)));
    t.labels.push_back(TickNumber(v, step) + " " + name);
  }
  t.top = t.values.back();
  return t;
}

std::vector<int64_t> CountTicks(int64_t max_value, int target_count) {
  std::vector<int64_t> out;
  const double step = std::max(1.0, NiceStep(static_cast<double>(std::max<int64_t>(max_value, 1)) /
                                             std::max(target_count - 1, 1)));
  const int64_t s = static_cast<int64_t>(std::llround(step));
  for (int64_t v = 0; v <= max_value; v += s) {
    out.push_back(v);
  }
  return out;
}

std::string TimelineChart(const Plan& plan, const TimelineStyle& style, int y) {
  const int W = style.width, H = style.height;
  const double left = 86, right = W - 200.0, top = 78, bottom = H - 58.0;
  const double pw = right - left, ph = bottom - top;
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" x=\"0\" y=\"" << y << "\" width=\"" << W
     << "\" height=\"" << H << "\" viewBox=\"0 0 " << W << " " << H
     << "\" font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\" font-size=\"13\">\n";
  os << "<rect width=\"" << W << "\" height=\"" << H << "\" fill=\"#ffffff\"/>\n";
  // Title and the three peaks.
  const Peak& pk = plan.peak;
  const PlanOptions& o = plan.options;
  std::string subtitle = std::string(ModeName(o.mode)) +
                         (plan.batch > 0 ? ", batch " + std::to_string(plan.batch) : "") + ", " +
                         PrecisionName(o.precision);
  if (o.mode == Mode::kTrain) {
    subtitle += std::string(", ") + OptimizerName(o.optimizer) +
                (o.step == StepKind::kFirst ? ", first step" : ", steady step");
  }
  subtitle += "  |  peak allocated " + FormatBytes(pk.allocated_bytes) + ", reserved " +
              FormatBytes(pk.reserved_bytes) + ", device " + FormatBytes(pk.device_bytes);
  os << "<text x=\"" << left << "\" y=\"28\" font-size=\"18\" font-weight=\"bold\" fill=\"#222\">"
     << XmlEscape(Truncate(style.title.empty() ? "memory timeline" : style.title, 90))
     << "</text>\n";
  os << "<text x=\"" << left << "\" y=\"50\" fill=\"#555\">" << XmlEscape(subtitle) << "</text>\n";

  const std::vector<TimelinePoint>& tl = plan.timeline;
  if (tl.empty()) {
    os << "<text x=\"" << N(left + pw / 2) << "\" y=\"" << N(top + ph / 2)
       << "\" text-anchor=\"middle\" fill=\"#777\">no timeline in this plan</text>\n</svg>";
    return os.str();
  }
  // X: the op index within the planned step.
  const int first = tl.front().step;
  const int64_t xmax = std::max(1, tl.back().step - first + 1);
  auto X = [&](double step) { return left + pw * step / static_cast<double>(xmax); };
  // Y: bytes, from 0 to a nice top above everything drawn.
  int64_t ymax = std::max(pk.allocated_bytes, pk.reserved_bytes);
  for (const TimelinePoint& p : tl) {
    ymax = std::max({ymax, p.reserved, p.allocated});
  }
  for (const MeasuredSample& m : style.measured) {
    ymax = std::max({ymax, m.reserved, m.allocated});
  }
  // A budget far above the data would flatten the picture: note it instead.
  const bool budget_on_chart =
      style.budget_bytes >= 0 && static_cast<double>(style.budget_bytes) <= 2.0 * ymax;
  if (budget_on_chart) {
    ymax = std::max(ymax, style.budget_bytes);
  }
  const AxisTicks yt = BytesTicks(static_cast<int64_t>(ymax * 1.06));
  auto Y = [&](double bytes) {
    return bottom - ph * bytes / static_cast<double>(std::max<int64_t>(yt.top, 1));
  };

  // Columns: one per point, or per pixel when there are more points than pixels
  // (each pixel shows its highest point, so peaks survive).
  std::vector<Column> cols;
  for (size_t i = 0; i < tl.size(); ++i) {
    const double x0 = X(tl[i].step - first);
    const double x1 = i + 1 < tl.size() ? X(tl[i + 1].step - first) : X(xmax);
    if (!cols.empty() && x1 - cols.back().x0 < 1.0) {
      Column& c = cols.back();
      c.x1 = x1;
      if (tl[i].allocated > c.p->allocated) {
        c.p = &tl[i];
      }
      c.reserved = std::max(c.reserved, tl[i].reserved);
      continue;
    }
    cols.push_back(Column{x0, x1, &tl[i], tl[i].reserved});
  }

  // Phase bands behind everything, labelled when wide enough.
  os << "<g id=\"phases\">\n";
  size_t run = 0;
  double label_end = -1e9;
  for (size_t i = 1; i <= tl.size(); ++i) {
    if (i < tl.size() && tl[i].phase == tl[run].phase) {
      continue;
    }
    const double x0 = X(tl[run].step - first);
    const double x1 = i < tl.size() ? X(tl[i].step - first) : X(xmax);
    os << "<rect x=\"" << N(x0) << "\" y=\"" << N(top) << "\" width=\"" << N(x1 - x0)
       << "\" height=\"" << N(ph) << "\" fill=\"" << PhaseFill(tl[run].phase) << "\"/>\n";
    // Centred over its band, or beside a narrow band when that overlaps no other label.
    const std::string label = PhaseName(tl[run].phase);
    const double w = 7.5 * label.size();
    double lx0 = (x0 + x1) / 2 - w / 2;
    if (x1 - x0 < w + 8) {
      lx0 = x1 + w <= right ? x0 : x1 - w;
    }
    if (lx0 >= label_end + 6 && lx0 + w <= right + 2) {
      os << "<text x=\"" << N(lx0 + w / 2) << "\" y=\"" << N(top - 8)
         << "\" text-anchor=\"middle\" fill=\"#666\" font-style=\"italic\">" << label
         << "</text>\n";
      label_end = lx0 + w;
    }
    if (i < tl.size()) {
      os << "<line x1=\"" << N(x1) << "\" y1=\"" << N(top) << "\" x2=\"" << N(x1) << "\" y2=\""
         << N(bottom) << "\" stroke=\"#bbb\" stroke-dasharray=\"3,3\"/>\n";
    }
    run = i;
  }
  os << "</g>\n";

  // Grid and y axis labels.
  os << "<g id=\"y-axis\" fill=\"#444\" font-size=\"12\">\n";
  for (size_t i = 0; i < yt.values.size(); ++i) {
    const double yy = Y(static_cast<double>(yt.values[i]));
    os << "<line x1=\"" << N(left) << "\" y1=\"" << N(yy) << "\" x2=\"" << N(right) << "\" y2=\""
       << N(yy) << "\" stroke=\"#000\" stroke-opacity=\"0.08\"/>\n";
    os << "<text x=\"" << N(left - 8) << "\" y=\"" << N(yy + 4) << "\" text-anchor=\"end\">"
       << yt.labels[i] << "</text>\n";
  }
  os << "<text transform=\"translate(" << N(20) << "," << N(top + ph / 2)
     << ") rotate(-90)\" text-anchor=\"middle\" fill=\"#444\" font-size=\"13\">memory</text>\n";
  os << "</g>\n";

  // Stacked areas, parameters at the bottom.
  os << "<g id=\"areas\">\n";
  std::vector<int64_t> base(cols.size(), 0);
  for (int c = 0; c < kNumCategories; ++c) {
    std::vector<int64_t> topv(cols.size());
    bool any = false;
    for (size_t i = 0; i < cols.size(); ++i) {
      topv[i] = base[i] + cols[i].p->live.bytes[c];
      any |= cols[i].p->live.bytes[c] > 0;
    }
    std::ostringstream d;
    for (size_t i = 0; i < cols.size(); ++i) {
      d << (i == 0 ? "M" : "L") << N(cols[i].x0) << " " << N(Y(topv[i]));
      if (cols[i].x1 - cols[i].x0 >= 2) {
        d << "H" << N(cols[i].x1);
      }
    }
    if (cols.back().x1 - cols.back().x0 < 2) {
      d << "H" << N(cols.back().x1);
    }
    for (size_t i = cols.size(); i-- > 0;) {
      if (cols[i].x1 - cols[i].x0 >= 2 || i + 1 == cols.size()) {
        d << "L" << N(cols[i].x1) << " " << N(Y(base[i]));
      }
      d << "L" << N(cols[i].x0) << " " << N(Y(base[i]));
    }
    d << "Z";
    const Category cat = static_cast<Category>(c);
    os << "<path class=\"area\" data-category=\"" << CategoryName(cat) << "\" d=\"" << d.str()
       << "\" fill=\"" << CategoryColor(cat) << "\" fill-opacity=\"0.85\""
       << (any ? "" : " visibility=\"hidden\"") << "><title>" << CategoryName(cat)
       << "</title></path>\n";
    base = topv;
  }
  os << "</g>\n";

  // Allocated and reserved lines.
  auto line = [&](bool reserved) {
    std::ostringstream d;
    for (size_t i = 0; i < cols.size(); ++i) {
      const double v = reserved ? cols[i].reserved : cols[i].p->allocated;
      d << (i == 0 ? "M" : "L") << N(cols[i].x0) << " " << N(Y(v));
      if (cols[i].x1 - cols[i].x0 >= 2 || i + 1 == cols.size()) {
        d << "H" << N(cols[i].x1);
      }
    }
    return d.str();
  };
  os << "<path id=\"reserved\" d=\"" << line(true)
     << "\" fill=\"none\" stroke=\"#555\" stroke-width=\"1.6\" stroke-dasharray=\"6,3\"/>\n";
  os << "<path id=\"allocated\" d=\"" << line(false)
     << "\" fill=\"none\" stroke=\"#111\" stroke-width=\"1.4\"/>\n";

  // The measured run: each phase's samples over the plan's band of that phase
  // (by time within the phase), samples of unknown phase over the whole step.
  if (!style.measured.empty()) {
    double band0[4] = {1e300, 1e300, 1e300, X(0)};
    double band1[4] = {-1e300, -1e300, -1e300, X(xmax)};
    for (size_t i = 0; i < tl.size(); ++i) {
      const int ph = static_cast<int>(tl[i].phase);
      band0[ph] = std::min(band0[ph], X(tl[i].step - first));
      band1[ph] = std::max(band1[ph], i + 1 < tl.size() ? X(tl[i + 1].step - first) : X(xmax));
    }
    double t0[4] = {1e300, 1e300, 1e300, 1e300};
    double t1[4] = {-1e300, -1e300, -1e300, -1e300};
    for (const MeasuredSample& m : style.measured) {
      const int ph = m.phase >= 0 && m.phase < 3 ? m.phase : 3;
      t0[ph] = std::min(t0[ph], m.seconds);
      t1[ph] = std::max(t1[ph], m.seconds);
    }
    auto mx = [&](const MeasuredSample& m) {
      int ph = m.phase >= 0 && m.phase < 3 ? m.phase : 3;
      if (band1[ph] < band0[ph]) ph = 3;  // the plan has no such phase
      const double span = t1[ph] - t0[ph];
      const double f = span > 0 ? (m.seconds - t0[ph]) / span : 0.5;
      return band0[ph] + f * (band1[ph] - band0[ph]);
    };
    std::ostringstream da;
    std::ostringstream dr;
    for (size_t i = 0; i < style.measured.size(); ++i) {
      const MeasuredSample& m = style.measured[i];
      const double x = mx(m);
      da << (i == 0 ? "M" : "L") << N(x) << " " << N(Y(static_cast<double>(m.allocated)));
      dr << (i == 0 ? "M" : "L") << N(x) << " " << N(Y(static_cast<double>(m.reserved)));
    }
    os << "<g id=\"measured\"><path id=\"measured-reserved\" d=\"" << dr.str()
       << "\" fill=\"none\" stroke=\"#e8590c\" stroke-width=\"1.4\" stroke-dasharray=\"4,3\"/>\n"
       << "<path id=\"measured-allocated\" d=\"" << da.str()
       << "\" fill=\"none\" stroke=\"#e8590c\" stroke-width=\"2\"><title>"
       << XmlEscape(style.measured_label.empty() ? std::string("measured") : style.measured_label)
       << "</title></path></g>\n";
  }

  // Budget line.
  if (style.budget_bytes >= 0) {
    const std::string label = style.budget_label.empty()
                                  ? "budget " + FormatBytes(style.budget_bytes)
                                  : style.budget_label;
    if (budget_on_chart) {
      const double yb = Y(static_cast<double>(style.budget_bytes));
      os << "<g id=\"budget\"><line x1=\"" << N(left) << "\" y1=\"" << N(yb) << "\" x2=\""
         << N(right) << "\" y2=\"" << N(yb)
         << "\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"8,4\"/>\n"
         << "<text x=\"" << N(left + 6) << "\" y=\"" << N(yb - 6)
         << "\" fill=\"#d62728\" font-weight=\"bold\" stroke=\"#fff\" stroke-width=\"4\" "
            "paint-order=\"stroke\">"
         << XmlEscape(label) << "</text></g>\n";
    } else {
      os << "<g id=\"budget\"><text x=\"" << N(left + 6) << "\" y=\"" << N(top + 16)
         << "\" fill=\"#d62728\" font-weight=\"bold\" stroke=\"#fff\" stroke-width=\"4\" "
            "paint-order=\"stroke\">\u2191 "
         << XmlEscape(label) << " (above the chart)</text></g>\n";
    }
  }

  // The peak: the point of the peak's op with the most allocated, else the highest.
  const TimelinePoint* peak = nullptr;
  for (const TimelinePoint& p : tl) {
    if (p.node == pk.node && (peak == nullptr || p.allocated > peak->allocated)) {
      peak = &p;
    }
  }
  if (peak == nullptr) {
    for (const TimelinePoint& p : tl) {
      if (peak == nullptr || p.allocated > peak->allocated) {
        peak = &p;
      }
    }
  }
  {
    const double px = X(peak->step - first + 0.5);
    const double py = Y(static_cast<double>(std::max(pk.allocated_bytes, peak->allocated)));
    const std::string label = "peak " + FormatBytes(pk.allocated_bytes) + " at " +
                              Truncate(pk.node.empty() ? peak->node : pk.node, 44) + " (" +
                              PhaseName(pk.phase) + ")";
    // Beside the marker where it fits, else as near as the plot allows.
    const double text_w = 8.0 * label.size();
    std::string anchor = "start";
    double tx = px + 10;
    if (tx + text_w > right) {
      if (px - 10 - text_w >= left) {
        anchor = "end";
        tx = px - 10;
      } else {
        tx = std::max(left + 4, right - 4 - text_w);
      }
    }
    double ly = std::max(top + 16, py - 14);
    // Keep the text off the reserved line.
    const double yr = Y(static_cast<double>(std::max(pk.reserved_bytes, peak->reserved)));
    if (ly - 13 < yr && yr < ly + 4) {
      ly = yr - 14 >= top + 14 ? yr - 7 : yr + 18;
    }
    os << "<g id=\"peak\"><line x1=\"" << N(px) << "\" y1=\"" << N(py) << "\" x2=\"" << N(px)
       << "\" y2=\"" << N(bottom) << "\" stroke=\"#d62728\" stroke-opacity=\"0.5\"/>\n"
       << "<circle cx=\"" << N(px) << "\" cy=\"" << N(py)
       << "\" r=\"5\" fill=\"#d62728\" stroke=\"#fff\" stroke-width=\"1.5\"/>\n";
    os << "<text x=\"" << N(tx) << "\" y=\"" << N(ly) << "\" text-anchor=\"" << anchor
       << "\" font-weight=\"bold\" fill=\"#222\" stroke=\"#fff\" stroke-width=\"4\" "
          "paint-order=\"stroke\">"
       << XmlEscape(label) << "</text></g>\n";
  }

  // Axes and x ticks.
  os << "<g id=\"x-axis\" fill=\"#444\" font-size=\"12\">\n";
  os << "<line x1=\"" << N(left) << "\" y1=\"" << N(bottom) << "\" x2=\"" << N(right) << "\" y2=\""
     << N(bottom) << "\" stroke=\"#333\"/>\n";
  os << "<line x1=\"" << N(left) << "\" y1=\"" << N(top) << "\" x2=\"" << N(left) << "\" y2=\""
     << N(bottom) << "\" stroke=\"#333\"/>\n";
  for (int64_t v : CountTicks(xmax, 10)) {
    const double xx = X(static_cast<double>(v));
    os << "<line x1=\"" << N(xx) << "\" y1=\"" << N(bottom) << "\" x2=\"" << N(xx) << "\" y2=\""
       << N(bottom + 5) << "\" stroke=\"#333\"/>\n";
    os << "<text x=\"" << N(xx) << "\" y=\"" << N(bottom + 19) << "\" text-anchor=\"middle\">" << v
       << "</text>\n";
  }
  os << "<text x=\"" << N(left + pw / 2) << "\" y=\"" << N(bottom + 42)
     << "\" text-anchor=\"middle\" font-size=\"13\">op index</text>\n";
  os << "</g>\n";

  // Legend on the right: categories (top of the stack first), then the lines.
  os << "<g id=\"legend\" font-size=\"13\" fill=\"#222\">\n";
  double ly = top + 4;
  const double lx = right + 22;
  for (int c = kNumCategories - 1; c >= 0; --c) {
    const Category cat = static_cast<Category>(c);
    os << "<rect x=\"" << N(lx) << "\" y=\"" << N(ly) << "\" width=\"16\" height=\"12\" fill=\""
       << CategoryColor(cat) << "\" fill-opacity=\"0.85\"/>\n"
       << "<text x=\"" << N(lx + 24) << "\" y=\"" << N(ly + 11) << "\">" << CategoryName(cat)
       << "</text>\n";
    ly += 22;
  }
  ly += 8;
  os << "<line x1=\"" << N(lx) << "\" y1=\"" << N(ly + 6) << "\" x2=\"" << N(lx + 16) << "\" y2=\""
     << N(ly + 6) << "\" stroke=\"#111\" stroke-width=\"1.6\"/>\n"
     << "<text x=\"" << N(lx + 24) << "\" y=\"" << N(ly + 11) << "\">allocated</text>\n";
  ly += 22;
  os << "<line x1=\"" << N(lx) << "\" y1=\"" << N(ly + 6) << "\" x2=\"" << N(lx + 16) << "\" y2=\""
     << N(ly + 6) << "\" stroke=\"#555\" stroke-width=\"1.6\" stroke-dasharray=\"6,3\"/>\n"
     << "<text x=\"" << N(lx + 24) << "\" y=\"" << N(ly + 11) << "\">reserved</text>\n";
  ly += 22;
  if (style.budget_bytes >= 0) {
    os << "<line x1=\"" << N(lx) << "\" y1=\"" << N(ly + 6) << "\" x2=\"" << N(lx + 16)
       << "\" y2=\"" << N(ly + 6)
       << "\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\n"
       << "<text x=\"" << N(lx + 24) << "\" y=\"" << N(ly + 11) << "\">budget</text>\n";
    ly += 22;
  }
  if (!style.measured.empty()) {
    os << "<line x1=\"" << N(lx) << "\" y1=\"" << N(ly + 6) << "\" x2=\"" << N(lx + 16)
       << "\" y2=\"" << N(ly + 6) << "\" stroke=\"#e8590c\" stroke-width=\"2\"/>\n"
       << "<text x=\"" << N(lx + 24) << "\" y=\"" << N(ly + 11) << "\">run allocated</text>\n";
    ly += 22;
    os << "<line x1=\"" << N(lx) << "\" y1=\"" << N(ly + 6) << "\" x2=\"" << N(lx + 16)
       << "\" y2=\"" << N(ly + 6)
       << "\" stroke=\"#e8590c\" stroke-width=\"1.4\" stroke-dasharray=\"4,3\"/>\n"
       << "<text x=\"" << N(lx + 24) << "\" y=\"" << N(ly + 11) << "\">run reserved</text>\n";
    ly += 22;
  }
  os << "<circle cx=\"" << N(lx + 8) << "\" cy=\"" << N(ly + 6) << "\" r=\"5\" fill=\"#d62728\"/>\n"
     << "<text x=\"" << N(lx + 24) << "\" y=\"" << N(ly + 11) << "\">allocated peak</text>\n";
  ly += 30;
  for (Phase ph_ : {Phase::kForward, Phase::kBackward, Phase::kOptimizer}) {
    if (o.mode != Mode::kTrain && ph_ != Phase::kForward) {
      break;
    }
    os << "<rect x=\"" << N(lx) << "\" y=\"" << N(ly) << "\" width=\"16\" height=\"12\" fill=\""
       << PhaseFill(ph_) << "\" stroke=\"#bbb\"/>\n"
       << "<text x=\"" << N(lx + 24) << "\" y=\"" << N(ly + 11) << "\" fill=\"#555\">"
       << PhaseName(ph_) << " phase</text>\n";
    ly += 22;
  }
  os << "</g>\n</svg>";
  return os.str();
}

std::string TimelineDocument(const std::vector<std::string>& charts, int width, int height) {
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" viewBox=\"0 0 " << width << " " << height << "\">\n";
  for (const std::string& c : charts) {
    os << c << "\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace memplan
