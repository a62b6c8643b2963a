#include "analysis/analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis/thread_time.h"
#include "core/error.h"

namespace tt::analysis {

const char* const kJumpBins[kNumJumpBins] = {"<=-16M", "-16M..-1M", "-1M..-64K", "-64K..-4K", "-4K..-1", "0",
                                             "1..4K",  "4K..64K",   "64K..1M",   "1M..16M",   ">=16M"};

namespace {

uint64_t duration_ns(const trace::OpRecord& o) { return o.end_ns > o.start_ns ? o.end_ns - o.start_ns : 0; }

// The jump from `from` to `to` (file offsets anywhere in 0..2^64: unsigned, no signed difference to overflow).
int jump_bin(uint64_t from, uint64_t to) {
  if (to == from) return 5;
  const uint64_t a = to > from ? to - from : from - to;
  const int mag = a < 4096 ? 0 : a < 65536 ? 1 : a < (1 << 20) ? 2 : a < (16 << 20) ? 3 : 4;
  return to < from ? 4 - mag : 6 + mag;
}

// OrderStats as reads arrive in trace order.
struct OrderAcc {
  OrderStats s;
  bool has_prev = false;
  uint64_t prev_end = 0;
  int max_layer = -1;
  uint32_t cur_step = UINT32_MAX;
  std::set<uint32_t> steps, unordered_steps;

  void add(const FileRead& r) {
    ++s.reads;
    s.bytes += r.length;
    if (has_prev) {
      ++s.transitions;
      ++s.hist[jump_bin(prev_end, r.offset)];
      if (r.offset >= prev_end) ++s.forward;
      if (r.offset == prev_end) ++s.contiguous;
      if (r.offset < prev_end) ++s.backward;
    }
    has_prev = true;
    prev_end = r.offset + r.length;
    if (s.layers.empty() || s.layers.back() != r.layer) s.layers.push_back(r.layer);
    if (r.step != cur_step) cur_step = r.step, max_layer = -1, steps.insert(r.step);
    if (r.layer >= 0) {
      if (r.layer < max_layer) ++s.layer_backward, unordered_steps.insert(r.step);
      max_layer = std::max<int>(max_layer, r.layer);
    }
  }
  OrderStats done() const {
    OrderStats out = s;
    out.steps = steps.size();
    out.steps_with_layers_ascending = steps.size() - unordered_steps.size();
    return out;
  }
};

// Union length of [begin, end) intervals.
uint64_t union_bytes(std::vector<std::pair<uint64_t, uint64_t>> iv) {
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
  return step < t.steps.size() ? phase_name(t.steps[step].phase) : "?";  // markers are steps 0, 1, ...
}

// Next-access predictors, trained on earlier steps only.
Predictability predictability(const std::vector<std::vector<std::string>>& per_step) {
  PredictorScore same, succ, freq;
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
      same.accesses += n, succ.accesses += n, freq.accesses += n;
      same.steps.push_back({s, n, h_same});
      succ.steps.push_back({s, n, h_succ});
      freq.steps.push_back({s, n, h_freq});
    }
    // Train on this step (including the transition from the previous step's last access).
    for (size_t k = 0; k < seq.size(); ++k) {
      const std::string before = k > 0 ? seq[k - 1] : s > 0 && !per_step[s - 1].empty() ? per_step[s - 1].back() : "";
      last_succ[before] = seq[k];
      ++counts[before][seq[k]];
    }
  }
  return {{"same_as_last_step", same}, {"last_successor", succ}, {"most_frequent_successor", freq}};
}

}  // namespace

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

