#include "cli/sweep_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cli/format.h"
#include "cli/report.h"
#include "cli/timeline_svg.h"

namespace memplan {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

const char* CurveColor(size_t i) {
  static const char* kColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759"};
  return kColors[i % 5];
}

}  // namespace

std::string SweepSvg(const std::vector<SweepCurve>& curves, const SweepChartStyle& style) {
  const int W = style.width, H = style.height;
  const double left = 86, right = W - 190.0, top = 70, bottom = H - 62.0;
  const double pw = right - left, ph = bottom - top;
  int64_t xlo = INT64_MAX, xhi = 0, ymax = 0;
  for (const SweepCurve& c : curves) {
    for (const SweepPoint& p : c.points) {
      xlo = std::min(xlo, p.value);
      xhi = std::max(xhi, p.value);
      ymax = std::max({ymax, p.device_bytes, p.reserved_bytes, p.allocated_bytes});
    }
  }
  if (xlo == INT64_MAX) xlo = xhi = 1;
  const bool budget_on_chart = style.budget_bytes > 0 && style.budget_bytes <= 2 * ymax;
  if (budget_on_chart) ymax = std::max(ymax, style.budget_bytes);
  const AxisTicks yt = BytesTicks(static_cast<int64_t>(static_cast<double>(ymax) * 1.06));
  const bool log_x = style.log_x && xlo > 0 && xhi > xlo;
  auto X = [&](double v) {
    if (xhi == xlo) return left + pw / 2;
    if (log_x) return left + pw * std::log(v / xlo) / std::log(static_cast<double>(xhi) / xlo);
    return left + pw * (v - xlo) / static_cast<double>(xhi - xlo);
  };
  auto Y = [&](double b) {
    return bottom - ph * b / static_cast<double>(std::max<int64_t>(yt.top, 1));
  };
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
     << "\" viewBox=\"0 0 " << W << " " << H
     << "\" font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\" font-size=\"13\">\n"
     << "<rect width=\"" << W << "\" height=\"" << H << "\" fill=\"#ffffff\"/>\n"
     << "<text x=\"" << left << "\" y=\"28\" font-size=\"17\" font-weight=\"bold\" fill=\"#222\">"
     << XmlEscape(style.title.substr(0, 140)) << "</text>\n"
     << "<text x=\"" << left << "\" y=\"50\" fill=\"#555\">peak memory against "
     << XmlEscape(style.dim) << ": device (solid), reserved (dashed), allocated (dotted)</text>\n";
  // Y grid and labels.
  for (size_t i = 0; i < yt.values.size(); ++i) {
    const double y = Y(static_cast<double>(yt.values[i]));
    os << "<line x1=\"" << left << "\" x2=\"" << right << "\" y1=\"" << Num(y) << "\" y2=\""
       << Num(y) << "\" stroke=\"#e5e5e5\"/>\n<text x=\"" << left - 8 << "\" y=\"" << Num(y + 4)
       << "\" text-anchor=\"end\" fill=\"#444\">" << XmlEscape(yt.labels[i]) << "</text>\n";
  }
  // X ticks: the swept values (at most ~12 labels).
  std::vector<int64_t> xs;
  for (const SweepCurve& c : curves) {
    for (const SweepPoint& p : c.points) xs.push_back(p.value);
  }
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  const size_t every = std::max<size_t>(1, (xs.size() + 11) / 12);
  for (size_t i = 0; i < xs.size(); i += every) {
    const double x = X(static_cast<double>(xs[i]));
    os << "<line x1=\"" << Num(x) << "\" x2=\"" << Num(x) << "\" y1=\"" << bottom << "\" y2=\""
       << bottom + 5 << "\" stroke=\"#444\"/>\n<text x=\"" << Num(x) << "\" y=\"" << bottom + 20
       << "\" text-anchor=\"middle\" fill=\"#444\">" << xs[i] << "</text>\n";
  }
  os << "<line x1=\"" << left << "\" x2=\"" << right << "\" y1=\"" << bottom << "\" y2=\"" << bottom
     << "\" stroke=\"#444\"/>\n<line x1=\"" << left << "\" x2=\"" << left << "\" y1=\"" << top
     << "\" y2=\"" << bottom << "\" stroke=\"#444\"/>\n<text x=\"" << Num(left + pw / 2)
     << "\" y=\"" << bottom + 44 << "\" text-anchor=\"middle\" fill=\"#222\">"
     << XmlEscape(style.dim) << (log_x ? " (log scale)" : "") << "</text>\n";
  // Budget and usable lines.
  if (budget_on_chart) {
    const double y = Y(static_cast<double>(style.budget_bytes));
    os << "<line x1=\"" << left << "\" x2=\"" << right << "\" y1=\"" << Num(y) << "\" y2=\""
       << Num(y) << "\" stroke=\"#d62728\" stroke-width=\"2\"/>\n<text x=\"" << right + 6
       << "\" y=\"" << Num(y + 4) << "\" fill=\"#d62728\">budget "
       << XmlEscape(FormatBytes(style.budget_bytes)) << "</text>\n";
    if (style.usable_bytes > 0 && style.usable_bytes < style.budget_bytes) {
      const double yu = Y(static_cast<double>(style.usable_bytes));
      os << "<line x1=\"" << left << "\" x2=\"" << right << "\" y1=\"" << Num(yu) << "\" y2=\""
         << Num(yu) << "\" stroke=\"#d62728\" stroke-dasharray=\"3 3\"/>\n<text x=\"" << right + 6
         << "\" y=\"" << Num(yu + 16) << "\" fill=\"#d62728\">usable "
         << XmlEscape(FormatBytes(style.usable_bytes)) << "</text>\n";
    }
  } else if (style.budget_bytes > 0) {
    os << "<text x=\"" << right << "\" y=\"" << top - 6 << "\" text-anchor=\"end\" "
       << "fill=\"#d62728\">budget " << XmlEscape(FormatBytes(style.budget_bytes))
       << " (above the chart)</text>\n";
  }
  // Curves.
  for (size_t ci = 0; ci < curves.size(); ++ci) {
    const SweepCurve& c = curves[ci];
    const char* color = CurveColor(ci);
    struct Line {
      int64_t SweepPoint::*field;
      const char* dash;
    };
    for (const Line& l : {Line{&SweepPoint::device_bytes, ""},
                          Line{&SweepPoint::reserved_bytes, " stroke-dasharray=\"8 4\""},
                          Line{&SweepPoint::allocated_bytes, " stroke-dasharray=\"2 3\""}}) {
      os << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\"" << l.dash
         << " points=\"";
      for (const SweepPoint& p : c.points) {
        os << Num(X(static_cast<double>(p.value))) << "," << Num(Y(static_cast<double>(p.*l.field)))
           << " ";
      }
      os << "\"/>\n";
    }
    for (const SweepPoint& p : c.points) {
      os << "<circle cx=\"" << Num(X(static_cast<double>(p.value))) << "\" cy=\""
         << Num(Y(static_cast<double>(p.device_bytes))) << "\" r=\"3\" fill=\"" << color
         << "\"><title>" << XmlEscape(PrecisionName(c.precision)) << " " << XmlEscape(style.dim)
         << "=" << p.value << ": device " << XmlEscape(FormatBytes(p.device_bytes))
         << "</title></circle>\n";
    }
    if (c.largest_fitting > 0 && budget_on_chart) {
      const double x =
          X(static_cast<double>(std::clamp(c.largest_fitting, xlo, std::max(xlo, xhi))));
      os << "<line x1=\"" << Num(x) << "\" x2=\"" << Num(x) << "\" y1=\"" << top << "\" y2=\""
         << bottom << "\" stroke=\"" << color << "\" stroke-dasharray=\"1 4\"/>\n";
    }
    // Legend.
    const double ly = top + 10 + 40.0 * static_cast<double>(ci);
    os << "<line x1=\"" << right + 10 << "\" x2=\"" << right + 34 << "\" y1=\"" << Num(ly + 40)
       << "\" y2=\"" << Num(ly + 40) << "\" stroke=\"" << color << "\" stroke-width=\"3\"/>\n"
       << "<text x=\"" << right + 40 << "\" y=\"" << Num(ly + 44) << "\" fill=\"#222\">"
       << XmlEscape(PrecisionName(c.precision)) << "</text>\n";
    if (c.largest_fitting >= 0) {
      os << "<text x=\"" << right + 40 << "\" y=\"" << Num(ly + 60) << "\" fill=\"#555\">"
         << "fits up to " << XmlEscape(style.dim) << "=" << c.largest_fitting << "</text>\n";
    }
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace memplan
