#include "serve/api.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "analysis/analysis.h"
#include "analysis/thread_time.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/text.h"
#include "export/export.h"

namespace tt::serve {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

[[noreturn]] void bad(int status, std::string message) { throw ApiError{status, std::move(message)}; }

bool parse_i64(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  auto [ptr, ec] = std::from_chars(b, e, out);
  return ec == std::errc() && ptr == e;
}

bool parse_f64(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(out);
}

bool has(const Params& p, const char* key) { return p.count(key) != 0; }

int64_t get_int(const Params& p, const char* key, int64_t dflt, int64_t lo, int64_t hi) {
  auto it = p.find(key);
  if (it == p.end()) return dflt;
  int64_t v = 0;
  if (!parse_i64(it->second, v)) bad(400, fmt::format("parameter '{}': '{}' is not an integer", key, it->second));
  if (v < lo || v > hi) bad(400, fmt::format("parameter '{}': {} is outside [{}, {}]", key, v, lo, hi));
  return v;
}

double get_num(const Params& p, const char* key, double dflt, double lo, double hi) {
  auto it = p.find(key);
  if (it == p.end()) return dflt;
  double v = 0;
  if (!parse_f64(it->second, v)) bad(400, fmt::format("parameter '{}': '{}' is not a number", key, it->second));
  if (v < lo || v > hi) bad(400, fmt::format("parameter '{}': {} is outside [{}, {}]", key, v, lo, hi));
  return v;
}

bool get_bool(const Params& p, const char* key, bool dflt) {
  auto it = p.find(key);
  if (it == p.end()) return dflt;
  if (it->second == "1" || it->second == "true") return true;
  if (it->second == "0" || it->second == "false") return false;
  bad(400, fmt::format("parameter '{}': '{}' is not 0 or 1", key, it->second));
}

// Adds the bytes of [a, b) that fall in [start, start + bins*width) to the bins (bytes per bin).
void add_range(std::vector<double>& acc, double start, double width, uint64_t a, uint64_t b, double mult = 1) {
  const double lo = std::max<double>(static_cast<double>(a), start);
  const double hi = std::min<double>(static_cast<double>(b), start + width * acc.size());
  if (hi <= lo) return;
  const double f0 = (lo - start) / width, f1 = (hi - start) / width;
  size_t i0 = static_cast<size_t>(f0), i1 = static_cast<size_t>(f1);
  if (i1 >= acc.size()) i1 = acc.size() - 1;
  if (i0 >= acc.size()) return;
  if (i0 == i1) {
    acc[i0] += (hi - lo) * mult;
    return;
  }
  acc[i0] += (static_cast<double>(i0 + 1) - f0) * width * mult;
  for (size_t i = i0 + 1; i < i1; ++i) acc[i] += width * mult;
  acc[i1] += (f1 - static_cast<double>(i1)) * width * mult;
}

// A step function (values[k] from times[k] on, times sorted; 0 before the first) reduced to its highest value in each
// of px buckets of width w from t0, the value carried into a bucket from before it included.
template <class T>
std::vector<T> max_per_bucket(const std::vector<uint64_t>& times, const std::vector<T>& values, double t0, double w,
                              int64_t px) {
  std::vector<T> out(px);
  size_t k = std::upper_bound(times.begin(), times.end(), t0) - times.begin();
  T current = k > 0 ? values[k - 1] : T{0};
  for (int64_t i = 0; i < px; ++i) {
    const double end = t0 + static_cast<double>(i + 1) * w;
    T m = current;
    while (k < times.size() && static_cast<double>(times[k]) < end) {
      current = values[k];
      m = std::max(m, current);
      ++k;
    }
    out[i] = m;
  }
  return out;
}

json rounded(const std::vector<double>& v, double width) {
  json a = json::array();
  for (double x : v) {
    const double r = x / width;  // mean times each byte of the bin was touched
    a.push_back(r == 0 ? 0.0 : std::round(r * 1000.0) / 1000.0);
  }
  return a;
}

}  // namespace

ServedRun::ServedRun(const std::string& dir) : dir_(dir), run_(load_run(dir)) {
  memory_map_ = run_.memory_map.is_null() ? json{{"tensors", json::array()}, {"file_size", 0}} : run_.memory_map;
  complete_ = run_.trace.complete;
  stop_reason_ = run_.trace.stop_reason;
  index_trace();
  load_buffers();
  // run.json is written last, just before RUN_DIR.partial is renamed: without it (or under the partial name) the
  // run was killed or is still running, even when its trace ends on a record boundary.
  if (!run_.finished || run_.dir.ends_with(".partial")) {
    complete_ = false;
    if (stop_reason_.empty()) stop_reason_ = "the run did not finish (no run.json: killed or still running)";
  }
  load_weight_cache();
  lower_names_.reserve(ops_.size());
  for (const trace::OpRecord& o : ops_) lower_names_.push_back(ascii_lower(o.name));
  summary_ = compute_summary();
}

