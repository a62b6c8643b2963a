// SVG figures of the analysis report, written by hand: a miss-ratio curve, bytes per step, time per layer.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>

#include "analysis/analysis.h"
#include "core/error.h"

namespace tt::analysis {

namespace {

constexpr int kW = 720, kH = 400, kL = 70, kR = 150, kT = 40, kB = 60;
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}

std::string header(const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
      kW, kH, kW, kH, kL, esc(title));
}

std::string axes(const std::string& xlabel, const std::string& ylabel) {
  return fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n"
      "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" stroke=\"black\"/>\n"
      "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">{6}</text>\n"
      "<text x=\"16\" y=\"{7}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {7})\">{8}</text>\n",
      kL, kH - kB, kW - kR, kT, (kL + kW - kR) / 2, kH - 15, esc(xlabel), (kT + kH - kB) / 2, esc(ylabel));
}

void save(const std::string& path, const std::string& svg) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) fail("cannot write '{}'", path);
  f << svg;
}

using Series = std::map<std::string, std::vector<std::pair<double, double>>>;

// A polyline with dots for each series (points sorted by x), and its legend entry.
std::string series_lines(Series& series, const std::function<double(double)>& px,
                         const std::function<double(double)>& py) {
  std::string s;
  int ci = 0;
  for (auto& [name, pts] : series) {
    std::sort(pts.begin(), pts.end());
    const char* col = kColors[ci % 6];
    std::string path;
    for (auto [x, y] : pts) path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ", px(x), py(y));
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", col, path);
    for (auto [x, y] : pts)
      s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", px(x), py(y), col);
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
        kW - kR + 10, kT + 16 * ci, col, kW - kR + 24, kT + 16 * ci + 9, esc(name));
    ++ci;
  }
  return s;
}

// Labels 0, 0.25, ... 1 on a y axis of ratios.
std::string unit_ticks(const std::function<double(double)>& py) {
  std::string s;
  for (int i = 0; i <= 4; ++i)
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.2f}</text>\n", kL - 4, py(i / 4.0) + 4,
                     i / 4.0);
  return s;
}

// Lines over a log2 x axis (capacity) with y in [0, 1].
std::string mrc_svg(const Report& r) {
  Series series;
  for (const MissPoint& m : r.hot_cold.lru_miss_ratio_curve)
    series["lru (reuse distances)"].push_back({static_cast<double>(m.capacity), m.miss_ratio});
  if (r.cache_sim)
    for (const CacheResult& x : r.cache_sim->results)
      series[std::string("sim ") + policy_name(x.policy)].push_back({static_cast<double>(x.capacity), x.miss_ratio()});
  double xmin = 1e300, xmax = 0;
  for (auto& [n, pts] : series)
    for (auto [x, y] : pts) xmin = std::min(xmin, x), xmax = std::max(xmax, x);
  if (xmax <= xmin) xmax = xmin * 2 + 1;
  const double lx0 = std::log2(std::max(1.0, xmin)), lx1 = std::log2(std::max(2.0, xmax));
  auto px = [&](double x) {
    return kL + (std::log2(std::max(1.0, x)) - lx0) / std::max(1e-9, lx1 - lx0) * (kW - kL - kR);
  };
  auto py = [&](double y) { return kH - kB - y * (kH - kB - kT); };
  std::string s = header("Miss ratio of the model-file reads by cache capacity");
  s += axes("cache capacity (log scale)", "miss ratio");
  s += unit_ticks(py);
  for (double c = std::exp2(std::floor(lx0)); c <= xmax * 1.01; c *= 4)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(c), kH - kB + 15,
                     esc(format_bytes(static_cast<uint64_t>(c))));
  s += series_lines(series, px, py);
  return s + "</svg>\n";
}

// Stacked bars, one per row, with one segment per series.
std::string bars_svg(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                     const std::vector<std::string>& labels, const std::vector<std::string>& series,
                     const std::vector<std::vector<double>>& values, const std::string& unit, double scale) {
  double ymax = 0;
  for (const auto& row : values) {
    double sum = 0;
    for (double v : row) sum += v;
    ymax = std::max(ymax, sum);
  }
  if (ymax <= 0) ymax = 1;
  std::string s = header(title);
  s += axes(xlabel, ylabel);
  auto py = [&](double y) { return kH - kB - y / ymax * (kH - kB - kT); };
  for (int i = 0; i <= 4; ++i)
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}{}</text>\n", kL - 4, py(ymax * i / 4) + 4,
                     ymax * i / 4 / scale, unit);
  const double slot = static_cast<double>(kW - kL - kR) / std::max<size_t>(1, labels.size());
  const size_t every = std::max<size_t>(1, labels.size() / 20);
  for (size_t i = 0; i < labels.size(); ++i) {
    double base = 0;
    for (size_t k = 0; k < series.size(); ++k) {
      const double v = values[i][k];
      if (v <= 0) continue;
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} {}: "
          "{:.4g}{}</title></rect>\n",
          kL + i * slot + slot * 0.1, py(base + v), slot * 0.8, py(base) - py(base + v), kColors[k % 6], esc(labels[i]),
          esc(series[k]), v / scale, unit);
      base += v;
    }
    if (i % every == 0)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", kL + (i + 0.5) * slot,
                       kH - kB + 15, esc(labels[i]));
  }
  for (size_t k = 0; k < series.size(); ++k)
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
        kW - kR + 10, kT + 16 * k, kColors[k % 6], kW - kR + 24, kT + 16 * k + 9, esc(series[k]));
  return s + "</svg>\n";
}

