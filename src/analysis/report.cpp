// Text rendering of the analysis report (analysis.h).
#include <fmt/format.h>

#include <algorithm>

#include "analysis/analysis.h"

namespace tt::analysis {

using nlohmann::json;

namespace {

std::string pct(double x) { return fmt::format("{:.1f}%", 100.0 * x); }
std::string mib(uint64_t b) { return format_bytes(b); }
std::string gbps(double bps) { return fmt::format("{:.2f} GB/s", bps / 1e9); }
std::string ms(uint64_t ns) { return fmt::format("{:.3f} ms", ns / 1e6); }

void order_line(std::string& o, const std::string& label, const json& j) {
  o += fmt::format(
      "  {:<10} {:>7} reads {:>11}  forward {:>6}  contiguous {:>6}  backward moves {:>5}  layers ascending in {} "
      "of {} steps\n",
      label, j["reads"].get<uint64_t>(), mib(j["bytes"]), pct(j["forward_fraction"]), pct(j["contiguous_fraction"]),
      j["backward_moves"].get<uint64_t>(), j["steps_with_layers_ascending"].get<uint64_t>(),
      j["steps"].get<uint64_t>());
}

}  // namespace

std::string render_text(const json& r) {
  std::string o;
  o += fmt::format("analysis of {}\n", r["run_dir"].get<std::string>());
  if (r.contains("model"))
    o += fmt::format("model {} ({}), {} steps, {} ops, {} threads\n", r["model"]["file"].get<std::string>(),
                     mib(r["model"]["size_bytes"]), r["n_steps"].get<uint64_t>(), r["n_ops"].get<uint64_t>(),
                     r["threads"].get<int>());
  if (!r["trace_complete"].get<bool>())
    o += fmt::format("note: the trace is incomplete ({})\n", r["trace_stop_reason"].get<std::string>());

  // Order.
  const json& ord = r["order"];
  o += "\n== Order of MODEL_FILE reads ==\n";
  order_line(o, "run", ord["run"]);
  for (auto& [p, j] : ord["phases"].items()) order_line(o, p, j);
  o += "  jump histogram (gap from the end of one read to the start of the next, whole run):\n   ";
  for (auto& [bin, n] : ord["run"]["jump_histogram"].items())
    if (n.get<uint64_t>()) o += fmt::format(" [{}]={}", bin, n.get<uint64_t>());
  o += "\n";
  const json& rep = ord["repeat"];
  o += fmt::format(
      "  step-to-step repeat: {} of {} steps read exactly the ranges of the previous step ({}); "
      "{} read the same tensors in the same order ({})\n",
      rep["same_reads_as_previous"].get<uint64_t>(), rep["steps_compared"].get<uint64_t>(),
      pct(rep["same_reads_share"]), rep["same_tensors_as_previous"].get<uint64_t>(), pct(rep["same_tensors_share"]));
  o += fmt::format("  {:>4} {:<8} {:>6} {:>11} {:>8} {:>8} {:>9} {:>9}\n", "step", "phase", "reads", "bytes", "forward",
                   "layers", "=prev rd", "=prev tn");
  for (const json& s : ord["steps"])
    o += fmt::format(
        "  {:>4} {:<8} {:>6} {:>11} {:>8} {:>8} {:>9} {:>9}\n", s["step"].get<uint32_t>(),
        s["phase"].get<std::string>(), s["reads"].get<uint64_t>(), mib(s["bytes"]), pct(s["forward_fraction"]),
        s["layers_ascending"].get<bool>() ? "asc" : "NOT asc",
        s.contains("same_reads_as_previous") ? (s["same_reads_as_previous"].get<bool>() ? "yes" : "no") : "-",
        s.contains("same_tensors_as_previous") ? (s["same_tensors_as_previous"].get<bool>() ? "yes" : "no") : "-");

  // Hot and cold.
  const json& hc = r["hot_cold"];
  o += "\n== Hot and cold ==\n";
  const json& nr = hc["never_read"];
  o += fmt::format("  file {}: {} distinct bytes read, {} never read; tensor data {}: {} never read\n",
                   mib(nr["file_bytes"]), mib(nr["distinct_bytes_read"]), mib(nr["file_bytes_never_read"]),
                   mib(nr["tensor_bytes"]), mib(nr["tensor_bytes_never_read"]));
  o += fmt::format("  {:<28} {:>6} {:>10} {:>6} {:>11} {:>11} {:>11}\n", "hottest tensors", "type", "size", "reads",
                   "bytes read", "distinct", "never read");
  int shown = 0;
  for (const json& t : hc["tensors"]) {
    if (shown++ >= 10) break;
    o += fmt::format("  {:<28} {:>6} {:>10} {:>6} {:>11} {:>11} {:>11}\n", t["tensor"].get<std::string>(),
                     t["type"].get<std::string>(), mib(t["size_bytes"]), t["reads"].get<uint64_t>(),
                     mib(t["bytes_read"]), mib(t["distinct_bytes_read"]), mib(t["never_read_bytes"]));
  }
  std::vector<const json*> cold;
  for (const json& t : hc["tensors"])
    if (t["never_read_bytes"].get<uint64_t>() > 0) cold.push_back(&t);
  o += fmt::format("  tensors with bytes never read: {}\n", cold.size());
  for (size_t i = 0; i < cold.size() && i < 10; ++i)
    o += fmt::format("    {:<28} {} of {} never read ({} steps read it)\n", (*cold[i])["tensor"].get<std::string>(),
                     mib((*cold[i])["never_read_bytes"]), mib((*cold[i])["size_bytes"]),
                     (*cold[i])["steps_reading"].get<uint64_t>());
  o += "  file sections:";
  for (const json& s : hc["sections"])
    o += fmt::format(" {} {} read;", s["section"].get<std::string>(), mib(s["distinct_bytes_read"]));
  o += "\n  file regions (32 bins, share of each bin's bytes ever read):\n   ";
  for (const json& g : hc["regions"]) o += fmt::format(" {:.0f}", 100.0 * g["touched_fraction"].get<double>());
  o += "\n";
  const json& rd = hc["reuse_distance"];
  o += fmt::format("  reuse distance ({} B pages, {} accesses, {} first touches): LRU capacity needed -> hits\n   ",
                   rd["page_bytes"].get<uint64_t>(), rd["accesses"].get<uint64_t>(), rd["cold"].get<uint64_t>());
  for (const json& b : rd["histogram"])
    o += fmt::format(" <={}: {}", mib(b["capacity_needed_bytes"]), b["count"].get<uint64_t>());
  o += "\n  LRU miss ratio by capacity:";
  for (const json& m : hc["lru_miss_ratio_curve"])
    o += fmt::format(" {} {};", mib(m["capacity"]), pct(m["miss_ratio"]));
  o += "\n";

  // Sources.
  const json& src = r["sources"];
  o += "\n== File versus buffers (bytes read; op time split by bytes) ==\n";
  auto src_row = [&](const std::string& label, const json& j) {
    o += fmt::format("  {:<14} {:>11} {:>10} | {:>11} {:>10} | {:>11} {:>10} | {:>10}\n", label,
                     mib(j["MODEL_FILE"]["bytes"]), ms(j["MODEL_FILE"]["ns"]), mib(j["KV_CACHE"]["bytes"]),
                     ms(j["KV_CACHE"]["ns"]), mib(j["ACTIVATION"]["bytes"]), ms(j["ACTIVATION"]["ns"]), ms(j["op_ns"]));
  };
  o += fmt::format("  {:<14} {:>22} | {:>22} | {:>22} | {:>10}\n", "", "MODEL_FILE", "KV_CACHE", "ACTIVATION",
                   "op time");
  src_row("run", src["run"]);
  for (auto& [p, j] : src["phases"].items()) src_row(p, j);
  for (const json& s : src["steps"]) src_row(fmt::format("step {}", s["step"].get<uint32_t>()), s);
  for (const json& l : src["layers"])
    src_row(l["layer"].get<int>() >= 0 ? fmt::format("layer {}", l["layer"].get<int>()) : "no layer", l);
  for (const json& k : src["op_kinds"]) src_row(k["op"].get<std::string>(), k);

  // Predictability.
  o += "\n== Predictability of the next MODEL_FILE access (trained on earlier steps) ==\n";
  for (const char* g : {"ranges", "tensors"}) {
    const json& p = r["predictability"][g];
    o += fmt::format("  {:<8}", g);
    for (auto& [name, j] : p.items())
      o += fmt::format("  {} {} ({}/{})", name, pct(j["hit_rate"]), j["hits"].get<uint64_t>(),
                       j["accesses"].get<uint64_t>());
    o += "\n";
  }

  // Memory.
  o += "\n== Memory pressure (buffers.json) ==\n";
  const json& mem = r["memory"];
  if (mem.contains("pools"))
    for (const json& p : mem["pools"]) {
      o += fmt::format("  {:<10} peak {:>11} at step {} (t={}), {} tensors live:", p["pool"].get<std::string>(),
                       mib(p["peak_bytes"]), p["step"].get<uint64_t>(), ms(p["t_ns"]), p["live_tensors"].get<size_t>());
      int n = 0;
      for (const json& l : p["live"]) {
        if (n++ >= 6) {
          o += " ...";
          break;
        }
        o += fmt::format(" {} ({})", l["tensor"].get<std::string>(), mib(l["bytes"]));
      }
      o += "\n";
    }
  if (mem.contains("total_peak_bytes")) o += fmt::format("  total peak {}\n", mib(mem["total_peak_bytes"]));

  // Speed.
  const json& sp = r["speed"];
  o += "\n== Speed ==\n";
  o += fmt::format("  {:<16} {:>6} {:>11} {:>7} {:>11} {:>11}\n", "op kind", "ops", "time", "share", "bytes read",
                   "achieved");
  const double total_ns = std::max<double>(1, src["run"]["op_ns"].get<uint64_t>());
  for (const json& k : sp["op_kinds"])
    o += fmt::format("  {:<16} {:>6} {:>11} {:>7} {:>11} {:>11}\n", k["op"].get<std::string>(),
                     k["ops"].get<uint64_t>(), ms(k["op_ns"]), pct(k["op_ns"].get<uint64_t>() / total_ns),
                     mib(k["total_bytes"]), gbps(k["bytes_per_s"]));
  o += "  time per layer:";
  for (const json& l : sp["layers"])
    o +=
        fmt::format(" {}={}", l["layer"].get<int>() >= 0 ? std::to_string(l["layer"].get<int>()) : "-", ms(l["op_ns"]));
  o += "\n";
  if (sp.contains("bandwidth")) {
    const json& bw = sp["bandwidth"];
    o += fmt::format("  measured memory bandwidth: {} (1 thread), {} ({} threads)\n",
                     gbps(bw["single_thread_bytes_per_s"]), gbps(bw["multi_thread_bytes_per_s"]),
                     bw["threads"].get<int>());
    o += fmt::format("  achieved over all ops: {} = {} of the bandwidth; fastest op kind {} at {} ({})\n",
                     gbps(sp["achieved_bytes_per_s"]), pct(sp["achieved_fraction_of_bandwidth"]),
                     sp["fastest_op_kind"]["op"].get<std::string>(), gbps(sp["fastest_op_kind"]["bytes_per_s"]),
                     pct(sp["fastest_op_kind"]["fraction_of_bandwidth"]));
  }

  if (r.contains("thread_time"))
    for (const auto& [phase, p] : r["thread_time"]["phases"].items()) {
      o += fmt::format("\n== Thread time, {} ({} steps, median {:.1f} us, then {:.1f} us to the next step) ==\n", phase,
                       p["steps"].get<uint64_t>(), p["step_ns_median"].get<double>() / 1e3,
                       p["after_step_ns_median"].get<double>() / 1e3);
      o += fmt::format("  {:>6} {:>13} {:>13} {:>10} {:>11} {:>11} {:>14}\n", "thread", "in nodes/step", "outside/step",
                       "gaps/step", "gap median", "gap p90", "outside in <1us");
      for (const json& th : p["threads"])
        o += fmt::format("  {:>6} {:>10.1f} us {:>10.1f} us {:>10.1f} {:>8.2f} us {:>8.2f} us {:>14}\n",
                         th["thread"].get<int>(), th["busy_ns_median_step"].get<double>() / 1e3,
                         th["outside_ns_median_step"].get<double>() / 1e3, th["gaps_median_step"].get<double>(),
                         th["gap_median_ns"].get<double>() / 1e3, th["gap_p90_ns"].get<double>() / 1e3,
                         pct(th["outside_share_in_short_gaps"]));
    }

  if (r.contains("io")) {
    const json& io = r["io"];
    o += "\n== I/O (run --io-trace) ==\n";
    o += fmt::format(
        "  {} ops observed; model-file pages not resident before the op: {} ({}); major faults {}; "
        "bytes read from storage {}; time to first token {}\n",
        io["ops"].get<uint64_t>(), io["nonresident_pages"].get<uint64_t>(), mib(io["nonresident_bytes"]),
        io["major_faults"].get<uint64_t>(), mib(io["storage_read_bytes"]), ms(io["time_to_first_token_ns"]));
    o += fmt::format("  stall estimate (op time of ops that faulted): {}\n", ms(io["stall_ns"]));
    o += "  per step: step nonresident-pages faults storage-bytes\n";
    for (const json& s : io["steps"])
      o += fmt::format("    {:>4} {:>8} {:>8} {:>11}\n", s["step"].get<uint32_t>(),
                       s["nonresident_pages"].get<uint64_t>(), s["major_faults"].get<uint64_t>(),
                       mib(s["storage_read_bytes"]));
  }

  if (r.contains("cache_sim")) {
    const json& cs = r["cache_sim"];
    o += fmt::format("\n== Cache simulation ({} granularity, {} accesses, {} accessed, {} distinct) ==\n",
                     cs["granularity"].get<std::string>(), cs["accesses"].get<uint64_t>(), mib(cs["bytes_accessed"]),
                     mib(cs["unique_bytes"]));
    o += fmt::format("  {:>10} {:<6} {:>9} {:>9} {:>9} {:>14}\n", "capacity", "policy", "misses", "hits", "miss ratio",
                     "read from disk");
    for (const json& x : cs["results"])
      o += fmt::format("  {:>10} {:<6} {:>9} {:>9} {:>9} {:>14}\n", mib(x["capacity"]), x["policy"].get<std::string>(),
                       x["misses"].get<uint64_t>(), x["hits"].get<uint64_t>(), pct(x["miss_ratio"]),
                       mib(x["bytes_read_from_storage"]));
  }
  return o;
}

}  // namespace tt::analysis