void ServedRun::index_trace() {
  struct Key {
    int32_t b;
    uint64_t o, l;
    bool w;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.o * 1000003u ^ k.l * 7919u ^ static_cast<uint64_t>(k.b + 7) * 31u ^ k.w);
    }
  };
  std::unordered_map<Key, size_t, KeyHash> unique;
  auto touch = [&](uint32_t step, const Touch& t) {
    auto [it, fresh] = unique.try_emplace(Key{t.buffer_id, t.offset, t.length, t.write}, touches_.size());
    if (fresh) touches_.push_back({t, {}});
    touches_[it->second].steps.push_back(step);
  };
  for (const trace::OpRecord& o : ops_) {
    for (const trace::TensorRecord& in : o.inputs) {
      for (const trace::RangeRecord& r : in.ranges) {
        if (r.length == 0) continue;
        touch(o.step, {r.pool == Pool::MODEL_FILE ? -1 : r.buffer_id, r.offset, r.length, false});
      }
    }
    if (o.write.length > 0 && o.write.pool != Pool::MODEL_FILE)
      touch(o.step, {o.write.buffer_id, o.write.offset, o.write.length, true});
    t_end_ns_ = std::max(t_end_ns_, o.end_ns);
  }
  for (const trace::StepMarker& m : markers_) t_end_ns_ = std::max(t_end_ns_, m.end_ns);
  spans_ = run_.trace.spans;
  std::sort(spans_.begin(), spans_.end(),
            [](const trace::SpanRecord& a, const trace::SpanRecord& b) { return a.start_ns < b.start_ns; });
  for (const trace::SpanRecord& s : spans_) {
    max_span_ns_ = std::max(max_span_ns_, s.end_ns > s.start_ns ? s.end_ns - s.start_ns : 0);
    n_threads_ = std::max<int>(n_threads_, s.thread + 1);
    t_end_ns_ = std::max(t_end_ns_, s.end_ns);
  }
}

void ServedRun::load_buffers() {
  std::map<Pool, size_t> pool_index;
  std::vector<int64_t> live;
  int64_t last_step = -1;
  for (const BufferEvent& e : run_.buffer_events) {
    if (e.growth) continue;  // the whole buffer, not a tensor in it
    if (!pool_index.count(e.pool)) {
      pool_index[e.pool] = buffer_pools_.size();
      buffer_pools_.push_back(pool_name(e.pool));
      live.push_back(0);
      live_bytes_.emplace_back(live_t_.size(), 0);
    }
    const size_t k = pool_index[e.pool];
    // The arena, scratch and inputs are reused from scratch every step: what a step leaves allocated (its
    // outputs) is gone when the next step begins.
    if (e.step != last_step) {
      for (const auto& [pool, q] : pool_index)
        if (pool != Pool::KV_CACHE) live[q] = 0;
      last_step = e.step;
    }
    // Byte counts are below 2^63 in any real run; a wrapped sum only draws a wrong curve.
    live[k] += (e.alloc ? 1 : -1) * static_cast<int64_t>(e.bytes);
    live_t_.push_back(e.t_ns);
    int64_t total = 0;
    for (size_t q = 0; q < live.size(); ++q) {
      live_bytes_[q].push_back(live[q]);
      total += live[q];
    }
    if (total > 0 && static_cast<uint64_t>(total) > peak_bytes_) {
      peak_bytes_ = total;
      peak_t_ = live_t_.back();
    }
  }
}

void ServedRun::load_weight_cache() {
  // A weight_cache run.json does not hold as written is answered by the route alone: the other views still work.
  try {
    weight_cache_ = analysis::weight_cache_section(run_);
    if (!weight_cache_) return;
    budget_ = run_.info.weight_cache->budget;
    direct_io_ = run_.info.weight_cache->direct_io;
  } catch (const Error& e) {
    weight_cache_error_ = e.what();
  }
  if (!weight_cache_error_.empty()) {
    weight_cache_.reset();
    return;
  }
  const std::vector<trace::WeightLoadRecord>& loads = run_.trace.weight_loads;
  const std::vector<uint64_t>& after = weight_cache_->resident_after;
  std::vector<size_t> by_end(loads.size());
  for (size_t i = 0; i < by_end.size(); ++i) by_end[i] = i;
  std::stable_sort(by_end.begin(), by_end.end(), [&](size_t a, size_t b) { return loads[a].end_ns < loads[b].end_ns; });
  for (size_t i : by_end) {
    resident_t_.push_back(loads[i].end_ns);
    resident_bytes_.push_back(after[i]);
    peak_resident_ = std::max(peak_resident_, after[i]);
  }
}

json ServedRun::summary_entry(size_t index) const {
  return {{"index", index},
          {"dir", dir_},
          {"name", fs::path(dir_).filename().string()},
          {"model", run_.info.model_file.empty() ? run_.model_path : run_.info.model_file},
          {"prompt", run_.info.prompt},
          {"generated_text", run_.info.generated_text},
          {"steps", n_steps()},
          {"ops", ops_.size()},
          {"complete", complete_}};
}

json ServedRun::run_json() const {
  json buffers = json::array();
  for (const RunBuffer& b : run_.buffers)
    buffers.push_back({{"id", b.id}, {"pool", pool_name(b.pool)}, {"name", b.name}, {"size", b.size}});
  json derived = {{"dir", dir_},
                  {"steps", n_steps()},
                  {"ops", ops_.size()},
                  {"spans", spans_.size()},
                  {"threads", n_threads_},
                  {"t_end_ns", t_end_ns_},
                  {"complete", complete_},
                  {"stop_reason", stop_reason_},
                  {"graphs", run_.graphs.size()},
                  {"buffers", buffers},
                  {"file_size", run_.file_size.value_or(0)},
                  {"routed", !run_.trace.routing.empty()},
                  {"weight_budget", weight_cache_.has_value() || !weight_cache_error_.empty()}};
  json times = json::array();
  for (size_t st = 0; st < n_steps(); ++st) {
    if (st < markers_.size()) {
      times.push_back({markers_[st].start_ns, markers_[st].end_ns, phase_name(markers_[st].phase)});
    } else {
      const auto [b, e] = step_ops_[st];
      times.push_back(
          {b < e ? ops_[b].start_ns : 0, b < e ? ops_[e - 1].end_ns : 0, b < e ? phase_name(ops_[b].phase) : "?"});
    }
  }
  derived["step_times"] = std::move(times);
  json step_graph = json::array();
  for (const RunStep& st : run_.steps) step_graph.push_back(st.graph);
  derived["step_graph"] = std::move(step_graph);
  return {{"run", run_.run.is_null() ? json::object() : run_.run}, {"derived", derived}};
}

