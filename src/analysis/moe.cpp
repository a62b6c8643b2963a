#include "analysis/moe.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>

#include "analysis/analysis.h"
#include "core/error.h"
#include "gguf/memory_map.h"

namespace tt::analysis {
namespace {

// Phase of each step of the trace (steps without a marker count as prompt steps: they cannot be generated ones).
std::map<uint32_t, Phase> step_phases(const RunData& run) {
  std::map<uint32_t, Phase> out;
  for (const trace::StepMarker& m : run.trace.steps) out[m.step] = m.phase;
  return out;
}

Phase phase_of(const std::map<uint32_t, Phase>& phases, uint32_t step) {
  auto it = phases.find(step);
  return it == phases.end() ? Phase::PROMPT : it->second;
}

// Index of `layer` in shape.layers (routing is checked against the shape before this is called).
size_t layer_index(const MoeShape& shape, int layer) {
  return static_cast<size_t>(std::lower_bound(shape.layers.begin(), shape.layers.end(), layer) - shape.layers.begin());
}

// One token: its experts per routed layer (index into shape.layers), in execution order.
struct Token {
  uint32_t step = 0;
  Phase phase = Phase::PROMPT;
  std::vector<std::pair<size_t, const trace::RoutingRecord*>> layers;
};

std::vector<Token> tokens_in_order(const RunData& run, const MoeShape& shape) {
  const auto phases = step_phases(run);
  std::vector<Token> out;
  for (uint32_t step = 0; step < run.step_routing.size(); ++step) {
    std::map<int32_t, Token> by_pos;
    for (const trace::RoutingRecord& r : run.routing_of_step(step)) {
      Token& t = by_pos[r.token_pos];
      t.step = step;
      t.phase = phase_of(phases, step);
      t.layers.emplace_back(layer_index(shape, r.layer), &r);
    }
    for (auto& [pos, t] : by_pos) out.push_back(std::move(t));
  }
  return out;
}

// What one step's MUL_MAT_IDs of one routed layer load: each expert once (a prompt batch: every expert any of its
// tokens chose, by id, as the batch is grouped by expert; a generated token: its experts in slot order), and what is
// prefetched before them (the same order, each once).
struct StepLoad {
  Phase phase = Phase::PROMPT;
  size_t layer_index = 0;
  std::vector<uint32_t> experts, prefetch;
};

void add_once(std::vector<uint32_t>& set, uint32_t e) {
  if (std::find(set.begin(), set.end(), e) == set.end()) set.push_back(e);
}

std::vector<StepLoad> step_loads(const RunData& run, const MoeShape& shape, Prefetch prefetch) {
  const auto phases = step_phases(run);
  std::vector<StepLoad> out;
  // Per layer: the experts of the last token routed in it in an earlier step (previous-token prefetch).
  std::vector<std::vector<uint32_t>> previous_token(shape.layers.size());
  for (uint32_t step = 0; step < run.step_routing.size(); ++step) {
    const Phase phase = phase_of(phases, step);
    for (size_t li = 0; li < shape.layers.size(); ++li) {
      StepLoad load{phase, li, {}, {}};
      const auto rows = run.routing_of_layer(step, shape.layers[li]);
      for (const trace::RoutingRecord& r : rows) {
        for (uint32_t e : r.experts) add_once(load.experts, e);
        if (prefetch == Prefetch::PREDICTED)
          for (uint32_t e : r.predicted) add_once(load.prefetch, e);
      }
      if (prefetch == Prefetch::PREVIOUS_TOKEN) load.prefetch = previous_token[li];
      if (!rows.empty()) previous_token[li] = rows.back().experts;
      if (phase == Phase::PROMPT) {
        std::sort(load.experts.begin(), load.experts.end());
        std::sort(load.prefetch.begin(), load.prefetch.end());
      }
      if (!load.experts.empty()) out.push_back(std::move(load));
    }
  }
  return out;
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t end = std::min(list.find(',', begin), list.size());
    if (end > begin) out.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

double gini(std::vector<uint64_t> x) {
  std::sort(x.begin(), x.end());
  const double n = static_cast<double>(x.size());
  double sum = 0, weighted = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sum += static_cast<double>(x[i]);
    weighted += (2.0 * static_cast<double>(i + 1) - n - 1.0) * static_cast<double>(x[i]);
  }
  return sum > 0 ? weighted / (n * sum) : 0.0;
}

}  // namespace

MoeShape moe_shape(const RunData& run) {
  MoeShape s;
  const std::set<int> routed = [&] {
    std::set<int> l;
    for (const trace::RoutingRecord& r : run.trace.routing) l.insert(r.layer);
    return l;
  }();
  if (routed.empty()) return s;
  std::map<int, uint64_t> bytes;  // layer -> one expert's bytes
  for (const MapTensor& t : run.tensors) {
    const bool expert_tensor = t.shape.size() == 3 && t.name.find("_exps.") != std::string::npos;
    if (!expert_tensor) {
      s.other_weight_bytes += t.size_bytes;
      continue;
    }
    TT_CHECK(t.layer.has_value(), "expert tensor {} without a layer", t.name);
    if (t.shape[2] < 1 || t.shape[2] > kMaxExperts)
      fail("{}: {} experts, outside the 1 to {} a layer may have", t.name, t.shape[2], kMaxExperts);
    const int n = static_cast<int>(t.shape[2]);
    if (s.n_expert == 0) s.n_expert = n;
    if (n != s.n_expert) fail("{}: {} experts, other expert tensors have {}", t.name, n, s.n_expert);
    bytes[*t.layer] += t.size_bytes / static_cast<uint64_t>(n);
    s.all_expert_bytes += t.size_bytes;
  }
  for (int layer : routed) {
    auto it = bytes.find(layer);
    if (it == bytes.end()) fail("the routing names layer {}, which has no expert tensors in the memory map", layer);
    s.layers.push_back(layer);
    s.expert_bytes.push_back(it->second);
  }
  for (const trace::RoutingRecord& r : run.trace.routing) {
    s.n_used = std::max(s.n_used, static_cast<int>(r.experts.size()));
    for (uint32_t e : r.experts)
      if (e >= static_cast<uint32_t>(s.n_expert))
        fail("step {} layer {}: expert {} of a model with {} experts", r.step, r.layer, e, s.n_expert);
  }
  return s;
}

const char* prefetch_name(Prefetch p) {
  switch (p) {
    case Prefetch::NONE:
      return "none";
    case Prefetch::PREDICTED:
      return "predicted";
    case Prefetch::PREVIOUS_TOKEN:
      return "previous-token";
  }
  return "?";
}

Prefetch prefetch_from_name(const std::string& name) {
  for (Prefetch p : {Prefetch::NONE, Prefetch::PREDICTED, Prefetch::PREVIOUS_TOKEN})
    if (name == prefetch_name(p)) return p;
  fail("unknown expert prefetch '{}' (none, predicted or previous-token)", name);
}

std::vector<Access> expert_accesses(const RunData& run, const MoeShape& shape, Prefetch prefetch) {
  if (prefetch == Prefetch::PREDICTED &&
      std::none_of(run.trace.routing.begin(), run.trace.routing.end(),
                   [](const trace::RoutingRecord& r) { return !r.predicted.empty(); }))
    fail("run '{}' has no expert predictions to prefetch by (run it with --moe-predict)", run.dir);
  std::vector<Access> out;
  for (const StepLoad& load : step_loads(run, shape, prefetch)) {
    const uint64_t base = static_cast<uint64_t>(shape.layers[load.layer_index]) * static_cast<uint64_t>(shape.n_expert);
    const uint64_t bytes = shape.expert_bytes[load.layer_index];
    const auto phase = static_cast<uint32_t>(load.layer_index);
    for (uint32_t e : load.prefetch) out.push_back({base + e, bytes, phase, true});
    for (uint32_t e : load.experts) out.push_back({base + e, bytes, phase});
  }
  return out;
}

const char* read_rate_source_name(ReadRate::Source s) {
  switch (s) {
    case ReadRate::Source::NONE:
      return "none";
    case ReadRate::Source::GIVEN:
      return "--read-gbps";
    case ReadRate::Source::IO_TRACE:
      return "io-trace";
  }
  return "?";
}

ReadRate expert_read_rate(const std::vector<const RunData*>& runs, double given_bytes_per_s) {
  if (given_bytes_per_s > 0) return {ReadRate::Source::GIVEN, given_bytes_per_s};
  StorageReads all;
  for (const RunData* run : runs) {
    const StorageReads s = storage_reads(run->trace);
    all.bytes += s.bytes;
    all.ns += s.ns;
  }
  if (all.bytes == 0 || all.ns == 0) return {};
  return {ReadRate::Source::IO_TRACE, all.bytes_per_s()};
}

ExpertCacheSize parse_expert_cache_size(const std::string& text) {
  ExpertCacheSize s;
  s.text = text;
  if (!text.empty() && text.back() == '%') {
    const std::string number = text.substr(0, text.size() - 1);
    char* end = nullptr;
    s.value = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(s.value > 0 && s.value <= 100))
      fail("expert cache size '{}': a percentage must be above 0 and at most 100", text);
    s.unit = ExpertCacheSize::Unit::PERCENT;
    return s;
  }
  if (!text.empty() &&
      std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    if (text.size() > 9) fail("expert cache size '{}': too many experts", text);
    s.value = std::stod(text);
    if (s.value < 1) fail("expert cache size '{}': at least one expert per layer", text);
    s.unit = ExpertCacheSize::Unit::EXPERTS_PER_LAYER;
    return s;
  }
  if (text.ends_with("slots")) {
    const std::string number = text.substr(0, text.size() - 5);
    if (number.empty() || number.size() > 9 ||
        !std::all_of(number.begin(), number.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
        std::stoul(number) < 1)
      fail("expert cache size '{}': a whole number of slots, at least 1 (e.g. 96slots)", text);
    s.value = std::stod(number);
    s.unit = ExpertCacheSize::Unit::SLOTS;
    return s;
  }
  s.value = static_cast<double>(parse_size(text));  // "256MiB", "1G"
  s.unit = ExpertCacheSize::Unit::BYTES;
  return s;
}

std::vector<ExpertCacheSize> expert_cache_sizes_from_list(const std::string& list) {
  std::vector<ExpertCacheSize> out;
  for (const std::string& s : split_list(list)) out.push_back(parse_expert_cache_size(s));
  if (out.empty()) fail("no expert cache size in '{}' (e.g. 2,8,25%,256MiB)", list);
  return out;
}

std::vector<CachePolicy> policies_from_list(const std::string& list) {
  std::vector<CachePolicy> out;
  for (const std::string& p : split_list(list)) {
    const auto policy = policy_from_name(p);
    if (!policy) fail("unknown cache policy '{}' (lru, lfu, fifo, lru-2, least-stale, opt)", p);
    out.push_back(*policy);
  }
  if (out.empty()) fail("no cache policy in '{}' (lru, lfu, fifo, lru-2, least-stale, opt)", list);
  return out;
}

const char* scope_name(CacheScope s) { return s == CacheScope::GLOBAL ? "global" : "per-layer"; }

CacheScope scope_from_name(const std::string& name) {
  if (name == "global") return CacheScope::GLOBAL;
  if (name == "per-layer") return CacheScope::PER_LAYER;
  fail("unknown cache scope '{}' (global or per-layer)", name);
}

std::vector<ExpertCacheResult> replay_expert_cache(const std::vector<Access>& accesses, const MoeShape& shape,
                                                   const ExpertCacheOptions& options) {
  // Each layer's share of the expert bytes sizes its cache in the per-layer scope.
  const uint64_t layer_expert_bytes =
      std::accumulate(shape.expert_bytes.begin(), shape.expert_bytes.end(), uint64_t{0});
  auto capacity = [&](const ExpertCacheSize& size, std::optional<size_t> layer) -> uint64_t {
    const double layer_share = layer ? static_cast<double>(shape.expert_bytes[*layer]) / layer_expert_bytes : 1.0;
    switch (size.unit) {
      case ExpertCacheSize::Unit::EXPERTS_PER_LAYER:
        return static_cast<uint64_t>(size.value) * (layer ? shape.expert_bytes[*layer] : layer_expert_bytes);
      case ExpertCacheSize::Unit::SLOTS:  // slots of the mean expert; per layer, its share of them
        return static_cast<uint64_t>(size.value *
                                     static_cast<double>(layer ? shape.expert_bytes[*layer] : layer_expert_bytes) /
                                     static_cast<double>(shape.layers.size()));
      case ExpertCacheSize::Unit::PERCENT:
        return static_cast<uint64_t>(size.value / 100.0 * layer_share * layer_expert_bytes * shape.n_expert);
      case ExpertCacheSize::Unit::BYTES:
        return static_cast<uint64_t>(size.value * layer_share);
    }
    return 0;
  };
  std::vector<std::vector<Access>> per_layer;
  if (options.scope == CacheScope::PER_LAYER) {
    per_layer.resize(shape.layers.size());
    for (const Access& a : accesses) per_layer[a.phase].push_back(a);
  }
  std::vector<ExpertCacheResult> out;
  for (const ExpertCacheSize& size : options.sizes)
    for (CachePolicy policy : options.policies) {
      ExpertCacheResult r;
      r.size = size.text;
      r.policy = policy;
      auto add = [&](const CacheResult& c, uint64_t cap) {
        r.capacity_bytes += cap;
        r.accesses += c.accesses;
        r.hits += c.hits;
        r.misses += c.misses;
        r.cold_misses += c.cold_misses;
        r.bytes_loaded += c.bytes_missed;
        r.prefetches += c.prefetches;
        r.prefetch_bytes += c.prefetch_bytes;
        r.useful_prefetches += c.useful_prefetches;
      };
      if (options.scope == CacheScope::GLOBAL) {
        const uint64_t cap = capacity(size, std::nullopt);
        add(simulate_cache(accesses, cap, policy), cap);
      } else {
        for (size_t li = 0; li < per_layer.size(); ++li) {
          const uint64_t cap = capacity(size, li);
          add(simulate_cache(per_layer[li], cap, policy), cap);
        }
      }
      out.push_back(r);
    }
  return out;
}

std::optional<MoeSection> moe_section(const RunData& run, const std::vector<FileRead>& reads,
                                      const ExpertCacheOptions& cache) {
  if (run.trace.routing.empty()) return std::nullopt;
  MoeSection m;
  m.shape = moe_shape(run);
  const MoeShape& shape = m.shape;
  const size_t n_layers = shape.layers.size(), n_expert = static_cast<size_t>(shape.n_expert);
  const std::vector<Token> tokens = tokens_in_order(run, shape);

  m.layers.resize(n_layers);
  for (size_t li = 0; li < n_layers; ++li) {
    LayerExperts& l = m.layers[li];
    l.layer = shape.layers[li];
    l.picks.assign(n_expert, 0);
    l.prompt_picks.assign(n_expert, 0);
    l.generate_picks.assign(n_expert, 0);
    l.weight.assign(n_expert, 0.0);
  }
  // Per layer: the previous token's experts (overlap); per (layer, expert): the token index of its last pick.
  std::vector<const trace::RoutingRecord*> previous(n_layers, nullptr);
  std::vector<uint64_t> overlap_sum(n_layers, 0), overlap_pairs(n_layers, 0);
  std::vector<int64_t> last_pick(n_layers * n_expert, -1);
  uint64_t slots_used = 0;
  m.recall.resize(n_layers);
  for (size_t li = 0; li < n_layers; ++li) m.recall[li].layer = shape.layers[li];
  // Adds one token's |predicted ∩ chosen| / chosen to a (layer, phase) mean (a running sum until the end).
  auto score = [](PredictorRecall& p, const std::vector<uint32_t>& predicted, const std::vector<uint32_t>& chosen) {
    uint64_t common = 0;
    for (uint32_t e : chosen) common += std::find(predicted.begin(), predicted.end(), e) != predicted.end();
    ++p.tokens;
    p.recall += static_cast<double>(common) / static_cast<double>(chosen.size());
  };
  for (size_t ti = 0; ti < tokens.size(); ++ti) {
    const Token& t = tokens[ti];
    ++m.tokens;
    ++(t.phase == Phase::PROMPT ? m.prompt_tokens : m.generated_tokens);
    for (const auto& [li, r] : t.layers) {
      LayerExperts& l = m.layers[li];
      ++l.tokens;
      for (size_t s = 0; s < r->experts.size(); ++s) {
        const uint32_t e = r->experts[s];
        ++l.picks[e];
        ++(t.phase == Phase::PROMPT ? l.prompt_picks : l.generate_picks)[e];
        if (s < r->weights.size()) l.weight[e] += r->weights[s];
        int64_t& last = last_pick[li * n_expert + e];
        if (last < 0) {
          ++m.first_picks;
          ++slots_used;
        } else {
          ++m.reuse_distance[std::bit_width(static_cast<uint64_t>(static_cast<int64_t>(ti) - last)) - 1];
        }
        last = static_cast<int64_t>(ti);
      }
      const std::string phase = phase_name(t.phase);
      if (!r->predicted.empty()) {
        m.predictions = true;
        score(m.recall[li].next_layer[phase], r->predicted, r->experts);
      }
      if (previous[li] != nullptr) {
        score(m.recall[li].previous_token[phase], previous[li]->experts, r->experts);
        for (uint32_t e : r->experts)
          if (std::find(previous[li]->experts.begin(), previous[li]->experts.end(), e) != previous[li]->experts.end())
            ++overlap_sum[li];
        ++overlap_pairs[li];
      }
      previous[li] = r;
    }
    m.working_set.emplace_back(ti + 1, slots_used);
  }

  const double k = std::max(shape.n_used, 1);
  for (size_t li = 0; li < n_layers; ++li) {
    LayerExperts& l = m.layers[li];
    const uint64_t total = std::accumulate(l.picks.begin(), l.picks.end(), uint64_t{0});
    const double uniform = static_cast<double>(total) / static_cast<double>(n_expert);
    if (total == 0) continue;
    l.hottest_over_uniform = *std::max_element(l.picks.begin(), l.picks.end()) / uniform;
    l.coldest_over_uniform = *std::min_element(l.picks.begin(), l.picks.end()) / uniform;
    l.gini = gini(l.picks);
    double entropy = 0, independent = 0;
    for (size_t e = 0; e < n_expert; ++e) {
      if (l.picks[e] == 0) {
        l.never_used.push_back(static_cast<int>(e));
        continue;
      }
      const double p_share = static_cast<double>(l.picks[e]) / static_cast<double>(total);
      entropy -= p_share * std::log(p_share);
      const double p_token = static_cast<double>(l.picks[e]) / static_cast<double>(l.tokens);
      independent += p_token * p_token;
    }
    l.entropy = n_expert > 1 ? entropy / std::log(static_cast<double>(n_expert)) : 0.0;
    l.overlap_independent = independent / k;
    l.overlap = overlap_pairs[li] ? static_cast<double>(overlap_sum[li]) / overlap_pairs[li] / k : 0.0;
  }

  for (LayerRecall& l : m.recall)
    for (auto* by_phase : {&l.next_layer, &l.previous_token})
      for (auto& [phase, p] : *by_phase) p.recall /= static_cast<double>(p.tokens);

  // Model-file bytes per token by phase and layer, from the ops' recorded reads: expert slabs (MUL_MAT_ID inputs)
  // and the rest.
  const auto phases = step_phases(run);
  std::map<std::tuple<int, Phase, bool>, uint64_t> bytes;  // (layer, phase, expert slab) -> bytes read
  for (const FileRead& read : reads)
    bytes[{read.layer, phase_of(phases, read.step), read.tensor.find("_exps.") != std::string::npos}] += read.length;
  for (const auto& [key, total] : bytes) {
    const auto [layer, phase, expert] = key;
    const uint64_t n = phase == Phase::PROMPT ? m.prompt_tokens : m.generated_tokens;
    if (n == 0) continue;
    const double per_token = static_cast<double>(total) / static_cast<double>(n);
    (expert ? m.layer_bytes_per_token[layer][phase_name(phase)].experts
            : m.layer_bytes_per_token[layer][phase_name(phase)].other) = per_token;
  }
  for (const auto& [layer, by_phase] : m.layer_bytes_per_token)
    for (const auto& [phase, b] : by_phase) {
      m.bytes_per_token[phase].experts += b.experts;
      m.bytes_per_token[phase].other += b.other;
    }

  if (!cache.sizes.empty()) m.cache = replay_expert_cache(expert_accesses(run, shape, cache.prefetch), shape, cache);
  m.scope = cache.scope;
  m.prefetch = cache.prefetch;
  m.read_rate = expert_read_rate({&run}, cache.read_bytes_per_s);
  return m;
}

PooledExpertCache pooled_expert_cache(const std::vector<const RunData*>& runs, const ExpertCacheOptions& options) {
  PooledExpertCache out;
  out.scope = options.scope;
  out.prefetch = options.prefetch;
  std::vector<Access> accesses;
  MoeShape first;
  for (const RunData* run : runs) {
    if (run->trace.routing.empty())
      fail("run '{}' has no routing records to pool (not a mixture-of-experts run)", run->dir);
    const MoeShape shape = moe_shape(*run);
    if (out.runs.empty()) {
      first = shape;
    } else if (shape.n_expert != first.n_expert || shape.layers != first.layers ||
               shape.expert_bytes != first.expert_bytes) {
      fail(
          "runs '{}' and '{}' cannot be pooled: their models' experts differ ({} and {} experts, {} and {} routed "
          "layers, {} and {} bytes of experts)",
          out.runs.front(), run->dir, first.n_expert, shape.n_expert, first.layers.size(), shape.layers.size(),
          first.all_expert_bytes, shape.all_expert_bytes);
    }
    const std::vector<Access> a = expert_accesses(*run, first, options.prefetch);
    accesses.insert(accesses.end(), a.begin(), a.end());
    out.tokens += tokens_in_order(*run, first).size();
    out.runs.push_back(run->dir);
  }
  out.cache = replay_expert_cache(accesses, first, options);
  out.read_rate = expert_read_rate(runs, options.read_bytes_per_s);
  return out;
}

}  // namespace tt::analysis
