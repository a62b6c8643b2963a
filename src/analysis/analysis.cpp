#include "analysis/analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis/bandwidth.h"
#include "analysis/thread_time.h"
#include "core/error.h"
#include "trace/run_trace.h"

namespace tt::analysis {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json read_json_file(const std::string& path, bool required) {
  std::ifstream f(path);
  if (!f) {
    if (required) fail("cannot read '{}'", path);
    return json::object();
  }
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    fail("'{}' is not valid JSON: {}", path, e.what());
  }
}

// Pools as columns of the source tables.
constexpr Pool kPools[] = {Pool::MODEL_FILE, Pool::KV_CACHE, Pool::ACTIVATION, Pool::INPUT, Pool::SCRATCH};
constexpr int kNumPools = 5;

uint64_t duration_ns(const trace::OpRecord& o) { return o.end_ns > o.start_ns ? o.end_ns - o.start_ns : 0; }

// Signed jump from the end of one read to the start of the next.
const char* const kJumpBins[] = {"<=-16M", "-16M..-1M", "-1M..-64K", "-64K..-4K", "-4K..-1", "0",
                                 "1..4K",  "4K..64K",   "64K..1M",   "1M..16M",   ">=16M"};
constexpr int kNumJumpBins = 11;
// The jump from `from` to `to` (file offsets anywhere in 0..2^64: unsigned, no signed difference to overflow).
int jump_bin(uint64_t from, uint64_t to) {
  if (to == from) return 5;
  const uint64_t a = to > from ? to - from : from - to;
  const int mag = a < 4096 ? 0 : a < 65536 ? 1 : a < (1 << 20) ? 2 : a < (16 << 20) ? 3 : 4;
  return to < from ? 4 - mag : 6 + mag;
}

struct OrderAcc {
  uint64_t reads = 0, bytes = 0, transitions = 0, forward = 0, contiguous = 0, backward = 0;
  uint64_t hist[kNumJumpBins] = {};
  uint64_t layer_backward = 0;  // a read of a lower layer after a higher one in the same step
  std::vector<int> layers;      // layer visit sequence (consecutive duplicates merged)
  bool has_prev = false;
  uint64_t prev_end = 0;
  int max_layer = -1;
  uint32_t cur_step = UINT32_MAX;
  std::set<uint32_t> steps, unordered_steps;

  void add(const FileRead& r) {
    ++reads;
    bytes += r.length;
    if (has_prev) {
      ++transitions;
      ++hist[jump_bin(prev_end, r.offset)];
      if (r.offset >= prev_end) ++forward;
      if (r.offset == prev_end) ++contiguous;
      if (r.offset < prev_end) ++backward;
    }
    has_prev = true;
    prev_end = r.offset + r.length;
    if (layers.empty() || layers.back() != r.layer) layers.push_back(r.layer);
    if (r.step != cur_step) cur_step = r.step, max_layer = -1, steps.insert(r.step);
    if (r.layer >= 0) {
      if (r.layer < max_layer) ++layer_backward, unordered_steps.insert(r.step);
      max_layer = std::max<int>(max_layer, r.layer);
    }
  }
  json to_json(bool with_layers) const {
    json h = json::object();
    for (int i = 0; i < kNumJumpBins; ++i) h[kJumpBins[i]] = hist[i];
    json j = {{"reads", reads},
              {"bytes", bytes},
              {"transitions", transitions},
              {"forward_fraction", transitions ? static_cast<double>(forward) / transitions : 1.0},
              {"contiguous_fraction", transitions ? static_cast<double>(contiguous) / transitions : 0.0},
              {"backward_moves", backward},
              {"jump_histogram", h},
              {"layers_ascending", layer_backward == 0},
              {"layer_backward_moves", layer_backward},
              {"steps", steps.size()},
              {"steps_with_layers_ascending", steps.size() - unordered_steps.size()}};
    if (with_layers) j["layer_sequence"] = layers;
    return j;
  }
};