json ServedRun::routing() const {
  if (run_.trace.routing.empty()) bad(404, "the run has no expert routing (not a mixture-of-experts run)");
  exporter::RoutingTable t;
  try {
    t = exporter::routing_table(run_);
  } catch (const Error& e) {
    bad(422, e.what());  // routing the table cannot hold (an expert id past int16)
  }
  // Each layer's expert count is its router's output count (the loader checked every layer has a router).
  int64_t n_expert = 0;
  for (int layer : t.layers)
    if (const MapTensor* r = run_.tensor_named(fmt::format("blk.{}.ffn_gate_inp.weight", layer));
        r && r->shape.size() >= 2)
      n_expert = std::max(n_expert, r->shape[1]);
  json tokens = json::array();
  for (const auto& [step, pos] : t.tokens) tokens.push_back({step, pos});
  return {{"n_expert", n_expert}, {"top_k", t.top_k},     {"layers", t.layers},
          {"tokens", tokens},     {"experts", t.experts}, {"weights", t.weights}};
}

json ServedRun::expert_cache(const Params& p) const {
  if (run_.trace.routing.empty()) bad(404, "the run has no expert routing (not a mixture-of-experts run)");
  analysis::MoeShape shape;
  try {
    shape = analysis::moe_shape(run_);
  } catch (const Error& e) {
    bad(422, e.what());  // routing the model's experts cannot hold
  }
  auto param = [&](const char* key, const std::string& dflt) {
    auto it = p.find(key);
    return it == p.end() ? dflt : it->second;
  };
  // Default sizes: 1, 2, 4, ... experts per layer up to every expert (the curve's whole range).
  std::string sizes = std::to_string(shape.n_expert);
  for (int n = shape.n_expert / 2; n >= 1; n /= 2) sizes = std::to_string(n) + "," + sizes;
  analysis::ExpertCacheOptions opt;
  try {
    opt.sizes = analysis::expert_cache_sizes_from_list(param("sizes", sizes));
    if (has(p, "policies")) opt.policies = analysis::policies_from_list(p.at("policies"));
    opt.scope = analysis::scope_from_name(param("scope", "global"));
    opt.prefetch = analysis::prefetch_from_name(param("prefetch", "none"));
  } catch (const Error& e) {
    bad(400, e.what());
  }
  // Each size replays every policy over the whole routing: bound the work one request asks for.
  constexpr size_t kMaxReplays = 256;
  if (opt.sizes.size() * opt.policies.size() > kMaxReplays)
    bad(400, fmt::format("{} sizes x {} policies: at most {} replays a request", opt.sizes.size(), opt.policies.size(),
                         kMaxReplays));
  opt.read_bytes_per_s = get_num(p, "read_gbps", 0, 0.001, 1e6) * 1e9;
  analysis::PooledExpertCache c;
  try {
    c = analysis::pooled_expert_cache({&run_}, opt);
  } catch (const Error& e) {
    bad(400, e.what());  // prefetch predicted on a run without predictions
  }
  json j = analysis::expert_cache_json(c.cache, c.tokens, c.scope, c.prefetch, c.read_rate);
  uint64_t layer_expert_bytes = 0;
  for (uint64_t b : shape.expert_bytes) layer_expert_bytes += b;
  j["tokens"] = c.tokens;
  j["n_expert"] = shape.n_expert;
  j["expert_bytes"] = layer_expert_bytes * static_cast<uint64_t>(shape.n_expert);  // every routed layer's experts
  return j;
}

uint32_t ServedRun::parse_step(const Params& p, const char* key, uint32_t dflt) const {
  if (n_steps() == 0) bad(404, "the run has no steps");
  return static_cast<uint32_t>(get_int(p, key, dflt, 0, static_cast<int64_t>(n_steps()) - 1));
}

json ServedRun::steps(const Params& p) const {
  const int64_t last = static_cast<int64_t>(n_steps()) - 1;
  const int64_t from = get_int(p, "from", 0, 0, std::max<int64_t>(last, 0));
  const int64_t to = get_int(p, "to", last, -1, std::max<int64_t>(last, 0));
  json rows = json::array();
  for (int64_t s = from; s <= to; ++s) {
    json row;
    if (static_cast<size_t>(s) < run_.steps.size()) {
      row = run_.steps[s].json;
    } else {
      row = json{{"step", s}};
      if (static_cast<size_t>(s) < markers_.size()) {
        const trace::StepMarker& m = markers_[s];
        row["phase"] = phase_name(m.phase);
        row["start_ns"] = m.start_ns;
        row["end_ns"] = m.end_ns;
        row["pos_begin"] = m.pos_begin;
        row["pos_end"] = m.pos_end;
        row["token"] = m.token >= 0 ? json(m.token) : json();
      }
    }
    row.erase("hidden_stats");
    row.erase("logits_stats");
    rows.push_back(std::move(row));
  }
  return {{"from", from}, {"to", to}, {"total", n_steps()}, {"steps", rows}};
}