OrderSection order_section(const trace::TraceContents& t, const std::vector<FileRead>& reads) {
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
  OrderSection out;
  out.run = all.done();
  for (auto& [name, acc] : phases) out.phases[name] = acc.done();
  uint32_t prev_step = UINT32_MAX;
  for (auto& [step, acc] : steps) {
    OrderStep s{step, step_phase(t, step), acc.done(), std::nullopt, std::nullopt};
    if (prev_step != UINT32_MAX && prev_step + 1 == step) {
      s.same_reads_as_previous = seq[step] == seq[prev_step];
      s.same_tensors_as_previous = tensor_seq[step] == tensor_seq[prev_step];
      ++out.steps_compared;
      out.same_reads += *s.same_reads_as_previous;
      out.same_tensors += *s.same_tensors_as_previous;
    }
    prev_step = step;
    out.steps.push_back(std::move(s));
  }
  return out;
}

std::map<std::string, TensorReads> tensor_reads(const std::vector<FileRead>& reads) {
  std::map<std::string, TensorReads> per;
  for (const FileRead& r : reads) {
    TensorReads& a = per[r.tensor];
    ++a.reads;
    a.bytes += r.length;
    if (a.steps.empty() || a.steps.back() != r.step) a.steps.push_back(r.step);  // reads come in step order
    a.intervals.push_back({r.offset, r.offset + r.length});
  }
  return per;
}

HotColdSection hot_cold_section(const RunData& run, const std::vector<FileRead>& reads, uint64_t page_bytes) {
  HotColdSection out;
  const std::map<std::string, TensorReads> per = tensor_reads(reads);
  std::vector<std::pair<uint64_t, uint64_t>> all_iv;
  for (const FileRead& r : reads) all_iv.push_back({r.offset, r.offset + r.length});
  uint64_t file_size = run.file_size.value_or(0);
  if (!file_size) file_size = run.info.model_size_bytes;
  const TensorReads none;
  for (const MapTensor& mt : run.tensors) {
    auto it = per.find(mt.name);
    const TensorReads& a = it != per.end() ? it->second : none;
    const uint64_t size = mt.size_bytes, distinct = union_bytes(a.intervals);
    out.tensor_bytes += size;
    out.tensor_bytes_never_read += size - std::min(size, distinct);
    out.tensors.push_back({&mt, a.reads, a.bytes, distinct, size - std::min(size, distinct), a.steps.size()});
  }
  std::stable_sort(out.tensors.begin(), out.tensors.end(),
                   [](const TensorHeat& a, const TensorHeat& b) { return a.bytes_read > b.bytes_read; });
  out.file_bytes = file_size;
  out.distinct_bytes_read = union_bytes(all_iv);
  // File regions: sections, and the file cut in 32 equal bins.
  auto region = [&](uint64_t b, uint64_t e) {
    std::vector<std::pair<uint64_t, uint64_t>> clip;
    RegionHeat g{"", b, e, 0, 0};
    for (auto [x, y] : all_iv) {
      const uint64_t lo = std::max(x, b), hi = std::min(y, e);
      if (lo < hi) clip.push_back({lo, hi}), g.bytes_read += hi - lo;
    }
    g.distinct_bytes_read = union_bytes(std::move(clip));
    return g;
  };
  for (const MapSection& s : run.sections) {
    out.sections.push_back(region(s.begin, s.end));
    out.sections.back().section = s.name;
  }
  if (file_size) {
    const int nbins = 32;
    const uint64_t w = file_size / nbins + (file_size % nbins != 0);  // rounded up without overflowing
    for (int i = 0; i < nbins; ++i) {
      const uint64_t b = i * w;
      out.regions.push_back(region(b, std::min(file_size, b + w)));
    }
  }
  // Reuse distances over pages.
  const std::vector<Access> pages = access_stream(reads, Granularity::PAGE, page_bytes);
  const std::vector<uint64_t> dist = reuse_distances(pages);
  for (uint64_t d : dist) {
    if (d == UINT64_MAX) {
      ++out.cold;
      continue;
    }
    int b = 0;
    while ((1ull << b) < d + page_bytes) ++b;  // the capacity an LRU cache needs for this hit
    ++out.reuse_bins[b];
  }
  out.page_bytes = page_bytes;
  out.accesses = pages.size();
  out.unique_bytes = out.cold * page_bytes;
  // LRU miss-ratio curve from the distances.
  for (uint64_t cap = page_bytes;; cap *= 2) {
    uint64_t misses = out.cold;
    for (uint64_t d : dist)
      if (d != UINT64_MAX && d + page_bytes > cap) ++misses;
    out.lru_miss_ratio_curve.push_back({cap, misses, pages.empty() ? 0.0 : static_cast<double>(misses) / pages.size()});
    if (cap >= out.unique_bytes || cap > UINT64_MAX / 2) break;
  }
  return out;
}