struct PoolAcc {
  uint64_t bytes[kNumPools] = {};
  double ns[kNumPools] = {};
  uint64_t op_ns = 0, ops = 0;
  void add(const trace::OpRecord& o) {
    uint64_t per[kNumPools] = {}, total = 0;
    for (const trace::TensorRecord& in : o.inputs)
      for (const trace::RangeRecord& r : in.ranges) {
        const int p = static_cast<int>(r.pool);
        if (p < kNumPools) per[p] += r.length, total += r.length;
      }
    const uint64_t d = duration_ns(o);
    for (int p = 0; p < kNumPools; ++p) {
      bytes[p] += per[p];
      if (total) ns[p] += static_cast<double>(d) * per[p] / total;
    }
    op_ns += d;
    ++ops;
  }
  json to_json() const {
    json j = json::object();
    uint64_t all = 0;
    for (int p = 0; p < kNumPools; ++p) {
      j[pool_name(kPools[p])] = {{"bytes", bytes[p]}, {"ns", static_cast<uint64_t>(ns[p])}};
      all += bytes[p];
    }
    j["total_bytes"] = all;
    j["op_ns"] = op_ns;
    j["ops"] = ops;
    j["bytes_per_s"] = op_ns ? all / (op_ns / 1e9) : 0.0;
    return j;
  }
};