json ServedRun::op_row(size_t i) const {
  const trace::OpRecord& o = ops_[i];
  uint64_t file_bytes = 0, buffer_bytes = 0;
  json inputs = json::array();
  for (const trace::TensorRecord& in : o.inputs) {
    json ranges = json::array();
    for (const trace::RangeRecord& r : in.ranges) {
      (r.pool == Pool::MODEL_FILE ? file_bytes : buffer_bytes) += r.length;
      json jr = {pool_name(r.pool), r.buffer_id, r.offset, r.length};
      if (r.pos_begin >= 0) {
        jr.push_back(r.pos_begin);
        jr.push_back(r.pos_end);
      }
      ranges.push_back(std::move(jr));
    }
    inputs.push_back({{"name", in.name},
                      {"type", std::string(type_name(in.type))},
                      {"shape", shape_dims(in.ne)},
                      {"pool", pool_name(in.pool)},
                      {"ranges", std::move(ranges)}});
  }
  json row = {{"i", i},
              {"step", o.step},
              {"node", o.node},
              {"phase", phase_name(o.phase)},
              {"op", op_name(o.op)},
              {"layer", o.layer >= 0 ? json(o.layer) : json()},
              {"name", o.name},
              {"thread", o.thread},
              {"n_threads", o.n_threads},
              {"start_ns", o.start_ns},
              {"end_ns", o.end_ns},
              {"type", std::string(type_name(o.out.type))},
              {"shape", shape_dims(o.out.ne)},
              {"pool", pool_name(o.out.pool)},
              {"out_bytes", o.out.bytes},
              {"file_bytes", file_bytes},
              {"buffer_bytes", buffer_bytes},
              {"inputs", std::move(inputs)}};
  if (o.has_stats)
    row["stats"] = {{"min", o.stats.min},       {"max", o.stats.max},
                    {"mean", o.stats.mean},     {"nan", o.stats.nan_count},
                    {"inf", o.stats.inf_count}, {"hash", fmt::format("{:016x}", o.stats.hash)}};
  return row;
}

json ServedRun::ops(const Params& p) const {
  const int64_t last = static_cast<int64_t>(n_steps()) - 1;
  int64_t from = 0, to = last;
  if (has(p, "step")) from = to = get_int(p, "step", 0, 0, std::max<int64_t>(last, 0));
  from = get_int(p, "from_step", from, 0, std::max<int64_t>(last, 0));
  to = get_int(p, "to_step", to, -1, std::max<int64_t>(last, 0));
  const bool by_layer = has(p, "layer");
  const int64_t layer = get_int(p, "layer", -1, -1, 65535);
  std::vector<OpKind> kinds;
  if (has(p, "op")) {
    std::stringstream ss(p.at("op"));
    std::string k;
    while (std::getline(ss, k, ',')) {
      bool found = false;
      for (int i = 0; i < static_cast<int>(OpKind::kCount); ++i)
        if (k == op_name(static_cast<OpKind>(i))) {
          kinds.push_back(static_cast<OpKind>(i));
          found = true;
        }
      if (!found) bad(400, fmt::format("parameter 'op': unknown op kind '{}'", k));
    }
  }
  int phase = -1;
  if (has(p, "phase")) {
    const std::string& ph = p.at("phase");
    if (ph == "PROMPT")
      phase = 0;
    else if (ph == "GENERATE")
      phase = 1;
    else
      bad(400, fmt::format("parameter 'phase': '{}' is not PROMPT or GENERATE", ph));
  }
  const std::string name = ascii_lower(has(p, "name") ? p.at("name") : "");
  const bool views = get_bool(p, "views", true);
  // Bounded by the op count, so offset + limit cannot overflow.
  const int64_t n_ops = static_cast<int64_t>(ops_.size());
  const int64_t offset = get_int(p, "offset", 0, 0, n_ops);
  const int64_t limit = get_int(p, "limit", 100, 0, 5000);
  const int64_t locate = get_int(p, "locate", -1, -1, std::max<int64_t>(n_ops - 1, 0));
  if (has(p, "i")) {  // one op by its index in the trace
    const int64_t i = get_int(p, "i", 0, 0, std::max<int64_t>(0, n_ops - 1));
    if (ops_.empty()) bad(404, "the run has no ops");
    return {{"total", 1}, {"offset", 0}, {"rows", json::array({op_row(i)})}};
  }
  const bool all = from == 0 && to == last && !by_layer && kinds.empty() && phase < 0 && name.empty() && views;

  json rows = json::array();
  int64_t total = 0, located = -1;
  if (to >= from && !ops_.empty()) {
    const size_t b = step_ops_[from].first, e = step_ops_[to].second;
    if (all) {  // no filter: direct indexing
      total = static_cast<int64_t>(e - b);
      for (int64_t k = offset; k < std::min<int64_t>(total, offset + limit); ++k) rows.push_back(op_row(b + k));
      if (locate >= static_cast<int64_t>(b) && locate < static_cast<int64_t>(e)) located = locate - b;
    } else {
      for (size_t i = b; i < e; ++i) {
        const trace::OpRecord& o = ops_[i];
        if (by_layer && o.layer != layer) continue;
        if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), o.op) == kinds.end()) continue;
        if (phase >= 0 && static_cast<int>(o.phase) != phase) continue;
        if (!views && op_is_view(o.op)) continue;
        if (!name.empty() && lower_names_[i].find(name) == std::string::npos) continue;
        if (total >= offset && total < offset + limit) rows.push_back(op_row(i));
        if (static_cast<int64_t>(i) == locate) located = total;
        ++total;
      }
    }
  }
  json r = {{"total", total}, {"offset", offset}, {"rows", std::move(rows)}};
  if (locate >= 0) r["located"] = located >= 0 ? json(located) : json();
  return r;
}

