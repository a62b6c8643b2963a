// Comparison of two runs of one model (e.g. cold without and with --prefetch): time to first token, step times,
// stall time and bytes read from storage (from IO records, with `run --io-trace`).
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "analysis/analysis.h"

namespace tt::analysis {

using nlohmann::json;

namespace {

json run_summary(const RunData& r) {
  const trace::TraceContents& t = r.trace;
  json j = {{"run_dir", r.dir}};
  uint64_t ttft = 0, total = 0, gen = 0;
  for (const trace::StepMarker& m : t.steps) {
    if (m.step == 0) ttft = m.end_ns;
    total = std::max(total, m.end_ns);
    if (m.step > 0 && m.end_ns > m.start_ns) gen += m.end_ns - m.start_ns;
  }
  j["time_to_first_token_ns"] = ttft;
  j["prompt_step_ns"] =
      !t.steps.empty() && t.steps[0].end_ns > t.steps[0].start_ns ? t.steps[0].end_ns - t.steps[0].start_ns : 0;
  j["generation_ns"] = gen;
  j["end_ns"] = total;
  j["steps"] = t.steps.size();
  if (r.info.load_ns) j["load_ns"] = *r.info.load_ns;
  if (r.run.contains("options")) {
    const json& o = r.run["options"];
    if (o.contains("prefetch")) j["prefetch"] = o["prefetch"];
    if (o.contains("cold")) j["cold"] = o["cold"];
    if (o.contains("cold_check")) j["cold_check"] = o["cold_check"];
    if (o.contains("prefetch_stats")) j["prefetch_stats"] = o["prefetch_stats"];
  }
  j["io"] = io_summary(t);
  return j;
}

// Wall time of each (step, node)'s op.
std::map<std::pair<uint32_t, uint32_t>, uint64_t> op_durations(const trace::TraceContents& t) {
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> out;
  for (const trace::OpRecord& o : t.ops) out[{o.step, o.node}] = o.end_ns > o.start_ns ? o.end_ns - o.start_ns : 0;
  return out;
}

}  // namespace

StorageReads storage_reads(const trace::TraceContents& t) {
  StorageReads out;
  if (t.io.empty()) return out;
  const auto durations = op_durations(t);
  for (const trace::IoRecord& io : t.io) {
    uint64_t bytes = 0;
    for (const trace::IoWorker& w : io.workers) bytes += w.read_bytes;
    if (bytes == 0) continue;
    auto it = durations.find({io.step, io.node});
    if (it == durations.end()) continue;  // an op the trace lost (a killed run): no time to divide by
    out.bytes += bytes;
    out.ns += it->second;
  }
  return out;
}

json io_summary(const trace::TraceContents& t) {
  if (t.io.empty()) return nullptr;
  const auto ops = op_durations(t);
  uint64_t nonres = 0, pages = 0, faults = 0, minor = 0, storage = 0, stall = 0, io_ops = 0;
  std::map<uint32_t, json> steps;
  for (const trace::IoRecord& io : t.io) {
    ++io_ops;
    uint64_t f = 0, s = 0, mn = 0;
    for (const trace::IoWorker& w : io.workers) f += w.major_faults, s += w.read_bytes, mn += w.minor_faults;
    nonres += io.nonresident_pages;
    pages += io.pages;
    faults += f;
    minor += mn;
    storage += s;
    auto it = ops.find({io.step, io.node});
    const uint64_t d = it != ops.end() ? it->second : 0;
    if (f > 0 || s > 0) stall += d;
    json& st = steps[io.step];
    if (st.is_null())
      st = {{"step", io.step},   {"pages", 0},        {"nonresident_pages", 0},
            {"major_faults", 0}, {"minor_faults", 0}, {"storage_read_bytes", 0},
            {"stall_ns", 0}};
    st["pages"] = st["pages"].get<uint64_t>() + io.pages;
    st["nonresident_pages"] = st["nonresident_pages"].get<uint64_t>() + io.nonresident_pages;
    st["major_faults"] = st["major_faults"].get<uint64_t>() + f;
    st["minor_faults"] = st["minor_faults"].get<uint64_t>() + mn;
    st["storage_read_bytes"] = st["storage_read_bytes"].get<uint64_t>() + s;
    if (f > 0 || s > 0) st["stall_ns"] = st["stall_ns"].get<uint64_t>() + d;
  }
  json js = json::array();
  for (auto& [s, j] : steps) js.push_back(j);
  uint64_t ttft = 0;
  for (const trace::StepMarker& m : t.steps)
    if (m.step == 0) ttft = m.end_ns;
  return {{"ops", io_ops},
          {"page_bytes", t.io.front().page_bytes},
          {"pages", pages},
          {"nonresident_pages", nonres},
          {"nonresident_bytes", nonres * t.io.front().page_bytes},
          {"major_faults", faults},
          {"minor_faults", minor},
          {"storage_read_bytes", storage},
          {"stall_ns", stall},
          {"storage_read_bytes_per_s", storage_reads(t).bytes_per_s()},
          {"time_to_first_token_ns", ttft},
          {"note", "stall: total time of the ops during which a worker took a major fault or read from storage"},
          {"steps", js}};
}

json compare_runs(const RunData& a, const RunData& b) {
  json ja = run_summary(a), jb = run_summary(b);
  auto ratio = [](double x, double y) { return y > 0 ? x / y : 0.0; };
  json c = {{"format", "tensortrace.comparison"}, {"version", 1}, {"a", ja}, {"b", jb}};
  c["time_to_first_token_ratio_b_over_a"] =
      ratio(jb["time_to_first_token_ns"].get<double>(), ja["time_to_first_token_ns"].get<double>());
  c["generation_ratio_b_over_a"] = ratio(jb["generation_ns"].get<double>(), ja["generation_ns"].get<double>());
  // Per-step times side by side.
  json steps = json::array();
  for (size_t i = 0; i < std::min(a.trace.steps.size(), b.trace.steps.size()); ++i) {
    const auto& x = a.trace.steps[i];
    const auto& y = b.trace.steps[i];
    steps.push_back({{"step", x.step}, {"a_ns", x.end_ns - x.start_ns}, {"b_ns", y.end_ns - y.start_ns}});
  }
  c["steps"] = steps;
  return c;
}

std::string render_comparison_text(const json& c) {
  std::string o;
  auto ms = [](const json& ns) { return fmt::format("{:.2f} ms", ns.get<double>() / 1e6); };
  auto mib = [](const json& b) { return format_bytes(b.get<uint64_t>()); };
  o += fmt::format("comparison\n  A: {}\n  B: {}\n", c["a"]["run_dir"].get<std::string>(),
                   c["b"]["run_dir"].get<std::string>());
  for (const char* k : {"a", "b"}) {
    const json& r = c[k];
    o += fmt::format("  {}: prefetch {}, cold {}\n", k, r.contains("prefetch") ? r["prefetch"].dump() : "-",
                     r.contains("cold") ? r["cold"].dump() : "-");
  }
  o += fmt::format("  {:<28} {:>14} {:>14}\n", "", "A", "B");
  o += fmt::format("  {:<28} {:>14} {:>14}\n", "time to first token", ms(c["a"]["time_to_first_token_ns"]),
                   ms(c["b"]["time_to_first_token_ns"]));
  o += fmt::format("  {:<28} {:>14} {:>14}\n", "prompt step", ms(c["a"]["prompt_step_ns"]),
                   ms(c["b"]["prompt_step_ns"]));
  o += fmt::format("  {:<28} {:>14} {:>14}\n", "generation steps", ms(c["a"]["generation_ns"]),
                   ms(c["b"]["generation_ns"]));
  if (!c["a"]["io"].is_null() && !c["b"]["io"].is_null()) {
    const json &x = c["a"]["io"], &y = c["b"]["io"];
    o += fmt::format("  {:<28} {:>14} {:>14}\n", "stall (ops that faulted)", ms(x["stall_ns"]), ms(y["stall_ns"]));
    o += fmt::format("  {:<28} {:>14} {:>14}\n", "major faults", x["major_faults"].get<uint64_t>(),
                     y["major_faults"].get<uint64_t>());
    o += fmt::format("  {:<28} {:>14} {:>14}\n", "bytes read from storage", mib(x["storage_read_bytes"]),
                     mib(y["storage_read_bytes"]));
    o += fmt::format("  {:<28} {:>14} {:>14}\n", "pages not resident before op", x["nonresident_pages"].get<uint64_t>(),
                     y["nonresident_pages"].get<uint64_t>());
    auto pf = [](const json& r) {
      return r.contains("prefetch_stats") && !r["prefetch_stats"].is_null()
                 ? format_bytes(r["prefetch_stats"]["bytes_read"].get<uint64_t>())
                 : std::string("-");
    };
    o += fmt::format("  {:<28} {:>14} {:>14}\n", "read by the prefetch thread", pf(c["a"]), pf(c["b"]));
  } else {
    o += "  (stall time and bytes read from storage need both runs made with --io-trace)\n";
  }
  o += fmt::format("  time to first token B/A: {:.3f}\n", c["time_to_first_token_ratio_b_over_a"].get<double>());
  return o;
}

}  // namespace tt::analysis
