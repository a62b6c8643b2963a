// The analysis report's JSON (`analyze --json`, docs/analysis.md) and text, made from the section structs.
#include <fmt/format.h>

#include <algorithm>

#include "analysis/analysis.h"

namespace tt::analysis {

using nlohmann::json;

namespace {

constexpr Pool kPools[kNumPools] = {Pool::MODEL_FILE, Pool::KV_CACHE, Pool::ACTIVATION, Pool::INPUT, Pool::SCRATCH};

json order_json(const OrderStats& s, bool with_layers) {
  json h = json::object();
  for (int i = 0; i < kNumJumpBins; ++i) h[kJumpBins[i]] = s.hist[i];
  json j = {{"reads", s.reads},
            {"bytes", s.bytes},
            {"transitions", s.transitions},
            {"forward_fraction", s.forward_fraction()},
            {"contiguous_fraction", s.contiguous_fraction()},
            {"backward_moves", s.backward},
            {"jump_histogram", h},
            {"layers_ascending", s.layer_backward == 0},
            {"layer_backward_moves", s.layer_backward},
            {"steps", s.steps},
            {"steps_with_layers_ascending", s.steps_with_layers_ascending}};
  if (with_layers) j["layer_sequence"] = s.layers;
  return j;
}

json order_json(const OrderSection& o) {
  json phases = json::object(), steps = json::array();
  for (const auto& [name, s] : o.phases) phases[name] = order_json(s, false);
  for (const OrderStep& s : o.steps) {
    json j = order_json(s.stats, true);
    j["step"] = s.step;
    j["phase"] = s.phase;
    if (s.same_reads_as_previous) j["same_reads_as_previous"] = *s.same_reads_as_previous;
    if (s.same_tensors_as_previous) j["same_tensors_as_previous"] = *s.same_tensors_as_previous;
    steps.push_back(std::move(j));
  }
  auto share = [&](uint64_t n) { return o.steps_compared ? static_cast<double>(n) / o.steps_compared : 0.0; };
  return {{"run", order_json(o.run, false)},
          {"phases", phases},
          {"steps", steps},
          {"repeat",
           {{"steps_compared", o.steps_compared},
            {"same_reads_as_previous", o.same_reads},
            {"same_reads_share", share(o.same_reads)},
            {"same_tensors_as_previous", o.same_tensors},
            {"same_tensors_share", share(o.same_tensors)}}}};
}

json hot_cold_json(const HotColdSection& h) {
  json tensors = json::array(), sections = json::array(), regions = json::array(), hist = json::array(),
       mrc = json::array();
  for (const TensorHeat& t : h.tensors)
    tensors.push_back({{"tensor", t.tensor->name},
                       {"layer", t.tensor->layer ? json(*t.tensor->layer) : json()},
                       {"category", t.tensor->category},
                       {"type", t.tensor->type},
                       {"offset", t.tensor->offset_start},
                       {"size_bytes", t.tensor->size_bytes},
                       {"reads", t.reads},
                       {"bytes_read", t.bytes_read},
                       {"distinct_bytes_read", t.distinct_bytes_read},
                       {"never_read_bytes", t.never_read_bytes},
                       {"steps_reading", t.steps_reading}});
  for (const RegionHeat& s : h.sections)
    sections.push_back({{"section", s.section},
                        {"begin", s.begin},
                        {"end", s.end},
                        {"bytes_read", s.bytes_read},
                        {"distinct_bytes_read", s.distinct_bytes_read}});
  for (const RegionHeat& g : h.regions)
    regions.push_back(
        {{"begin", g.begin},
         {"end", g.end},
         {"bytes_read", g.bytes_read},
         {"distinct_bytes_read", g.distinct_bytes_read},
         {"touched_fraction", g.end > g.begin ? static_cast<double>(g.distinct_bytes_read) / (g.end - g.begin) : 0.0}});
  for (auto [b, n] : h.reuse_bins) hist.push_back({{"capacity_needed_bytes", 1ull << b}, {"count", n}});
  for (const MissPoint& m : h.lru_miss_ratio_curve)
    mrc.push_back({{"capacity", m.capacity}, {"misses", m.misses}, {"miss_ratio", m.miss_ratio}});
  return {{"tensors", tensors},
          {"sections", sections},
          {"regions", regions},
          {"never_read",
           {{"file_bytes", h.file_bytes},
            {"distinct_bytes_read", h.distinct_bytes_read},
            {"file_bytes_never_read", h.file_bytes - std::min(h.file_bytes, h.distinct_bytes_read)},
            {"tensor_bytes", h.tensor_bytes},
            {"tensor_bytes_never_read", h.tensor_bytes_never_read}}},
          {"reuse_distance",
           {{"page_bytes", h.page_bytes},
            {"accesses", h.accesses},
            {"cold", h.cold},
            {"unique_bytes", h.unique_bytes},
            {"histogram", hist}}},
          {"lru_miss_ratio_curve", mrc}};
}

json totals_json(const PoolTotals& t) {
  json j = json::object();
  for (int p = 0; p < kNumPools; ++p)
    j[pool_name(kPools[p])] = {{"bytes", t.bytes[p]}, {"ns", static_cast<uint64_t>(t.ns[p])}};
  j["total_bytes"] = t.total_bytes();
  j["op_ns"] = t.op_ns;
  j["ops"] = t.ops;
  j["bytes_per_s"] = t.bytes_per_s();
  return j;
}

json layers_json(const SourcesSection& s) {
  json out = json::array();
  for (const auto& [layer, t] : s.layers) {
    json j = totals_json(t);
    j["layer"] = layer;
    out.push_back(std::move(j));
  }
  return out;
}

json op_kinds_json(const SourcesSection& s) {
  json out = json::array();
  for (const auto& [kind, t] : s.op_kinds) {
    json j = totals_json(t);
    j["op"] = kind;
    out.push_back(std::move(j));
  }
  return out;
}

json sources_json(const SourcesSection& s) {
  json phases = json::object(), steps = json::array();
  for (const auto& [name, t] : s.phases) phases[name] = totals_json(t);
  for (const StepTotals& st : s.steps) {
    json j = totals_json(st.totals);
    j["step"] = st.step;
    j["phase"] = st.phase;
    if (st.step_ns) j["step_ns"] = *st.step_ns;
    steps.push_back(std::move(j));
  }
  return {{"note", "time of each op split over the pools it reads in proportion to the bytes"},
          {"run", totals_json(s.run)},
          {"phases", phases},
          {"steps", steps},
          {"layers", layers_json(s)},
          {"op_kinds", op_kinds_json(s)}};
}

json speed_json(const SpeedSection& sp, const SourcesSection& s) {
  json j = {{"op_kinds", op_kinds_json(s)}, {"layers", layers_json(s)}};
  if (sp.bandwidth) {
    j["bandwidth"] = sp.bandwidth->to_json();
    j["achieved_bytes_per_s"] = sp.achieved_bytes_per_s;
    j["achieved_fraction_of_bandwidth"] = sp.achieved_fraction_of_bandwidth;
    j["fastest_op_kind"] = {{"op", sp.fastest_op_kind},
                            {"bytes_per_s", sp.fastest_bytes_per_s},
                            {"fraction_of_bandwidth", sp.fastest_fraction_of_bandwidth}};
  }
  return j;
}

json predictability_json(const Predictability& p) {
  json out = json::object();
  for (const auto& [name, s] : p) {
    json steps = json::array();
    for (const PredictorScore::Step& x : s.steps)
      steps.push_back({{"step", x.step},
                       {"accesses", x.accesses},
                       {"hits", x.hits},
                       {"hit_rate", x.accesses ? static_cast<double>(x.hits) / x.accesses : 0.0}});
    out[name] = {{"accesses", s.accesses},
                 {"hits", s.hits},
                 {"hit_rate", s.accesses ? static_cast<double>(s.hits) / s.accesses : 0.0},
                 {"steps", steps}};
  }
  return out;
}

json memory_json(const MemorySection& m) {
  if (!m.has_buffers) return {{"note", "no buffers.json"}};
  json pools = json::array();
  for (const PoolPeak& p : m.pools) {
    json live = json::array();
    for (const auto& [name, b] : p.live) live.push_back({{"tensor", name}, {"bytes", b}});
    pools.push_back({{"pool", p.pool},
                     {"peak_bytes", p.peak_bytes},
                     {"t_ns", p.t_ns},
                     {"step", p.step},
                     {"live_tensors", live.size()},
                     {"live", live}});
  }
  return {{"pools", pools}, {"buffer_sizes", m.buffer_sizes}, {"total_peak_bytes", m.total_peak_bytes}};
}

json cache_sim_json(const CacheSimSection& c) {
  json results = json::array();
  for (const CacheResult& r : c.results)
    results.push_back({{"policy", policy_name(r.policy)},
                       {"capacity", r.capacity},
                       {"accesses", r.accesses},
                       {"hits", r.hits},
                       {"misses", r.misses},
                       {"cold_misses", r.cold_misses},
                       {"miss_ratio", r.miss_ratio()},
                       {"bytes_read_from_storage", r.bytes_missed},
                       {"bytes_accessed", r.bytes_accessed}});
  return {{"granularity", c.granularity == Granularity::PAGE ? "page" : "tensor"},
          {"page_bytes", c.page_bytes},
          {"accesses", c.accesses},
          {"bytes_accessed", c.bytes_accessed},
          {"unique_bytes", c.unique_bytes},
          {"results", results}};
}

std::string pct(double x) { return fmt::format("{:.1f}%", 100.0 * x); }
std::string gbps(double bps) { return fmt::format("{:.2f} GB/s", bps / 1e9); }
std::string mib(uint64_t b) { return format_bytes(b); }

}  // namespace

json expert_cache_json(const std::vector<ExpertCacheResult>& cache, uint64_t tokens, CacheScope scope,
                       Prefetch prefetch, const ReadRate& rate) {
  const bool timed = rate.source != ReadRate::Source::NONE;
  json results = json::array();
  for (const ExpertCacheResult& c : cache) {
    const double per_token = c.bytes_loaded_per(tokens);
    results.push_back({{"size", c.size},
                       {"policy", policy_name(c.policy)},
                       {"capacity_bytes", c.capacity_bytes},
                       {"accesses", c.accesses},
                       {"hits", c.hits},
                       {"misses", c.misses},
                       {"cold_misses", c.cold_misses},
                       {"hit_rate", c.hit_rate()},
                       {"bytes_loaded", c.bytes_loaded},
                       {"bytes_loaded_per_token", per_token},
                       {"load_seconds_per_token", timed ? json(per_token / rate.bytes_per_s) : json()},
                       {"prefetches", c.prefetches},
                       {"prefetch_bytes", c.prefetch_bytes},
                       {"useful_prefetches", c.useful_prefetches}});
  }
  return {{"scope", scope_name(scope)},
          {"prefetch", prefetch_name(prefetch)},
          {"read_bytes_per_s", timed ? json(rate.bytes_per_s) : json()},
          {"read_rate_source", read_rate_source_name(rate.source)},
          {"results", results}};
}

namespace {

// The expert-cache replay's table (one run's or pooled runs', `tokens` routed).
std::string expert_cache_text(const std::vector<ExpertCacheResult>& cache, uint64_t tokens, CacheScope scope,
                              Prefetch prefetch, const ReadRate& rate) {
  const bool prefetching = prefetch != Prefetch::NONE, timed = rate.source != ReadRate::Source::NONE;
  std::string o =
      fmt::format("  expert cache replay ({} scope, prefetch {}):\n", scope_name(scope), prefetch_name(prefetch));
  o += fmt::format("  {:>8} {:>10} {:<12} {:>9} {:>9} {:>9} {:>12}{}  {:>15}\n", "size", "capacity", "policy", "hits",
                   "misses", "hit rate", "loaded/token", prefetching ? "  prefetched  useful" : "", "load time/token");
  for (const ExpertCacheResult& c : cache) {
    const double per_token = c.bytes_loaded_per(tokens);
    o += fmt::format("  {:>8} {:>10} {:<12} {:>9} {:>9} {:>9} {:>12}", c.size, mib(c.capacity_bytes),
                     policy_name(c.policy), c.hits, c.misses, pct(c.hit_rate()), mib(static_cast<uint64_t>(per_token)));
    if (prefetching) o += fmt::format("  {:>10} {:>7}", mib(c.prefetch_bytes), c.useful_prefetches);
    o += timed ? fmt::format("  {:>12.3f} ms", per_token / rate.bytes_per_s * 1e3) : fmt::format("  {:>15}", "-");
    o += "\n";
  }
  switch (rate.source) {
    case ReadRate::Source::NONE:
      o += "  load time/token: needs --read-gbps (the run has no storage reads measured with run --io-trace)\n";
      break;
    case ReadRate::Source::GIVEN:
      o += fmt::format("  load time/token at {} (--read-gbps)\n", gbps(rate.bytes_per_s));
      break;
    case ReadRate::Source::IO_TRACE:
      o += fmt::format("  load time/token at {}, the storage read rate the run measured (run --io-trace)\n",
                       gbps(rate.bytes_per_s));
      break;
  }
  return o;
}

json moe_json(const MoeSection& m) {
  const MoeShape& sh = m.shape;
  json layers = json::array();
  for (const LayerExperts& l : m.layers)
    layers.push_back({{"layer", l.layer},
                      {"tokens", l.tokens},
                      {"picks", l.picks},
                      {"prompt_picks", l.prompt_picks},
                      {"generate_picks", l.generate_picks},
                      {"weight", l.weight},
                      {"hottest_over_uniform", l.hottest_over_uniform},
                      {"coldest_over_uniform", l.coldest_over_uniform},
                      {"gini", l.gini},
                      {"entropy", l.entropy},
                      {"never_used", l.never_used},
                      {"overlap", l.overlap},
                      {"overlap_independent", l.overlap_independent}});
  json reuse = json::array();
  for (const auto& [bucket, picks] : m.reuse_distance)
    reuse.push_back({{"from", uint64_t{1} << bucket}, {"to", uint64_t{2} << bucket}, {"picks", picks}});
  auto bytes_json = [](const std::map<std::string, MoeSection::BytesPerToken>& by_phase) {
    json j = json::object();
    for (const auto& [phase, b] : by_phase) j[phase] = {{"experts", b.experts}, {"other", b.other}};
    return j;
  };
  json layer_bytes = json::array();
  for (const auto& [layer, by_phase] : m.layer_bytes_per_token)
    layer_bytes.push_back({{"layer", layer}, {"bytes_per_token", bytes_json(by_phase)}});
  json j = {{"n_expert", sh.n_expert},
            {"n_used", sh.n_used},
            {"layers", sh.layers},
            {"expert_bytes", sh.expert_bytes},
            {"all_expert_bytes", sh.all_expert_bytes},
            {"other_weight_bytes", sh.other_weight_bytes},
            {"tokens", m.tokens},
            {"prompt_tokens", m.prompt_tokens},
            {"generated_tokens", m.generated_tokens},
            {"per_layer", layers},
            {"working_set", m.working_set},
            {"reuse_distance", {{"first_picks", m.first_picks}, {"bins", reuse}}},
            {"bytes_per_token", bytes_json(m.bytes_per_token)},
            {"layer_bytes_per_token", layer_bytes}};
  if (!m.cache.empty()) j["expert_cache"] = expert_cache_json(m.cache, m.tokens, m.scope, m.prefetch, m.read_rate);
  {
    auto recall_json = [](const std::map<std::string, PredictorRecall>& by_phase) {
      json p = json::object();
      for (const auto& [phase, r] : by_phase) p[phase] = {{"tokens", r.tokens}, {"recall", r.recall}};
      return p;
    };
    json rows = json::array();
    for (const LayerRecall& l : m.recall) {
      json row = {{"layer", l.layer}, {"previous_token", recall_json(l.previous_token)}};
      if (m.predictions) row["next_layer"] = recall_json(l.next_layer);
      rows.push_back(row);
    }
    j["prediction"] = {{"next_layer_recorded", m.predictions}, {"per_layer", rows}};
  }
  return j;
}

std::string ms(uint64_t ns) { return fmt::format("{:.3f} ms", ns / 1e6); }
std::string ms(double ns) { return ms(static_cast<uint64_t>(ns)); }

std::string moe_text(const MoeSection& m) {
  const MoeShape& sh = m.shape;
  std::string o =
      fmt::format("\n== Experts ({} routed layers, {} experts, {} a token; {} tokens: {} prompt, {} generated) ==\n",
                  sh.layers.size(), sh.n_expert, sh.n_used, m.tokens, m.prompt_tokens, m.generated_tokens);
  o += "  layer  tokens  hottest/uniform  coldest/uniform   gini  entropy  never used  overlap (independent)\n";
  for (const LayerExperts& l : m.layers)
    o += fmt::format("  {:>5} {:>7} {:>16.2f} {:>16.2f} {:>6.3f} {:>8.3f} {:>11} {:>8} ({})\n", l.layer, l.tokens,
                     l.hottest_over_uniform, l.coldest_over_uniform, l.gini, l.entropy, l.never_used.size(),
                     pct(l.overlap), pct(l.overlap_independent));
  if (!m.working_set.empty())
    o += fmt::format("  working set: {} of {} (layer, expert) slots used by the {} tokens\n",
                     m.working_set.back().second, sh.layers.size() * static_cast<size_t>(sh.n_expert), m.tokens);
  o += "  reuse distance (tokens since the expert's previous pick in its layer): ";
  for (const auto& [bucket, picks] : m.reuse_distance)
    o += fmt::format("{}-{}: {}  ", uint64_t{1} << bucket, (uint64_t{2} << bucket) - 1, picks);
  o += fmt::format("first: {}\n", m.first_picks);
  for (const auto& [phase, b] : m.bytes_per_token)
    o += fmt::format("  {} bytes per token: experts {}, other weights {}\n", phase,
                     mib(static_cast<uint64_t>(b.experts)), mib(static_cast<uint64_t>(b.other)));
  if (!m.recall.empty()) {
    o += fmt::format("  prediction recall@{} (mean |predicted & chosen| / chosen, over tokens){}:\n", sh.n_used,
                     m.predictions ? "" : "; next layer: none recorded (run --moe-predict)");
    o += fmt::format("  {:>5}  {:<32} {:<32}\n", "layer", "next layer: prompt, generate",
                     "previous token: prompt, generate");
    auto cell = [](const std::map<std::string, PredictorRecall>& by_phase, const char* phase) -> std::string {
      auto it = by_phase.find(phase);
      return it == by_phase.end() ? "-" : fmt::format("{} ({})", pct(it->second.recall), it->second.tokens);
    };
    auto both = [&](const std::map<std::string, PredictorRecall>& by_phase) {
      return cell(by_phase, "PROMPT") + ", " + cell(by_phase, "GENERATE");
    };
    for (const LayerRecall& l : m.recall)
      o += fmt::format("  {:>5}  {:<32} {:<32}\n", l.layer, m.predictions ? both(l.next_layer) : "-",
                       both(l.previous_token));
  }
  if (!m.cache.empty()) o += expert_cache_text(m.cache, m.tokens, m.scope, m.prefetch, m.read_rate);
  return o;
}

void order_line(std::string& o, const std::string& label, const OrderStats& s) {
  o += fmt::format(
      "  {:<10} {:>7} reads {:>11}  forward {:>6}  contiguous {:>6}  backward moves {:>5}  layers ascending in {} "
      "of {} steps\n",
      label, s.reads, mib(s.bytes), pct(s.forward_fraction()), pct(s.contiguous_fraction()), s.backward,
      s.steps_with_layers_ascending, s.steps);
}

}  // namespace

json to_json(const Report& r) {
  json j = {{"format", "tensortrace.analysis"}, {"version", 1}, {"run_dir", r.run_dir}};
  if (r.has_model) j["model"] = {{"file", r.model_file}, {"size_bytes", r.model_size_bytes}};
  j["threads"] = r.threads;
  j["n_steps"] = r.n_steps;
  j["n_ops"] = r.n_ops;
  j["trace_complete"] = r.trace_complete;
  if (!r.trace_complete) j["trace_stop_reason"] = r.trace_stop_reason;
  j["order"] = order_json(r.order);
  j["hot_cold"] = hot_cold_json(r.hot_cold);
  j["sources"] = sources_json(r.sources);
  j["speed"] = speed_json(r.speed, r.sources);
  j["thread_time"] = r.thread_time;
  j["predictability"] = {
      {"note", "predictors of the next MODEL_FILE access, trained on earlier steps only; scored on steps >= 1"},
      {"ranges", predictability_json(r.predictability.ranges)},
      {"tensors", predictability_json(r.predictability.tensors)}};
  if (!r.io.is_null()) j["io"] = r.io;
  j["memory"] = memory_json(r.memory);
  if (r.cache_sim) j["cache_sim"] = cache_sim_json(*r.cache_sim);
  if (r.moe) j["moe"] = moe_json(*r.moe);
  if (r.weight_cache) j["weight_cache"] = weight_cache_json(*r.weight_cache);
  if (r.pooled) {
    j["pooled"] =
        expert_cache_json(r.pooled->cache, r.pooled->tokens, r.pooled->scope, r.pooled->prefetch, r.pooled->read_rate);
    j["pooled"]["runs"] = r.pooled->runs;
    j["pooled"]["tokens"] = r.pooled->tokens;
  }
  return j;
}

std::string render_text(const Report& r) {
  std::string o;
  o += fmt::format("analysis of {}\n", r.run_dir);
  if (r.has_model)
    o += fmt::format("model {} ({}), {} steps, {} ops, {} threads\n", r.model_file, mib(r.model_size_bytes), r.n_steps,
                     r.n_ops, r.threads);
  if (!r.trace_complete) o += fmt::format("note: the trace is incomplete ({})\n", r.trace_stop_reason);

  // Order.
  const OrderSection& ord = r.order;
  o += "\n== Order of MODEL_FILE reads ==\n";
  order_line(o, "run", ord.run);
  for (const auto& [p, s] : ord.phases) order_line(o, p, s);
  o += "  jump histogram (gap from the end of one read to the start of the next, whole run):\n   ";
  // In the JSON object's order (bins by name), as the report always listed them.
  std::map<std::string, uint64_t> bins;
  for (int i = 0; i < kNumJumpBins; ++i) bins[kJumpBins[i]] = ord.run.hist[i];
  for (const auto& [bin, n] : bins)
    if (n) o += fmt::format(" [{}]={}", bin, n);
  o += "\n";
  auto share = [&](uint64_t n) { return ord.steps_compared ? static_cast<double>(n) / ord.steps_compared : 0.0; };
  o += fmt::format(
      "  step-to-step repeat: {} of {} steps read exactly the ranges of the previous step ({}); "
      "{} read the same tensors in the same order ({})\n",
      ord.same_reads, ord.steps_compared, pct(share(ord.same_reads)), ord.same_tensors, pct(share(ord.same_tensors)));
  o += fmt::format("  {:>4} {:<8} {:>6} {:>11} {:>8} {:>8} {:>9} {:>9}\n", "step", "phase", "reads", "bytes", "forward",
                   "layers", "=prev rd", "=prev tn");
  auto yes_no = [](const std::optional<bool>& b) { return b ? (*b ? "yes" : "no") : "-"; };
  for (const OrderStep& s : ord.steps)
    o += fmt::format("  {:>4} {:<8} {:>6} {:>11} {:>8} {:>8} {:>9} {:>9}\n", s.step, s.phase, s.stats.reads,
                     mib(s.stats.bytes), pct(s.stats.forward_fraction()),
                     s.stats.layer_backward == 0 ? "asc" : "NOT asc", yes_no(s.same_reads_as_previous),
                     yes_no(s.same_tensors_as_previous));

  // Hot and cold.
  const HotColdSection& hc = r.hot_cold;
  o += "\n== Hot and cold ==\n";
  o += fmt::format("  file {}: {} distinct bytes read, {} never read; tensor data {}: {} never read\n",
                   mib(hc.file_bytes), mib(hc.distinct_bytes_read),
                   mib(hc.file_bytes - std::min(hc.file_bytes, hc.distinct_bytes_read)), mib(hc.tensor_bytes),
                   mib(hc.tensor_bytes_never_read));
  o += fmt::format("  {:<28} {:>6} {:>10} {:>6} {:>11} {:>11} {:>11}\n", "hottest tensors", "type", "size", "reads",
                   "bytes read", "distinct", "never read");
  for (size_t i = 0; i < hc.tensors.size() && i < 10; ++i) {
    const TensorHeat& t = hc.tensors[i];
    o += fmt::format("  {:<28} {:>6} {:>10} {:>6} {:>11} {:>11} {:>11}\n", t.tensor->name, t.tensor->type,
                     mib(t.tensor->size_bytes), t.reads, mib(t.bytes_read), mib(t.distinct_bytes_read),
                     mib(t.never_read_bytes));
  }
  std::vector<const TensorHeat*> cold;
  for (const TensorHeat& t : hc.tensors)
    if (t.never_read_bytes > 0) cold.push_back(&t);
  o += fmt::format("  tensors with bytes never read: {}\n", cold.size());
  for (size_t i = 0; i < cold.size() && i < 10; ++i)
    o += fmt::format("    {:<28} {} of {} never read ({} steps read it)\n", cold[i]->tensor->name,
                     mib(cold[i]->never_read_bytes), mib(cold[i]->tensor->size_bytes), cold[i]->steps_reading);
  o += "  file sections:";
  for (const RegionHeat& s : hc.sections) o += fmt::format(" {} {} read;", s.section, mib(s.distinct_bytes_read));
  o += "\n  file regions (32 bins, share of each bin's bytes ever read):\n   ";
  for (const RegionHeat& g : hc.regions)
    o += fmt::format(" {:.0f}",
                     100.0 * (g.end > g.begin ? static_cast<double>(g.distinct_bytes_read) / (g.end - g.begin) : 0.0));
  o += "\n";
  o += fmt::format("  reuse distance ({} B pages, {} accesses, {} first touches): LRU capacity needed -> hits\n   ",
                   hc.page_bytes, hc.accesses, hc.cold);
  for (auto [b, n] : hc.reuse_bins) o += fmt::format(" <={}: {}", mib(1ull << b), n);
  o += "\n  LRU miss ratio by capacity:";
  for (const MissPoint& m : hc.lru_miss_ratio_curve) o += fmt::format(" {} {};", mib(m.capacity), pct(m.miss_ratio));
  o += "\n";

  // Sources.
  const SourcesSection& src = r.sources;
  o += "\n== File versus buffers (bytes read; op time split by bytes) ==\n";
  auto src_row = [&](const std::string& label, const PoolTotals& t) {
    auto col = [&](Pool p) { return static_cast<int>(p); };
    o += fmt::format("  {:<14} {:>11} {:>10} | {:>11} {:>10} | {:>11} {:>10} | {:>10}\n", label,
                     mib(t.bytes[col(Pool::MODEL_FILE)]), ms(t.ns[col(Pool::MODEL_FILE)]),
                     mib(t.bytes[col(Pool::KV_CACHE)]), ms(t.ns[col(Pool::KV_CACHE)]),
                     mib(t.bytes[col(Pool::ACTIVATION)]), ms(t.ns[col(Pool::ACTIVATION)]), ms(t.op_ns));
  };
  o += fmt::format("  {:<14} {:>22} | {:>22} | {:>22} | {:>10}\n", "", "MODEL_FILE", "KV_CACHE", "ACTIVATION",
                   "op time");
  src_row("run", src.run);
  for (const auto& [p, t] : src.phases) src_row(p, t);
  for (const StepTotals& s : src.steps) src_row(fmt::format("step {}", s.step), s.totals);
  for (const auto& [l, t] : src.layers) src_row(l >= 0 ? fmt::format("layer {}", l) : "no layer", t);
  for (const auto& [k, t] : src.op_kinds) src_row(k, t);

  // Predictability.
  o += "\n== Predictability of the next MODEL_FILE access (trained on earlier steps) ==\n";
  for (const auto& [g, p] : {std::pair<const char*, const Predictability*>{"ranges", &r.predictability.ranges},
                             {"tensors", &r.predictability.tensors}}) {
    o += fmt::format("  {:<8}", g);
    for (const auto& [name, s] : *p)
      o += fmt::format("  {} {} ({}/{})", name, pct(s.accesses ? static_cast<double>(s.hits) / s.accesses : 0.0),
                       s.hits, s.accesses);
    o += "\n";
  }

  // Memory.
  o += "\n== Memory pressure (buffers.json) ==\n";
  const MemorySection& mem = r.memory;
  for (const PoolPeak& p : mem.pools) {
    o += fmt::format("  {:<10} peak {:>11} at step {} (t={}), {} tensors live:", p.pool, mib(p.peak_bytes), p.step,
                     ms(p.t_ns), p.live.size());
    int n = 0;
    for (const auto& [name, b] : p.live) {
      if (n++ >= 6) {
        o += " ...";
        break;
      }
      o += fmt::format(" {} ({})", name, mib(b));
    }
    o += "\n";
  }
  if (mem.has_buffers) o += fmt::format("  total peak {}\n", mib(mem.total_peak_bytes));

  // Speed.
  const SpeedSection& sp = r.speed;
  o += "\n== Speed ==\n";
  o += fmt::format("  {:<16} {:>6} {:>11} {:>7} {:>11} {:>11}\n", "op kind", "ops", "time", "share", "bytes read",
                   "achieved");
  const double total_ns = std::max<double>(1, src.run.op_ns);
  for (const auto& [k, t] : src.op_kinds)
    o += fmt::format("  {:<16} {:>6} {:>11} {:>7} {:>11} {:>11}\n", k, t.ops, ms(t.op_ns), pct(t.op_ns / total_ns),
                     mib(t.total_bytes()), gbps(t.bytes_per_s()));
  o += "  time per layer:";
  for (const auto& [l, t] : src.layers) o += fmt::format(" {}={}", l >= 0 ? std::to_string(l) : "-", ms(t.op_ns));
  o += "\n";
  if (sp.bandwidth) {
    const Bandwidth& bw = *sp.bandwidth;
    o += fmt::format("  measured memory bandwidth: {} (1 thread), {} ({} threads)\n",
                     gbps(bw.single_thread_bytes_per_s), gbps(bw.multi_thread_bytes_per_s), bw.threads);
    o += fmt::format("  achieved over all ops: {} = {} of the bandwidth; fastest op kind {} at {} ({})\n",
                     gbps(sp.achieved_bytes_per_s), pct(sp.achieved_fraction_of_bandwidth), sp.fastest_op_kind,
                     gbps(sp.fastest_bytes_per_s), pct(sp.fastest_fraction_of_bandwidth));
  }

  for (const auto& [phase, p] : r.thread_time["phases"].items()) {
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
                       pct(th["outside_share_in_short_gaps"].get<double>()));
  }