json ServedRun::spans(const Params& p) const {
  const double t0 = get_num(p, "t0", 0, 0, 1e19);
  const double t1 = get_num(p, "t1", static_cast<double>(t_end_ns_), 0, 1e19);
  if (t1 <= t0) bad(400, "parameter 't1' must be greater than 't0'");
  const int64_t px = get_int(p, "px", 1500, 1, 20000);
  const int64_t limit = get_int(p, "limit", 20000, 0, 200000);
  const double lo = std::max(0.0, t0 - static_cast<double>(max_span_ns_));
  auto first = std::lower_bound(spans_.begin(), spans_.end(), lo, [](const trace::SpanRecord& s, double v) {
    return static_cast<double>(s.start_ns) < v;
  });
  std::vector<const trace::SpanRecord*> in;
  for (auto it = first; it != spans_.end() && static_cast<double>(it->start_ns) <= t1; ++it)
    if (static_cast<double>(it->end_ns) >= t0) in.push_back(&*it);
  auto op_of = [&](const trace::SpanRecord& s) -> const trace::OpRecord* {
    if (s.step >= n_steps()) return nullptr;
    const auto [b, e] = step_ops_[s.step];
    if (b + s.node < e && ops_[b + s.node].node == s.node) return &ops_[b + s.node];
    for (size_t i = b; i < e; ++i)
      if (ops_[i].node == s.node) return &ops_[i];
    return nullptr;
  };
  json r = {{"t0", t0}, {"t1", t1}, {"threads", n_threads_}, {"count", in.size()}};
  if (static_cast<int64_t>(in.size()) <= limit) {
    json rows = json::array();
    for (const trace::SpanRecord* s : in) {
      const trace::OpRecord* o = op_of(*s);
      rows.push_back({s->thread, s->start_ns, s->end_ns, s->step, s->node, o ? static_cast<int>(o->op) : -1,
                      o ? o->layer : -1, o ? static_cast<int64_t>(o - ops_.data()) : -1});
    }
    r["mode"] = "spans";
    r["columns"] = {"thread", "start_ns", "end_ns", "step", "node", "op", "layer", "i"};
    r["spans"] = std::move(rows);
    return r;
  }
  // Too many to send: per thread and pixel bucket, the busy fraction and the op kind / layer with the most time.
  const double w = (t1 - t0) / static_cast<double>(px);
  const size_t nk = static_cast<size_t>(OpKind::kCount);
  int max_layer = 0;
  for (const trace::OpRecord& o : ops_) max_layer = std::max<int>(max_layer, o.layer);
  const size_t nl = static_cast<size_t>(max_layer) + 2;  // slot 0: no layer
  const size_t nt = static_cast<size_t>(std::max(1, n_threads_));
  std::vector<double> busy(nt * px, 0), by_op(nt * px * nk, 0), by_layer(nt * px * nl, 0);
  for (const trace::SpanRecord* s : in) {
    const trace::OpRecord* o = op_of(*s);
    const double a = std::max<double>(t0, s->start_ns), b = std::min<double>(t1, s->end_ns);
    if (b < a || s->thread >= nt) continue;
    int64_t i0 = static_cast<int64_t>((a - t0) / w), i1 = static_cast<int64_t>((b - t0) / w);
    i1 = std::min<int64_t>(i1, px - 1);
    for (int64_t i = i0; i <= i1; ++i) {
      const double ba = t0 + i * w, bb = ba + w;
      const double ov = std::max(0.0, std::min(b, bb) - std::max(a, ba));
      const size_t k = s->thread * px + i;
      busy[k] += ov;
      if (o) {
        by_op[k * nk + static_cast<size_t>(o->op)] += ov;
        by_layer[k * nl + static_cast<size_t>(o->layer + 1)] += ov;
      }
    }
  }
  json rows = json::array();
  for (size_t th = 0; th < nt; ++th)
    for (int64_t i = 0; i < px; ++i) {
      const size_t k = th * px + i;
      if (busy[k] <= 0) continue;
      const double* ops = &by_op[k * nk];
      const double* layers = &by_layer[k * nl];
      const int op = static_cast<int>(std::max_element(ops, ops + nk) - ops);
      const int layer = static_cast<int>(std::max_element(layers, layers + nl) - layers) - 1;
      rows.push_back({th, i, std::round(std::min(1.0, busy[k] / w) * 1000) / 1000, op, layer});
    }
  r["mode"] = "buckets";
  r["px"] = px;
  r["columns"] = {"thread", "bucket", "busy", "op", "layer"};
  r["buckets"] = std::move(rows);
  return r;
}

json ServedRun::weight_cache(const Params& p) const {
  if (!weight_cache_error_.empty()) bad(422, weight_cache_error_);
  if (!weight_cache_) bad(404, "the run has no weight budget (not a run --weight-budget run)");
  const std::vector<trace::WeightLoadRecord>& loads = run_.trace.weight_loads;
  const int64_t n = static_cast<int64_t>(loads.size());
  const double t0 = get_num(p, "t0", 0, 0, 1e19);
  const double t1 = get_num(p, "t1", static_cast<double>(std::max<uint64_t>(t_end_ns_, 1)), 0, 1e19);
  if (t1 <= t0) bad(400, "parameter 't1' must be greater than 't0'");
  const int64_t px = get_int(p, "px", 800, 1, 20000);
  const std::optional<uint32_t> step = has(p, "step") ? std::optional(parse_step(p, "step", 0)) : std::nullopt;
  const int64_t offset = get_int(p, "offset", 0, 0, n);
  const int64_t limit = get_int(p, "limit", 1000, 0, 5000);

  // The loads of the step (or all) whose read overlaps the window, one page of them.
  const std::vector<uint64_t>& after = weight_cache_->resident_after;
  json rows = json::array();
  int64_t total = 0;
  for (size_t i = 0; i < loads.size(); ++i) {
    const trace::WeightLoadRecord& l = loads[i];
    if ((step && l.step != *step) || static_cast<double>(l.end_ns) < t0 || static_cast<double>(l.start_ns) > t1)
      continue;
    if (total >= offset && total < offset + limit)
      rows.push_back({i, l.step, l.node, l.tensor, l.expert, l.offset, l.bytes, l.start_ns, l.end_ns, l.wait_ns, l.hit,
                      l.prefetch, after[i]});
    ++total;
  }
  // Per step, as steps.jsonl counts them (tracer/weight_loads.h): a miss reads its bytes and its node waits.
  struct StepTotals {
    uint64_t hits = 0, misses = 0, prefetches = 0, bytes_read = 0, stall_ns = 0;
  };
  std::vector<StepTotals> per_step(n_steps());
  StepTotals all;
  for (const trace::WeightLoadRecord& l : loads)
    for (StepTotals* t : {&per_step[l.step], &all}) {
      t->prefetches += l.prefetch;
      if (l.hit) {
        ++t->hits;
      } else {
        ++t->misses;
        t->bytes_read += l.bytes;
        t->stall_ns += l.wait_ns;
      }
    }
  json steps = json::array();
  for (size_t s = 0; s < per_step.size(); ++s) {
    const StepTotals& t = per_step[s];
    steps.push_back({{"step", s},
                     {"hits", t.hits},
                     {"misses", t.misses},
                     {"prefetches", t.prefetches},
                     {"bytes_read", t.bytes_read},
                     {"stall_ns", t.stall_ns}});
  }
  return {{"budget", budget_},
          {"budget_bytes", weight_cache_->capacity},
          {"policy", weight_cache_->policy},
          {"direct_io", direct_io_},
          {"totals",
           {{"accesses", n},
            {"hits", all.hits},
            {"misses", all.misses},
            {"prefetches", all.prefetches},
            {"bytes_read", all.bytes_read},
            {"stall_ns", all.stall_ns},
            {"read_bytes_per_s", weight_cache_->read_bytes_per_s},
            {"peak_resident_bytes", peak_resident_}}},
          {"t0", t0},
          {"t1", t1},
          {"px", px},
          {"occupancy", max_per_bucket(resident_t_, resident_bytes_, t0, (t1 - t0) / static_cast<double>(px), px)},
          {"total", total},
          {"offset", offset},
          {"loads_columns",
           {"i", "step", "node", "tensor", "expert", "offset", "bytes", "start_ns", "end_ns", "wait_ns", "hit",
            "prefetch", "resident_bytes"}},
          {"loads", std::move(rows)},
          {"steps", std::move(steps)}};
}