// Union length of [begin, end) intervals.
uint64_t union_bytes(std::vector<std::pair<uint64_t, uint64_t>>& iv) {
  std::sort(iv.begin(), iv.end());
  uint64_t total = 0, cur_b = 0, cur_e = 0;
  bool open = false;
  for (auto [b, e] : iv) {
    if (!open || b > cur_e) {
      if (open) total += cur_e - cur_b;
      cur_b = b, cur_e = e, open = true;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (open) total += cur_e - cur_b;
  return total;
}

std::string step_phase(const trace::TraceContents& t, uint32_t step) {
  for (const trace::StepMarker& m : t.steps)
    if (m.step == step) return phase_name(m.phase);
  return "?";
}

// Next-access predictors, trained on earlier steps only.
json predictability(const std::vector<std::vector<std::string>>& per_step) {
  struct Pred {
    const char* name = "";
    uint64_t hits = 0, total = 0;
    std::vector<json> steps;
  };
  Pred same, succ, freq;
  same.name = "same_as_last_step";
  succ.name = "last_successor";
  freq.name = "most_frequent_successor";
  std::unordered_map<std::string, std::string> last_succ;
  std::unordered_map<std::string, std::map<std::string, uint64_t>> counts;
  for (size_t s = 0; s < per_step.size(); ++s) {
    const auto& seq = per_step[s];
    uint64_t h_same = 0, h_succ = 0, h_freq = 0, n = 0;
    if (s > 0) {
      const auto& prev = per_step[s - 1];
      for (size_t k = 0; k < seq.size(); ++k) {
        ++n;
        if (k < prev.size() && prev[k] == seq[k]) ++h_same;
        // Successor predictors need the previous access of this step (the first access of a step is predicted
        // from the last access of the previous one).
        const std::string& before = k > 0 ? seq[k - 1] : prev.empty() ? std::string() : prev.back();
        auto it = last_succ.find(before);
        if (it != last_succ.end() && it->second == seq[k]) ++h_succ;
        auto ct = counts.find(before);
        if (ct != counts.end()) {
          auto best = std::max_element(ct->second.begin(), ct->second.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
          if (best->first == seq[k]) ++h_freq;
        }
      }
      same.hits += h_same, succ.hits += h_succ, freq.hits += h_freq;
      same.total += n, succ.total += n, freq.total += n;
      auto rate = [&](uint64_t h) { return n ? static_cast<double>(h) / n : 0.0; };
      same.steps.push_back({{"step", s}, {"accesses", n}, {"hits", h_same}, {"hit_rate", rate(h_same)}});
      succ.steps.push_back({{"step", s}, {"accesses", n}, {"hits", h_succ}, {"hit_rate", rate(h_succ)}});
      freq.steps.push_back({{"step", s}, {"accesses", n}, {"hits", h_freq}, {"hit_rate", rate(h_freq)}});
    }
    // Train on this step (including the transition from the previous step's last access).
    for (size_t k = 0; k < seq.size(); ++k) {
      const std::string before = k > 0 ? seq[k - 1] : s > 0 && !per_step[s - 1].empty() ? per_step[s - 1].back() : "";
      last_succ[before] = seq[k];
      ++counts[before][seq[k]];
    }
  }
  json out = json::object();
  for (Pred* p : {&same, &succ, &freq})
    out[p->name] = {{"accesses", p->total},
                    {"hits", p->hits},
                    {"hit_rate", p->total ? static_cast<double>(p->hits) / p->total : 0.0},
                    {"steps", p->steps}};
  return out;
}

json memory_pressure(const json& buffers) {
  json out = json::object();
  if (!buffers.contains("events")) {
    out["note"] = "no buffers.json";
    return out;
  }
  struct Live {
    uint64_t bytes = 0, peak = 0, peak_t = 0, peak_step = 0;
    std::map<std::string, uint64_t> tensors;  // key -> bytes
    std::vector<std::pair<std::string, uint64_t>> at_peak;
  };
  std::map<std::string, Live> pools;
  std::map<std::string, uint64_t> buffer_sizes;  // "(grow)" events: the arena and scratch sizes
  for (const json& e : buffers["events"]) {
    const uint64_t t = e[0], step = e[1];
    const std::string kind = e[2], pool = e[3], tensor = e[7];
    const int buffer_id = e[4];
    const uint64_t offset = e[5], bytes = e[6];
    if (tensor.size() > 7 && tensor.ends_with(" (grow)")) {
      uint64_t& s = buffer_sizes[tensor.substr(0, tensor.size() - 7)];
      s = std::max(s, bytes);
      if (pool != "SCRATCH") continue;  // the arena's tensors are counted one by one
    }
    Live& l = pools[pool];
    const std::string key = fmt::format("{}#{}@{}", tensor, buffer_id, offset);
    if (kind == "a") {
      if (pool == "SCRATCH") {  // scratch grows, never frees: its size is what is live
        l.bytes = bytes;
        l.tensors.clear();
      } else {
        l.bytes += bytes;
      }
      l.tensors[key] = bytes;
      if (l.bytes > l.peak) {
        l.peak = l.bytes, l.peak_t = t, l.peak_step = step;
        l.at_peak.clear();
        for (auto& [k, b] : l.tensors) l.at_peak.push_back({k.substr(0, k.find('#')), b});
      }
    } else {
      auto it = l.tensors.find(key);
      if (it != l.tensors.end()) {
        l.bytes -= it->second;
        l.tensors.erase(it);
      }
    }
  }
  json arr = json::array();
  for (auto& [pool, l] : pools) {
    std::sort(l.at_peak.begin(), l.at_peak.end(), [](auto& a, auto& b) { return a.second > b.second; });
    json live = json::array();
    for (auto& [name, b] : l.at_peak) live.push_back({{"tensor", name}, {"bytes", b}});
    arr.push_back({{"pool", pool},
                   {"peak_bytes", l.peak},
                   {"t_ns", l.peak_t},
                   {"step", l.peak_step},
                   {"live_tensors", live.size()},
                   {"live", live}});
  }
  out["pools"] = arr;
  out["buffer_sizes"] = buffer_sizes;
  if (buffers.contains("peak_bytes")) out["total_peak_bytes"] = buffers["peak_bytes"];
  return out;
}

}  // namespace

RunFiles load_run(const std::string& dir) {
  if (!fs::exists(dir)) fail("'{}' does not exist", dir);
  if (!fs::is_directory(dir)) fail("'{}' is not a run directory", dir);
  const std::string trace_path = dir + "/trace.bin";
  if (!fs::exists(trace_path)) fail("'{}' has no trace.bin (not a run directory?)", dir);
  RunFiles r;
  r.dir = dir;
  r.run = read_json_file(dir + "/run.json", false);
  r.memory_map = read_json_file(dir + "/memory-map.json", false);
  r.trace = trace::read_run_trace(dir, r.memory_map);
  r.buffers = read_json_file(dir + "/buffers.json", false);
  std::ifstream steps(dir + "/steps.jsonl");
  for (std::string line; std::getline(steps, line);) {
    if (line.empty()) continue;
    try {
      r.steps.push_back(json::parse(line));
    } catch (const json::exception&) {
      break;  // a partial last line of a killed run
    }
  }
  return r;
}

std::vector<FileRead> file_reads(const trace::TraceContents& t) {
  std::vector<FileRead> out;
  for (size_t i = 0; i < t.ops.size(); ++i) {
    const trace::OpRecord& o = t.ops[i];
    for (const trace::TensorRecord& in : o.inputs)
      for (const trace::RangeRecord& r : in.ranges)
        if (r.pool == Pool::MODEL_FILE && r.length)
          out.push_back({o.step, o.node, i, o.layer, in.name, in.offset, in.bytes, r.offset, r.length});
  }
  return out;
}

std::vector<Access> access_stream(const std::vector<FileRead>& reads, Granularity g, uint64_t page_bytes) {
  std::vector<Access> s;
  size_t last_op = SIZE_MAX;
  uint64_t last_key = UINT64_MAX;
  for (const FileRead& r : reads) {
    if (g == Granularity::TENSOR) {
      if (r.op == last_op && r.tensor_offset == last_key) continue;
      s.push_back({r.tensor_offset, r.tensor_bytes});
      last_key = r.tensor_offset;
    } else {
      const uint64_t first = r.offset / page_bytes, last = (r.offset + r.length - 1) / page_bytes;
      for (uint64_t p = first; p <= last; ++p) {
        if (r.op == last_op && p == last_key) continue;
        s.push_back({p, page_bytes});
        last_key = p;
      }
    }
    last_op = r.op;
  }
  return s;
}

json analyze_run(const RunFiles& run, const AnalyzeOptions& opt) {
  // Pages up to 1 GiB (the largest huge pages): the miss-ratio curve doubles capacities from one page up to the bytes
  // read, and a read of L bytes is L / page accesses.
  if (opt.page_bytes == 0 || opt.page_bytes > kMaxPageBytes)
    fail("page size {} is outside 1 to {} bytes", opt.page_bytes, kMaxPageBytes);
  const trace::TraceContents& t = run.trace;
  const std::vector<FileRead> reads = file_reads(t);
  json report = {{"format", "tensortrace.analysis"}, {"version", 1}, {"run_dir", run.dir}};
  uint64_t file_size = run.memory_map.value("file_size", uint64_t{0});
  if (run.run.contains("model")) {
    report["model"] = {{"file", run.run["model"].value("file", "")},
                       {"size_bytes", run.run["model"].value("size_bytes", 0)}};
    if (!file_size) file_size = run.run["model"].value("size_bytes", uint64_t{0});
  }
  const int threads = run.run.contains("options") ? run.run["options"].value("threads", 1) : 1;
  report["threads"] = threads;
  report["n_steps"] = t.steps.size();
  report["n_ops"] = t.ops.size();
  report["trace_complete"] = t.complete;
  if (!t.complete) report["trace_stop_reason"] = t.stop_reason;

  // ---- Order ----
  {
    OrderAcc all;
    std::map<std::string, OrderAcc> phases;
    std::map<uint32_t, OrderAcc> steps;
    std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> seq;  // step -> ranges
    std::map<uint32_t, std::vector<std::string>> tensor_seq;
    for (const FileRead& r : reads) {
      all.add(r);
      phases[step_phase(t, r.step)].add(r);
      steps[r.step].add(r);
      seq[r.step].push_back({r.offset, r.length});
      if (tensor_seq[r.step].empty() || tensor_seq[r.step].back() != r.tensor) tensor_seq[r.step].push_back(r.tensor);
    }
    json jp = json::object();
    for (auto& [name, acc] : phases) jp[name] = acc.to_json(false);
    json js = json::array();
    uint64_t same = 0, same_tensors = 0, compared = 0;
    uint32_t prev_step = UINT32_MAX;
    for (auto& [step, acc] : steps) {
      json j = acc.to_json(true);
      j["step"] = step;
      j["phase"] = step_phase(t, step);
      if (prev_step != UINT32_MAX && prev_step + 1 == step) {
        const bool eq = seq[step] == seq[prev_step];
        const bool eq_t = tensor_seq[step] == tensor_seq[prev_step];
        j["same_reads_as_previous"] = eq;
        j["same_tensors_as_previous"] = eq_t;
        ++compared;
        same += eq;
        same_tensors += eq_t;
      }
      prev_step = step;
      js.push_back(j);
    }
    report["order"] = {{"run", all.to_json(false)},
                       {"phases", jp},
                       {"steps", js},
                       {"repeat",
                        {{"steps_compared", compared},
                         {"same_reads_as_previous", same},
                         {"same_reads_share", compared ? static_cast<double>(same) / compared : 0.0},
                         {"same_tensors_as_previous", same_tensors},
                         {"same_tensors_share", compared ? static_cast<double>(same_tensors) / compared : 0.0}}}};
  }

  // ---- Hot and cold ----
  {
    struct TensorAcc {
      uint64_t reads = 0, bytes = 0;
      std::set<uint32_t> steps;
      std::vector<std::pair<uint64_t, uint64_t>> iv;
    };
    std::map<std::string, TensorAcc> per;
    std::vector<std::pair<uint64_t, uint64_t>> all_iv;
    for (const FileRead& r : reads) {
      TensorAcc& a = per[r.tensor];
      ++a.reads;
      a.bytes += r.length;
      a.steps.insert(r.step);
      a.iv.push_back({r.offset, r.offset + r.length});
      all_iv.push_back({r.offset, r.offset + r.length});
    }
    json tensors = json::array();
    uint64_t data_never = 0, tensor_total = 0;
    const json mm_tensors = run.memory_map.value("tensors", json::array());
    for (const json& mt : mm_tensors) {
      const std::string name = mt["name"];
      const uint64_t size = mt["size_bytes"];
      tensor_total += size;
      auto it = per.find(name);
      uint64_t distinct = 0;
      TensorAcc empty;
      TensorAcc& a = it != per.end() ? it->second : empty;
      distinct = union_bytes(a.iv);
      data_never += size - std::min(size, distinct);
      tensors.push_back({{"tensor", name},
                         {"layer", mt["layer"]},
                         {"category", mt.value("category", "")},
                         {"type", mt.value("type", "")},
                         {"offset", mt["offset_start"]},
                         {"size_bytes", size},
                         {"reads", a.reads},
                         {"bytes_read", a.bytes},
                         {"distinct_bytes_read", distinct},
                         {"never_read_bytes", size - std::min(size, distinct)},
                         {"steps_reading", a.steps.size()}});
    }
    std::sort(tensors.begin(), tensors.end(), [](const json& a, const json& b) {
      return a["bytes_read"].get<uint64_t>() > b["bytes_read"].get<uint64_t>();
    });
    const uint64_t distinct_all = union_bytes(all_iv);
    // File regions: sections, and the file cut in 32 equal bins.
    json sections = json::array();
    auto read_in = [&](uint64_t b, uint64_t e, uint64_t& total_read) {
      std::vector<std::pair<uint64_t, uint64_t>> clip;
      total_read = 0;
      for (auto [x, y] : all_iv) {
        const uint64_t lo = std::max(x, b), hi = std::min(y, e);
        if (lo < hi) clip.push_back({lo, hi}), total_read += hi - lo;
      }
      return union_bytes(clip);
    };
    if (run.memory_map.contains("sections"))
      for (auto& [name, range] : run.memory_map["sections"].items()) {
        uint64_t total = 0;
        const uint64_t b = range[0], e = range[1];
        const uint64_t d = read_in(b, e, total);
        sections.push_back(
            {{"section", name}, {"begin", b}, {"end", e}, {"bytes_read", total}, {"distinct_bytes_read", d}});
      }
    json regions = json::array();
    if (file_size) {
      const int nbins = 32;
      const uint64_t w = file_size / nbins + (file_size % nbins != 0);  // rounded up without overflowing
      for (int i = 0; i < nbins; ++i) {
        const uint64_t b = i * w, e = std::min(file_size, b + w);
        uint64_t total = 0;
        const uint64_t d = read_in(b, e, total);
        regions.push_back({{"begin", b},
                           {"end", e},
                           {"bytes_read", total},
                           {"distinct_bytes_read", d},
                           {"touched_fraction", e > b ? static_cast<double>(d) / (e - b) : 0.0}});
      }
    }
    // Reuse distances over pages.
    const std::vector<Access> pages = access_stream(reads, Granularity::PAGE, opt.page_bytes);
    const std::vector<uint64_t> dist = reuse_distances(pages);
    std::map<int, uint64_t> bins;  // log2(bytes) -> count
    uint64_t cold = 0;
    for (uint64_t d : dist) {
      if (d == UINT64_MAX) {
        ++cold;
        continue;
      }
      int b = 0;
      while ((1ull << b) < d + opt.page_bytes) ++b;  // the capacity an LRU cache needs for this hit
      ++bins[b];
    }
    json hist = json::array();
    for (auto [b, n] : bins) hist.push_back({{"capacity_needed_bytes", 1ull << b}, {"count", n}});
    // LRU miss-ratio curve from the distances.
    json mrc = json::array();
    uint64_t cap = opt.page_bytes;
    const uint64_t unique = static_cast<uint64_t>(cold) * opt.page_bytes;
    while (true) {
      uint64_t misses = cold;
      for (uint64_t d : dist)
        if (d != UINT64_MAX && d + opt.page_bytes > cap) ++misses;
      mrc.push_back({{"capacity", cap},
                     {"misses", misses},
                     {"miss_ratio", pages.empty() ? 0.0 : static_cast<double>(misses) / pages.size()}});
      if (cap >= unique || cap > UINT64_MAX / 2) break;
      cap *= 2;
    }
    report["hot_cold"] = {{"tensors", tensors},
                          {"sections", sections},
                          {"regions", regions},
                          {"never_read",
                           {{"file_bytes", file_size},
                            {"distinct_bytes_read", distinct_all},
                            {"file_bytes_never_read", file_size - std::min(file_size, distinct_all)},
                            {"tensor_bytes", tensor_total},
                            {"tensor_bytes_never_read", data_never}}},
                          {"reuse_distance",
                           {{"page_bytes", opt.page_bytes},
                            {"accesses", pages.size()},
                            {"cold", cold},
                            {"unique_bytes", unique},
                            {"histogram", hist}}},
                          {"lru_miss_ratio_curve", mrc}};
  }

  // ---- File versus buffers, and speed ----
  {
    PoolAcc all;
    std::map<std::string, PoolAcc> phases;
    std::map<uint32_t, PoolAcc> steps;
    std::map<int, PoolAcc> layers;
    std::map<std::string, PoolAcc> kinds;
    for (const trace::OpRecord& o : t.ops) {
      if (op_is_view(o.op)) continue;
      all.add(o);
      phases[phase_name(o.phase)].add(o);
      steps[o.step].add(o);
      layers[o.layer].add(o);
      kinds[op_name(o.op)].add(o);
    }
    json jp = json::object(), js = json::array(), jl = json::array(), jk = json::array();
    for (auto& [p, a] : phases) jp[p] = a.to_json();
    for (auto& [s, a] : steps) {
      json j = a.to_json();
      j["step"] = s;
      j["phase"] = step_phase(t, s);
      for (const trace::StepMarker& m : t.steps)
        if (m.step == s && m.end_ns > m.start_ns) j["step_ns"] = m.end_ns - m.start_ns;
      js.push_back(j);
    }
    for (auto& [l, a] : layers) {
      json j = a.to_json();
      j["layer"] = l;
      jl.push_back(j);
    }
    for (auto& [k, a] : kinds) {
      json j = a.to_json();
      j["op"] = k;
      jk.push_back(j);
    }
    std::sort(jk.begin(), jk.end(),
              [](const json& a, const json& b) { return a["op_ns"].get<uint64_t>() > b["op_ns"].get<uint64_t>(); });
    report["sources"] = {{"note", "time of each op split over the pools it reads in proportion to the bytes"},
                         {"run", all.to_json()},
                         {"phases", jp},
                         {"steps", js},
                         {"layers", jl},
                         {"op_kinds", jk}};
    json speed = {{"op_kinds", jk}, {"layers", jl}};
    if (opt.measure_bandwidth) {
      const Bandwidth& bw = measured_bandwidth(threads);
      speed["bandwidth"] = bw.to_json();
      const double achieved = all.op_ns ? (all.to_json()["total_bytes"].get<uint64_t>()) / (all.op_ns / 1e9) : 0;
      speed["achieved_bytes_per_s"] = achieved;
      const double ref = threads > 1 ? bw.multi_thread_bytes_per_s : bw.single_thread_bytes_per_s;
      speed["achieved_fraction_of_bandwidth"] = ref > 0 ? achieved / ref : 0.0;
      double best = 0;
      std::string best_kind;
      for (const json& k : jk)
        if (k["bytes_per_s"].get<double>() > best) best = k["bytes_per_s"], best_kind = k["op"];
      speed["fastest_op_kind"] = {
          {"op", best_kind}, {"bytes_per_s", best}, {"fraction_of_bandwidth", ref > 0 ? best / ref : 0.0}};
    }
    report["speed"] = speed;
    report["thread_time"] = thread_time(t);
  }

  // ---- Predictability ----
  {
    std::vector<std::vector<std::string>> by_range, by_tensor;
    for (const FileRead& r : reads) {
      if (by_range.size() <= r.step) by_range.resize(r.step + 1), by_tensor.resize(r.step + 1);
      by_range[r.step].push_back(fmt::format("{}+{}", r.offset, r.length));
      if (by_tensor[r.step].empty() || by_tensor[r.step].back() != r.tensor) by_tensor[r.step].push_back(r.tensor);
    }
    report["predictability"] = {
        {"note", "predictors of the next MODEL_FILE access, trained on earlier steps only; scored on steps >= 1"},
        {"ranges", predictability(by_range)},
        {"tensors", predictability(by_tensor)}};
  }

  // ---- I/O ----
  if (!t.io.empty()) report["io"] = io_summary(t);

  // ---- Memory pressure ----
  report["memory"] = memory_pressure(run.buffers);

  // ---- Cache simulation ----
  if (!opt.cache_sizes.empty()) {
    const std::vector<Access> s = access_stream(reads, opt.granularity, opt.page_bytes);
    uint64_t bytes = 0;
    std::set<uint64_t> keys;
    uint64_t unique = 0;
    for (const Access& a : s) {
      bytes += a.bytes;
      if (keys.insert(a.key).second) unique += a.bytes;
    }
    json results = json::array();
    for (uint64_t cap : opt.cache_sizes)
      for (CachePolicy p : opt.policies) {
        const CacheResult r = simulate_cache(s, cap, p);
        results.push_back({{"policy", policy_name(p)},
                           {"capacity", cap},
                           {"accesses", r.accesses},
                           {"hits", r.hits},
                           {"misses", r.misses},
                           {"cold_misses", r.cold_misses},
                           {"miss_ratio", r.miss_ratio()},
                           {"bytes_read_from_storage", r.bytes_missed},
                           {"bytes_accessed", r.bytes_accessed}});
      }
    report["cache_sim"] = {{"granularity", opt.granularity == Granularity::PAGE ? "page" : "tensor"},
                           {"page_bytes", opt.page_bytes},
                           {"accesses", s.size()},
                           {"bytes_accessed", bytes},
                           {"unique_bytes", unique},
                           {"results", results}};
  }
  return report;
}

}  // namespace tt::analysis
