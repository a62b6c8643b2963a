// Mixture-of-experts analysis of a run's routing (docs/analysis.md "Experts"): which experts each token needed, how
// popular and how local the choices are, what they cost in bytes, and how an expert cache of a given size and policy
// would have served them (a replay of the recorded routing through cache_sim).
//
// A *token* here is one (step, position) with routing; tokens are taken in execution order (step by step, by
// position). The last layer of a prompt routes only the prompt's last token (the engine computes only that row), so
// a prompt's tokens can have fewer routed layers than a generated one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/cache_sim.h"
#include "trace/run_data.h"

namespace tt::analysis {

struct FileRead;  // analysis.h

// The experts of a run's model: per routed layer, the bytes of one expert (its rows of every 3-D `*_exps` tensor
// of that layer, from the memory map).
struct MoeShape {
  int n_expert = 0;                    // 0: not a mixture-of-experts run
  int n_used = 0;                      // experts chosen per token (the largest count the routing shows)
  std::vector<int> layers;             // routed layers, ascending
  std::vector<uint64_t> expert_bytes;  // per entry of `layers`
  uint64_t all_expert_bytes = 0;       // every expert of every layer
  uint64_t other_weight_bytes = 0;     // every other tensor of the model
};
MoeShape moe_shape(const RunData& run);  // throws tt::Error when the routing names an expert the model lacks

// What the expert-cache replay prefetches before each (step, layer)'s loads: nothing; the experts the previous layer
// predicted for that layer's tokens (`run --moe-predict`, RoutingRecord::predicted); or the experts the layer chose
// for the token routed in it just before the step (the previous token).
enum class Prefetch { NONE, PREDICTED, PREVIOUS_TOKEN };
const char* prefetch_name(Prefetch p);
Prefetch prefetch_from_name(const std::string& name);  // "none", "predicted", "previous-token"; throws tt::Error

// The cache's view of one run's routing: for each step, each routed layer in order, the experts that layer's
// MUL_MAT_IDs load, once each (a prompt batch: every expert any of its tokens chose, by id; a generated token: its
// experts in slot order), each layer's loads preceded by the prefetch accesses of `prefetch` (the same order). Access
// key layer * n_expert + expert, bytes its slab, phase the layer's index in shape.layers (for least-stale). Throws
// tt::Error for PREDICTED on a run without predictions.
std::vector<Access> expert_accesses(const RunData& run, const MoeShape& shape, Prefetch prefetch = Prefetch::NONE);

struct ExpertCacheSize {
  enum class Unit { EXPERTS_PER_LAYER, SLOTS, PERCENT, BYTES };
  Unit unit = Unit::EXPERTS_PER_LAYER;
  double value = 0;
  std::string text;  // as given
};
// "8" (experts per layer), "96slots" (experts in all, of the routed layers' mean expert bytes), "25%" (of the expert
// bytes), "256MiB" / "1G" (bytes). Throws tt::Error.
ExpertCacheSize parse_expert_cache_size(const std::string& text);

// A comma-separated list of sizes ("2,8,25%") or of policies ("lru,opt"; cache_sim.h names), empty items skipped.
// Throws tt::Error naming a bad item, or when the list names none.
std::vector<ExpertCacheSize> expert_cache_sizes_from_list(const std::string& list);
std::vector<CachePolicy> policies_from_list(const std::string& list);

enum class CacheScope { GLOBAL, PER_LAYER };
const char* scope_name(CacheScope s);
CacheScope scope_from_name(const std::string& name);  // "global" or "per-layer"; throws tt::Error

struct ExpertCacheOptions {
  std::vector<ExpertCacheSize> sizes;
  std::vector<CachePolicy> policies = {CachePolicy::LRU,  CachePolicy::LFU,         CachePolicy::FIFO,
                                       CachePolicy::LRU2, CachePolicy::LEAST_STALE, CachePolicy::OPT};
  CacheScope scope = CacheScope::GLOBAL;
  Prefetch prefetch = Prefetch::NONE;
  double read_bytes_per_s = 0;  // --read-gbps; 0: the rate the runs measured (ReadRate)
};

// The storage read rate the load time per token is computed with: --read-gbps when given, else the rate the replayed
// runs measured with `run --io-trace` (storage_reads), else none: the load time then needs --read-gbps.
struct ReadRate {
  enum class Source { NONE, GIVEN, IO_TRACE };
  Source source = Source::NONE;
  double bytes_per_s = 0;
};
const char* read_rate_source_name(ReadRate::Source s);  // "none", "--read-gbps", "io-trace"
ReadRate expert_read_rate(const std::vector<const RunData*>& runs, double given_bytes_per_s);

struct ExpertCacheResult {
  std::string size;  // as given
  CachePolicy policy = CachePolicy::LRU;
  uint64_t capacity_bytes = 0;  // the whole cache (per-layer scope: the sum of the layers')
  uint64_t accesses = 0, hits = 0, misses = 0, cold_misses = 0, bytes_loaded = 0;  // demand accesses
  uint64_t prefetches = 0, prefetch_bytes = 0, useful_prefetches = 0;              // CacheResult's
  double hit_rate() const { return accesses ? static_cast<double>(hits) / accesses : 0.0; }
  double bytes_loaded_per(uint64_t tokens) const {
    return tokens ? static_cast<double>(bytes_loaded) / static_cast<double>(tokens) : 0.0;
  }
};
// Replays the accesses of one or more runs (a server's pooled workload: runs one after another) of one model.
std::vector<ExpertCacheResult> replay_expert_cache(const std::vector<Access>& accesses, const MoeShape& shape,
                                                   const ExpertCacheOptions& options);

struct LayerExperts {
  int layer = 0;
  uint64_t tokens = 0;          // tokens routed in this layer
  std::vector<uint64_t> picks;  // per expert: times chosen
  std::vector<uint64_t> prompt_picks, generate_picks;
  std::vector<double> weight;                                                        // per expert: sum of its weights
  double hottest_over_uniform = 0, coldest_over_uniform = 0, gini = 0, entropy = 0;  // entropy / log(n_expert)
  std::vector<int> never_used;
  // Consecutive tokens' expert sets: mean overlap / n_used, and its expectation for independent tokens routed with
  // the same popularity (sum over experts of p^2 / n_used, p = picks / tokens).
  double overlap = 0, overlap_independent = 0;
};

// Recall@k of an expert predictor in one layer and phase: the mean over tokens of |predicted ∩ chosen| / chosen.
struct PredictorRecall {
  uint64_t tokens = 0;  // tokens with both a prediction and a routing in the layer
  double recall = 0;
};
// Per routed layer, by phase ("PROMPT", "GENERATE"): the next-layer predictor (the previous routed layer's FFN input
// through this layer's router, recorded by `run --moe-predict`) and the previous-token predictor (the experts this
// layer chose for the token routed in it before).
struct LayerRecall {
  int layer = 0;
  std::map<std::string, PredictorRecall> next_layer, previous_token;
};

struct MoeSection {
  MoeShape shape;
  uint64_t tokens = 0, prompt_tokens = 0, generated_tokens = 0;
  std::vector<LayerExperts> layers;
  // Distinct (layer, expert) slots used by the first n tokens: (n, slots) after every token.
  std::vector<std::pair<uint64_t, uint64_t>> working_set;
  // Reuse distance of each (layer, expert) pick in tokens since that expert's previous pick in the layer:
  // bucket b >= 0 counts distances in [2^b, 2^(b+1)); first picks are counted in `first_picks`.
  std::map<int, uint64_t> reuse_distance;
  uint64_t first_picks = 0;
  // Model-file bytes the ops read per token (the trace's ranges), from expert slabs and from the other weights, by
  // phase ("PROMPT", "GENERATE"), and by layer (-1: no layer) and phase.
  struct BytesPerToken {
    double experts = 0, other = 0;
  };
  std::map<std::string, BytesPerToken> bytes_per_token;
  std::map<int, std::map<std::string, BytesPerToken>> layer_bytes_per_token;
  bool predictions = false;              // the run recorded next-layer predictions
  std::vector<LayerRecall> recall;       // per entry of shape.layers
  std::vector<ExpertCacheResult> cache;  // with ExpertCacheOptions::sizes
  CacheScope scope = CacheScope::GLOBAL;
  Prefetch prefetch = Prefetch::NONE;
  ReadRate read_rate;
};
// nullopt for a run without routing. `reads`: the run's model-file reads (analysis.h file_reads).
std::optional<MoeSection> moe_section(const RunData& run, const std::vector<FileRead>& reads,
                                      const ExpertCacheOptions& cache);

// The expert-cache replay of several runs of one model as one workload (a server's: their accesses one run after
// another).
struct PooledExpertCache {
  std::vector<std::string> runs;  // run directories, in replay order
  uint64_t tokens = 0;            // routed tokens of all the runs
  std::vector<ExpertCacheResult> cache;
  CacheScope scope = CacheScope::GLOBAL;
  Prefetch prefetch = Prefetch::NONE;
  ReadRate read_rate;
};
// Throws tt::Error naming the runs when one has no routing or their experts differ (count, layers, bytes).
PooledExpertCache pooled_expert_cache(const std::vector<const RunData*>& runs, const ExpertCacheOptions& options);

}  // namespace tt::analysis