json ServedRun::graph(const Params& p) const {
  const uint32_t step = parse_step(p, "step", 0);
  const json* g = run_.graph_of_step(step);
  if (!g) bad(404, fmt::format("no graph recorded for step {}", step));
  const int gid = run_.steps[step].graph;
  json timing = json::array();
  const auto [b, e] = step_ops_[step];
  for (size_t i = b; i < e; ++i) {
    const trace::OpRecord& o = ops_[i];
    timing.push_back({o.node, o.start_ns, o.end_ns, o.thread, i});
  }
  if (get_bool(p, "timing_only", false))
    return {{"step", step},
            {"graph_id", gid},
            {"timing_columns", {"node", "start_ns", "end_ns", "thread", "i"}},
            {"timing", std::move(timing)}};
  return {{"step", step},
          {"graph_id", gid},
          {"graph", *g},
          {"timing_columns", {"node", "start_ns", "end_ns", "thread", "i"}},
          {"timing", std::move(timing)}};
}

json ServedRun::buffers(const Params& p) const {
  const double t0 = get_num(p, "t0", 0, 0, 1e19);
  const double t1 = get_num(p, "t1", static_cast<double>(std::max<uint64_t>(t_end_ns_, 1)), 0, 1e19);
  if (t1 <= t0) bad(400, "parameter 't1' must be greater than 't0'");
  const int64_t px = get_int(p, "px", 800, 1, 20000);
  const int64_t max_events = get_int(p, "max_events", 2000, 0, 100000);
  const double w = (t1 - t0) / static_cast<double>(px);
  // Per pool and bucket, the highest live byte count (the value carried over from before t0 included).
  json series = json::object();
  for (size_t q = 0; q < buffer_pools_.size(); ++q)
    series[buffer_pools_[q]] = max_per_bucket(live_t_, live_bytes_[q], t0, w, px);
  json events = json::array();
  size_t n_events = 0;
  std::vector<const BufferEvent*> in;
  for (const BufferEvent& e : run_.buffer_events) {
    const double t = static_cast<double>(e.t_ns);
    if (t >= t0 && t <= t1) in.push_back(&e);
  }
  n_events = in.size();
  if (static_cast<int64_t>(n_events) <= max_events)
    for (const BufferEvent* e : in) events.push_back(e->to_json());
  json buffer_steps = json::array();
  for (const BufferStep& b : run_.buffer_steps) buffer_steps.push_back(b.to_json());
  return {{"t0", t0},
          {"t1", t1},
          {"px", px},
          {"pools", buffer_pools_},
          {"live_max", std::move(series)},
          {"peak", {{"bytes", peak_bytes_}, {"t_ns", peak_t_}}},
          {"event_count", n_events},
          {"events_columns", {"t_ns", "step", "kind", "pool", "buffer_id", "offset", "bytes", "tensor", "reuse"}},
          {"events", std::move(events)},
          {"steps", buffer_steps}};
}