void PoolTotals::add(const trace::OpRecord& o) {
  std::array<uint64_t, kNumPools> per{};
  uint64_t total = 0;
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

uint64_t PoolTotals::total_bytes() const {
  uint64_t all = 0;
  for (uint64_t b : bytes) all += b;
  return all;
}

SourcesSection sources_section(const trace::TraceContents& t) {
  SourcesSection out;
  std::map<uint32_t, PoolTotals> steps;
  std::map<std::string, PoolTotals> kinds;
  for (const trace::OpRecord& o : t.ops) {
    if (op_is_view(o.op)) continue;
    out.run.add(o);
    out.phases[phase_name(o.phase)].add(o);
    steps[o.step].add(o);
    out.layers[o.layer].add(o);
    kinds[op_name(o.op)].add(o);
  }
  for (auto& [s, totals] : steps) {
    StepTotals st{s, step_phase(t, s), std::nullopt, totals};
    if (s < t.steps.size() && t.steps[s].end_ns > t.steps[s].start_ns)
      st.step_ns = t.steps[s].end_ns - t.steps[s].start_ns;
    out.steps.push_back(std::move(st));
  }
  out.op_kinds.assign(kinds.begin(), kinds.end());
  std::stable_sort(out.op_kinds.begin(), out.op_kinds.end(),
                   [](const auto& a, const auto& b) { return a.second.op_ns > b.second.op_ns; });
  return out;
}

SpeedSection speed_section(const SourcesSection& sources, int threads, bool measure_bandwidth) {
  SpeedSection out;
  if (!measure_bandwidth) return out;
  const Bandwidth& bw = measured_bandwidth(threads);
  out.bandwidth = bw;
  out.achieved_bytes_per_s = sources.run.bytes_per_s();
  const double ref = threads > 1 ? bw.multi_thread_bytes_per_s : bw.single_thread_bytes_per_s;
  out.achieved_fraction_of_bandwidth = ref > 0 ? out.achieved_bytes_per_s / ref : 0.0;
  for (const auto& [kind, k] : sources.op_kinds)
    if (k.bytes_per_s() > out.fastest_bytes_per_s)
      out.fastest_bytes_per_s = k.bytes_per_s(), out.fastest_op_kind = kind;
  out.fastest_fraction_of_bandwidth = ref > 0 ? out.fastest_bytes_per_s / ref : 0.0;
  return out;
}

PredictabilitySection predictability_section(const std::vector<FileRead>& reads) {
  std::vector<std::vector<std::string>> by_range, by_tensor;
  for (const FileRead& r : reads) {
    if (by_range.size() <= r.step) by_range.resize(r.step + 1), by_tensor.resize(r.step + 1);
    by_range[r.step].push_back(fmt::format("{}+{}", r.offset, r.length));
    if (by_tensor[r.step].empty() || by_tensor[r.step].back() != r.tensor) by_tensor[r.step].push_back(r.tensor);
  }
  return {predictability(by_range), predictability(by_tensor)};
}

MemorySection memory_section(const RunData& run) {
  MemorySection out;
  if (!run.has_buffers) return out;
  out.has_buffers = true;
  out.total_peak_bytes = run.peak_bytes;
  struct Live {
    uint64_t bytes = 0, peak = 0, peak_t = 0, peak_step = 0;
    std::map<std::string, uint64_t> tensors;  // key -> bytes
    std::vector<std::pair<std::string, uint64_t>> at_peak;
  };
  std::map<std::string, Live> pools;
  for (const BufferEvent& e : run.buffer_events) {
    const std::string pool = pool_name(e.pool);
    if (e.growth) {
      uint64_t& s = out.buffer_sizes[e.grown];
      s = std::max(s, e.bytes);
      if (e.pool != Pool::SCRATCH) continue;  // the arena's tensors are counted one by one
    }
    Live& l = pools[pool];
    const std::string key = fmt::format("{}#{}@{}", e.tensor, e.buffer_id, e.offset);
    if (e.alloc) {
      if (e.pool == Pool::SCRATCH) {  // scratch grows, never frees: its size is what is live
        l.bytes = e.bytes;
        l.tensors.clear();
      } else {
        l.bytes += e.bytes;
      }
      l.tensors[key] = e.bytes;
      if (l.bytes > l.peak) {
        l.peak = l.bytes, l.peak_t = e.t_ns, l.peak_step = e.step;
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
  for (auto& [pool, l] : pools) {
    std::sort(l.at_peak.begin(), l.at_peak.end(), [](auto& a, auto& b) { return a.second > b.second; });
    out.pools.push_back({pool, l.peak, l.peak_t, l.peak_step, std::move(l.at_peak)});
  }
  return out;
}

CacheSimSection cache_sim_section(const std::vector<FileRead>& reads, const AnalyzeOptions& opt) {
  CacheSimSection out;
  out.granularity = opt.granularity;
  out.page_bytes = opt.page_bytes;
  const std::vector<Access> s = access_stream(reads, opt.granularity, opt.page_bytes);
  out.accesses = s.size();
  std::set<uint64_t> keys;
  for (const Access& a : s) {
    out.bytes_accessed += a.bytes;
    if (keys.insert(a.key).second) out.unique_bytes += a.bytes;
  }
  for (uint64_t cap : opt.cache_sizes)
    for (CachePolicy p : opt.policies) out.results.push_back(simulate_cache(s, cap, p));
  return out;
}

Report analyze(const RunData& run, const AnalyzeOptions& opt) {
  // Pages up to 1 GiB (the largest huge pages): the miss-ratio curve doubles capacities from one page up to the bytes
  // read, and a read of L bytes is L / page accesses.
  if (opt.page_bytes == 0 || opt.page_bytes > kMaxPageBytes)
    fail("page size {} is outside 1 to {} bytes", opt.page_bytes, kMaxPageBytes);
  const trace::TraceContents& t = run.trace;
  const std::vector<FileRead> reads = file_reads(t);
  Report r;
  r.run_dir = run.dir;
  r.has_model = run.info.has_model;
  r.model_file = run.info.model_file;
  r.model_size_bytes = run.info.model_size_bytes;
  r.threads = run.info.threads.value_or(1);
  r.n_steps = t.steps.size();
  r.n_ops = t.ops.size();
  r.trace_complete = t.complete;
  r.trace_stop_reason = t.stop_reason;
  r.order = order_section(t, reads);
  r.hot_cold = hot_cold_section(run, reads, opt.page_bytes);
  r.sources = sources_section(t);
  r.speed = speed_section(r.sources, r.threads, opt.measure_bandwidth);
  r.thread_time = thread_time(t);
  r.predictability = predictability_section(reads);
  r.io = io_summary(t);
  r.memory = memory_section(run);
  if (!opt.cache_sizes.empty()) r.cache_sim = cache_sim_section(reads, opt);
  r.moe = moe_section(run, reads, opt.experts);
  r.weight_cache = weight_cache_section(run, opt.storage);
  return r;
}

}  // namespace tt::analysis