// Layer x expert heatmap of picks, each cell's shade its picks over the layer's uniform share (white: never used).
std::string expert_picks_svg(const MoeSection& m) {
  const size_t rows = m.layers.size(), cols = static_cast<size_t>(m.shape.n_expert);
  const double cell_w = static_cast<double>(kW - kL - kR) / std::max<size_t>(cols, 1);
  const double cell_h = static_cast<double>(kH - kT - kB) / std::max<size_t>(rows, 1);
  std::string s = header("Expert picks per layer (darker: more than the uniform share; white: never used)");
  s += axes("expert", "layer");
  double hottest = 1;
  for (const LayerExperts& l : m.layers) hottest = std::max(hottest, l.hottest_over_uniform);
  for (size_t r = 0; r < rows; ++r) {
    const LayerExperts& l = m.layers[r];
    const double uniform =
        static_cast<double>(std::accumulate(l.picks.begin(), l.picks.end(), uint64_t{0})) / std::max<size_t>(cols, 1);
    for (size_t c = 0; c < cols; ++c) {
      const double rel = uniform > 0 ? static_cast<double>(l.picks[c]) / uniform : 0.0;
      const int shade = l.picks[c] == 0 ? 255 : static_cast<int>(235 - 205 * std::min(1.0, rel / hottest));
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"rgb({},{},255)\" "
          "stroke=\"#ddd\"><title>layer {} expert {}: {} picks ({:.2f}x uniform)</title></rect>\n",
          kL + c * cell_w, kT + r * cell_h, cell_w, cell_h, shade, shade, l.layer, c, l.picks[c], rel);
    }
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kL - 4, kT + (r + 0.5) * cell_h + 4,
                     l.layer);
  }
  const size_t every = std::max<size_t>(1, cols / 16);
  for (size_t c = 0; c < cols; c += every)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", kL + (c + 0.5) * cell_w,
                     kH - kB + 15, c);
  return s + "</svg>\n";
}

// Hit rate of the expert-cache replay against the cache's capacity, one line per policy.
std::string expert_cache_svg(const MoeSection& m) {
  Series series;
  double xmax = 1;
  for (const ExpertCacheResult& c : m.cache) {
    series[policy_name(c.policy)].push_back({static_cast<double>(c.capacity_bytes), c.hit_rate()});
    xmax = std::max(xmax, static_cast<double>(c.capacity_bytes));
  }
  auto px = [&](double x) { return kL + x / xmax * (kW - kL - kR); };
  auto py = [&](double y) { return kH - kB - y * (kH - kB - kT); };
  std::string s = header(fmt::format("Expert cache hit rate by capacity ({} scope)", scope_name(m.scope)));
  s += axes("cache capacity", "hit rate");
  s += unit_ticks(py);
  for (int i = 0; i <= 4; ++i) {
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(xmax * i / 4), kH - kB + 15,
                     esc(format_bytes(static_cast<uint64_t>(xmax * i / 4))));
  }
  s += series_lines(series, px, py);
  return s + "</svg>\n";
}

}  // namespace

std::vector<std::string> write_figures(const Report& r, const std::string& dir) {
  std::vector<std::string> files;
  save(dir + "/miss-ratio-curve.svg", mrc_svg(r));
  files.push_back("miss-ratio-curve.svg");

  std::vector<std::string> pools;  // the columns of PoolTotals
  for (int p = 0; p < kNumPools; ++p) pools.push_back(pool_name(static_cast<Pool>(p)));
  std::vector<std::string> labels;
  std::vector<std::vector<double>> values;
  for (const StepTotals& st : r.sources.steps) {
    labels.push_back(std::to_string(st.step));
    values.emplace_back(st.totals.bytes.begin(), st.totals.bytes.end());
  }
  save(dir + "/bytes-per-step.svg",
       bars_svg("Bytes read per step, by source", "step", "bytes read", labels, pools, values, " MiB", 1048576.0));
  files.push_back("bytes-per-step.svg");

  labels.clear();
  values.clear();
  for (const auto& [layer, t] : r.sources.layers) {
    labels.push_back(layer >= 0 ? std::to_string(layer) : "none");
    std::vector<double> row;
    for (double ns : t.ns) row.push_back(std::floor(ns));  // whole ns, as the JSON report gives them
    values.push_back(row);
  }
  save(dir + "/time-per-layer.svg", bars_svg("Op time per layer (split by the source of the bytes read)", "layer",
                                             "time", labels, pools, values, " ms", 1e6));
  files.push_back("time-per-layer.svg");
  if (r.moe) {
    save(dir + "/expert-picks.svg", expert_picks_svg(*r.moe));
    files.push_back("expert-picks.svg");
    if (!r.moe->cache.empty()) {
      save(dir + "/expert-cache.svg", expert_cache_svg(*r.moe));
      files.push_back("expert-cache.svg");
    }
  }
  return files;
}

}  // namespace tt::analysis