json ServedRun::heatmap(const Params& p) const {
  const uint32_t step = parse_step(p, "step", static_cast<uint32_t>(std::max<size_t>(n_steps(), 1) - 1));
  const bool cumulative = get_bool(p, "cumulative", true);
  const uint64_t file_size = run_.file_size.value_or(0);
  const int64_t bins = get_int(p, "bins", 1000, 1, 20000);
  const int64_t tbins = get_int(p, "track_bins", 512, 1, 20000);
  const double start = get_num(p, "start", 0, 0, static_cast<double>(std::max<uint64_t>(file_size, 1)));
  const double end =
      get_num(p, "end", static_cast<double>(file_size), 0, static_cast<double>(std::max<uint64_t>(file_size, 1)));
  if (end <= start) bad(400, "parameter 'end' must be greater than 'start'");
  const double width = (end - start) / static_cast<double>(bins);

  // Runtime tracks: KV cache buffers side by side; activation arena, scratch and inputs side by side.
  struct Track {
    std::string name;
    std::vector<std::pair<int, uint64_t>> base;  // buffer id -> offset in the track
    uint64_t size = 0;
    std::vector<double> read, write;
  };
  Track kv{"KV cache", {}, 0, {}, {}}, act{"activations", {}, 0, {}, {}};
  for (const RunBuffer& b : run_.buffers) {
    Track& t = b.pool == Pool::KV_CACHE ? kv : act;
    t.base.push_back({b.id, t.size});
    t.size += b.size;
  }
  for (Track* t : {&kv, &act}) t->read.assign(tbins, 0), t->write.assign(tbins, 0);
  std::map<int, std::pair<Track*, uint64_t>> where;
  for (Track* t : {&kv, &act})
    for (auto [id, base] : t->base) where[id] = {t, base};

  // Tensors by their index in memory-map.json, which the viewer has (run_.tensors is sorted by offset).
  const std::vector<MapTensor>& tensors = run_.tensors;
  std::vector<std::pair<uint64_t, size_t>> by_offset;  // offset_start -> tensor index in memory-map.json
  for (const MapTensor& t : tensors) by_offset.push_back({t.offset_start, t.index});
  std::sort(by_offset.begin(), by_offset.end());
  std::vector<uint64_t> t_reads(tensors.size(), 0), t_bytes(tensors.size(), 0);

  std::vector<double> file(bins, 0);
  uint64_t file_bytes = 0, kv_read = 0, kv_written = 0, act_read = 0, act_written = 0;
  for (const UniqueTouch& u : touches_) {
    const auto hi = std::upper_bound(u.steps.begin(), u.steps.end(), step);
    const auto lo = cumulative ? u.steps.begin() : std::lower_bound(u.steps.begin(), hi, step);
    const uint64_t n = static_cast<uint64_t>(hi - lo);
    if (n == 0) continue;
    const Touch& t = u.t;
    if (t.buffer_id < 0) {
      add_range(file, start, width, t.offset, t.offset + t.length, static_cast<double>(n));
      file_bytes += t.length * n;
      auto it = std::upper_bound(by_offset.begin(), by_offset.end(), std::make_pair(t.offset, SIZE_MAX));
      if (it != by_offset.begin()) {
        const size_t ti = std::prev(it)->second;
        t_reads[ti] += n;
        t_bytes[ti] += t.length * n;
      }
      continue;
    }
    auto w = where.find(t.buffer_id);
    if (w == where.end()) continue;
    Track& tr = *w->second.first;
    const double tw = static_cast<double>(std::max<uint64_t>(tr.size, 1)) / static_cast<double>(tbins);
    add_range(t.write ? tr.write : tr.read, 0, tw, w->second.second + t.offset, w->second.second + t.offset + t.length,
              static_cast<double>(n));
    if (&tr == &kv)
      (t.write ? kv_written : kv_read) += t.length * n;
    else
      (t.write ? act_written : act_read) += t.length * n;
  }
  // A budgeted run: the bytes its cache read from storage (loads that were not hits), in the same bins.
  json storage;
  if (weight_cache_) {
    std::vector<double> bins_read(bins, 0);
    uint64_t read = 0;
    for (const trace::WeightLoadRecord& l : run_.trace.weight_loads) {
      if (l.hit || l.step > step || (!cumulative && l.step != step)) continue;
      add_range(bins_read, start, width, l.offset, l.offset + l.bytes);
      read += l.bytes;
    }
    storage = {{"bytes", read}, {"bins", rounded(bins_read, width)}};
  }
  json tensor_rows = json::array();
  for (size_t i = 0; i < tensors.size(); ++i)
    if (t_reads[i]) tensor_rows.push_back({i, t_reads[i], t_bytes[i]});
  json tracks = json::array();
  for (Track* t : {&kv, &act}) {
    const double tw = static_cast<double>(std::max<uint64_t>(t->size, 1)) / static_cast<double>(tbins);
    json segs = json::array();
    for (const auto& entry : t->base) {
      const auto id = entry.first;
      const auto base = entry.second;
      auto it = std::find_if(run_.buffers.begin(), run_.buffers.end(), [id](const RunBuffer& b) { return b.id == id; });
      if (it == run_.buffers.end()) continue;  // bases are built from run_.buffers, so this cannot happen
      segs.push_back({{"buffer_id", id},
                      {"name", it->name},
                      {"pool", pool_name(it->pool)},
                      {"start", base},
                      {"end", base + it->size}});
    }
    tracks.push_back({{"name", t->name},
                      {"size", t->size},
                      {"bins", tbins},
                      {"segments", segs},
                      {"read", rounded(t->read, tw)},
                      {"write", rounded(t->write, tw)}});
  }
  json r = {{"step", step},
            {"cumulative", cumulative},
            {"start", start},
            {"end", end},
            {"bins", bins},
            {"file_size", file_size},
            {"file", rounded(file, width)},
            {"tensor_columns", {"tensor", "reads", "bytes"}},
            {"tensors", std::move(tensor_rows)},
            {"bytes",
             {{"file", file_bytes},
              {"kv_read", kv_read},
              {"kv_written", kv_written},
              {"activation_read", act_read},
              {"activation_written", act_written}}},
            {"tracks", std::move(tracks)}};
  if (!storage.is_null()) r["storage"] = std::move(storage);
  return r;
}