  if (!r.io.is_null()) {
    const json& io = r.io;
    o += "\n== I/O (run --io-trace) ==\n";
    o += fmt::format(
        "  {} ops observed; model-file pages not resident before the op: {} ({}); major faults {}; "
        "bytes read from storage {}; time to first token {}\n",
        io["ops"].get<uint64_t>(), io["nonresident_pages"].get<uint64_t>(),
        mib(io["nonresident_bytes"].get<uint64_t>()), io["major_faults"].get<uint64_t>(),
        mib(io["storage_read_bytes"].get<uint64_t>()), ms(io["time_to_first_token_ns"].get<uint64_t>()));
    o += fmt::format("  stall estimate (op time of ops that faulted): {}\n", ms(io["stall_ns"].get<uint64_t>()));
    o += "  per step: step nonresident-pages faults storage-bytes\n";
    for (const json& s : io["steps"])
      o += fmt::format("    {:>4} {:>8} {:>8} {:>11}\n", s["step"].get<uint32_t>(),
                       s["nonresident_pages"].get<uint64_t>(), s["major_faults"].get<uint64_t>(),
                       mib(s["storage_read_bytes"].get<uint64_t>()));
  }

  if (r.cache_sim) {
    const CacheSimSection& cs = *r.cache_sim;
    o += fmt::format("\n== Cache simulation ({} granularity, {} accesses, {} accessed, {} distinct) ==\n",
                     cs.granularity == Granularity::PAGE ? "page" : "tensor", cs.accesses, mib(cs.bytes_accessed),
                     mib(cs.unique_bytes));
    o += fmt::format("  {:>10} {:<6} {:>9} {:>9} {:>9} {:>14}\n", "capacity", "policy", "misses", "hits", "miss ratio",
                     "read from disk");
    for (const CacheResult& x : cs.results)
      o += fmt::format("  {:>10} {:<6} {:>9} {:>9} {:>9} {:>14}\n", mib(x.capacity), policy_name(x.policy), x.misses,
                       x.hits, pct(x.miss_ratio()), mib(x.bytes_missed));
  }
  if (r.moe) o += moe_text(*r.moe);
  if (r.weight_cache) o += weight_cache_text(*r.weight_cache);
  if (r.pooled) {
    o += fmt::format("\n== Pooled expert cache ({} runs, {} tokens, replayed one after another) ==\n",
                     r.pooled->runs.size(), r.pooled->tokens);
    for (const std::string& run : r.pooled->runs) o += fmt::format("  run {}\n", run);
    o += expert_cache_text(r.pooled->cache, r.pooled->tokens, r.pooled->scope, r.pooled->prefetch, r.pooled->read_rate);
  }
  return o;
}

}  // namespace tt::analysis