// The figures `analyze` reports (analysis::sources_section, analysis::tensor_reads), so the viewer and `analyze`
// agree: per step the non-view ops, their time and the bytes they read; per layer and op kind the ops' time; the
// tensors read most.
json ServedRun::compute_summary() const {
  const analysis::SourcesSection src = analysis::sources_section(run_.trace);
  std::vector<const analysis::PoolTotals*> per_step(n_steps(), nullptr);
  for (const analysis::StepTotals& s : src.steps) per_step[s.step] = &s.totals;
  const analysis::PoolTotals none;
  json steps = json::array();
  for (size_t s = 0; s < n_steps(); ++s) {
    const analysis::PoolTotals& t = per_step[s] ? *per_step[s] : none;
    const uint64_t file = t.bytes[static_cast<int>(Pool::MODEL_FILE)];
    json row = {{"step", s},
                {"ops", t.ops},
                {"op_ns", t.op_ns},
                {"file_bytes", file},
                {"buffer_bytes", t.total_bytes() - file}};
    const trace::StepMarker& m = markers_[s];
    row["phase"] = phase_name(m.phase);
    row["start_ns"] = m.start_ns;
    row["end_ns"] = m.end_ns;
    row["token"] = m.token;
    if (s < run_.steps.size()) {
      const json& j = run_.steps[s].json;
      row["token_text"] = j.value("token_text", json());
      row["entropy"] = j.value("entropy", json());
      row["top1_top2_gap"] = j.value("top1_top2_gap", json());
    }
    steps.push_back(std::move(row));
  }
  json layers = json::array();
  for (const auto& [l, t] : src.layers) layers.push_back({{"layer", l >= 0 ? json(l) : json()}, {"ns", t.op_ns}});
  json kinds = json::array();
  for (const auto& [k, t] : src.op_kinds) kinds.push_back({{"op", k}, {"count", t.ops}, {"ns", t.op_ns}});
  const std::map<std::string, analysis::TensorReads> reads = analysis::tensor_reads(analysis::file_reads(run_.trace));
  std::vector<std::pair<std::string, const analysis::TensorReads*>> hot;
  for (const auto& [name, r] : reads) hot.push_back({name, &r});
  std::stable_sort(hot.begin(), hot.end(),
                   [](const auto& a, const auto& b) { return a.second->bytes > b.second->bytes; });
  if (hot.size() > 25) hot.resize(25);
  json hottest = json::array();
  for (const auto& [name, r] : hot) hottest.push_back({{"name", name}, {"reads", r->reads}, {"bytes", r->bytes}});
  return {{"steps", std::move(steps)},        {"layers", std::move(layers)},
          {"op_kinds", std::move(kinds)},     {"hottest_tensors", std::move(hottest)},
          {"peak_buffer_bytes", peak_bytes_}, {"thread_time", analysis::thread_time(markers_, run_.trace.spans)}};
}

bool host_allowed(const std::string& host_header, const std::vector<std::string>& names) {
  const std::string h = ascii_lower(host_header);
  // The name ends at the port's colon; an IPv6 address keeps its brackets.
  const size_t name_end = h.starts_with('[') ? h.find(']') + 1 : h.find(':');
  if (name_end == 0) return false;  // '[' without ']'
  const std::string name = h.substr(0, name_end);
  if (name_end < h.size()) {
    const std::string port = h.substr(name_end);
    if (port.size() < 2 || port.size() > 6 || port[0] != ':' ||
        !std::all_of(port.begin() + 1, port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
  }
  if (name.empty()) return false;
  std::vector<std::string> allowed = {"localhost", "127.0.0.1", "::1"};
  allowed.insert(allowed.end(), names.begin(), names.end());
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
    return !a.empty() && name == ascii_lower(a.find(':') != std::string::npos ? "[" + a + "]" : a);
  });
}

Api::Api(const std::vector<std::string>& run_dirs) {
  for (const std::string& d : run_dirs) runs_.push_back(std::make_unique<ServedRun>(d));
}

Response Api::handle(const std::string& path, const Params& params) const {
  auto error = [](int status, const std::string& message) {
    return Response{status, json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace)};
  };
  try {
    std::vector<std::string> parts;
    {
      std::stringstream ss(path);
      std::string part;
      while (std::getline(ss, part, '/'))
        if (!part.empty()) parts.push_back(part);
    }
    for (const std::string& part : parts)
      if (part == ".." || part == "." || part.find('\0') != std::string::npos) return error(400, "bad path");
    if (parts.size() < 2 || parts[0] != "api" || parts[1] != "runs") return error(404, "unknown route " + path);
    json body;
    if (parts.size() == 2) {
      body = json::array();
      for (size_t i = 0; i < runs_.size(); ++i) body.push_back(runs_[i]->summary_entry(i));
      body = json{{"runs", body}};
    } else {
      int64_t index = 0;
      if (!parse_i64(parts[2], index) || index < 0 || index >= static_cast<int64_t>(runs_.size()))
        return error(404, "no run '" + parts[2] + "'");
      const ServedRun& r = *runs_[index];
      const std::string what = parts.size() >= 4 ? parts[3] : "run";
      if (parts.size() > 4) return error(404, "unknown route " + path);
      if (what == "run")
        body = r.run_json();
      else if (what == "memory-map")
        body = r.memory_map();
      else if (what == "steps")
        body = r.steps(params);
      else if (what == "ops")
        body = r.ops(params);
      else if (what == "spans")
        body = r.spans(params);
      else if (what == "graph")
        body = r.graph(params);
      else if (what == "buffers")
        body = r.buffers(params);
      else if (what == "heatmap")
        body = r.heatmap(params);
      else if (what == "summary")
        body = r.summary();
      else if (what == "routing")
        body = r.routing();
      else if (what == "expert-cache")
        body = r.expert_cache(params);
      else if (what == "weight-cache")
        body = r.weight_cache(params);
      else
        return error(404, "unknown route " + path);
    }
    return {200, body.dump(-1, ' ', false, json::error_handler_t::replace)};
  } catch (const ApiError& e) {
    return error(e.status, e.message);
  } catch (const std::exception& e) {
    return error(500, std::string("internal error: ") + e.what());
  }
}

}  // namespace tt::serve
