// In-memory form of trace records, shared by the writer (tracer) and the reader.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/ops.h"
#include "gguf/ggml_type.h"

namespace tt::trace {

struct RangeRecord {
  Pool pool = Pool::MODEL_FILE;
  int32_t buffer_id = -1;
  uint64_t offset = 0;  // MODEL_FILE: absolute file offset; else offset in the buffer
  uint64_t length = 0;
  int32_t pos_begin = -1, pos_end = -1;  // KV_CACHE positions
};

struct TensorRecord {
  std::string name;
  GgmlType type = GgmlType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
  Pool pool = Pool::ACTIVATION;
  int32_t buffer_id = -1;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::vector<RangeRecord> ranges;  // inputs: the exact bytes read
};

struct ValueStats {
  float min = 0, max = 0;
  double mean = 0;
  uint64_t nan_count = 0, inf_count = 0;
  uint64_t hash = 0;  // xxh64 of the output bytes
};

struct OpRecord {
  uint32_t step = 0;
  uint32_t node = 0;  // index in the step's graph
  Phase phase = Phase::PROMPT;
  OpKind op = OpKind::kCount;
  int16_t layer = -1;
  int32_t pos_begin = 0, pos_end = 0;
  uint16_t thread = 0;                // lowest worker that did part of it
  uint16_t n_threads = 0;             // workers that did part of it (0 for views)
  uint64_t start_ns = 0, end_ns = 0;  // relative to the run start
  std::string name;
  TensorRecord out;
  RangeRecord write;
  std::vector<TensorRecord> inputs;
  bool has_stats = false;
  ValueStats stats;
};

// The placement fields of an op record, in a fixed order: output tensor (type, pool, ne[4], buffer, offset, bytes),
// write range (pool, buffer, offset, length, positions), then per input its tensor's fields and its ranges'. OPS
// records change a node's previous record by adding to these (as u64, mod 2^64); the counts (inputs, ranges) fix the
// layout and never change that way. f is called with each field by reference.
template <typename Record, typename F>
void for_each_placement_field(Record& r, F&& f) {
  auto tensor = [&](auto& t) {
    f(t.type), f(t.pool);
    for (auto& d : t.ne) f(d);
    f(t.buffer_id), f(t.offset), f(t.bytes);
  };
  auto range = [&](auto& x) { f(x.pool), f(x.buffer_id), f(x.offset), f(x.length), f(x.pos_begin), f(x.pos_end); };
  tensor(r.out);
  range(r.write);
  for (auto& in : r.inputs) {
    tensor(in);
    for (auto& x : in.ranges) range(x);
  }
}

// r's placement fields as u64 (appended to out after clearing it), and back.
inline void placement_fields(const OpRecord& r, std::vector<uint64_t>& out) {
  out.clear();
  for_each_placement_field(r, [&](const auto& v) { out.push_back(static_cast<uint64_t>(v)); });
}
inline void set_placement_fields(OpRecord& r, const std::vector<uint64_t>& v) {
  size_t i = 0;
  for_each_placement_field(
      r, [&](auto& field) { field = static_cast<std::remove_reference_t<decltype(field)>>(v.at(i++)); });
}

// The counts that fix where each placement field is: inputs, ranges of each input.
inline void placement_layout(const OpRecord& r, std::vector<uint32_t>& out) {
  out.assign({static_cast<uint32_t>(r.inputs.size())});
  for (const TensorRecord& in : r.inputs) out.push_back(static_cast<uint32_t>(in.ranges.size()));
}

struct SpanRecord {
  uint32_t step = 0, node = 0;
  uint16_t thread = 0;
  uint64_t start_ns = 0, end_ns = 0;
};

// Mixture-of-experts models: one token's routing in one layer of a step (ROUTING records). The chosen experts in
// llama.cpp's order (router probability descending), the weights their outputs are multiplied by (after
// renormalising and scaling where the model says), and the router margin: the lowest chosen probability minus the
// best unchosen one (0 when every expert is chosen; small: a near-tie).
struct RoutingRecord {
  uint32_t step = 0;
  uint16_t layer = 0;
  int32_t token_pos = 0;  // the token's position (the last layer of a prompt routes only its last token)
  std::vector<uint32_t> experts;
  std::vector<float> weights;  // one per expert
  float margin = 0;
  // `run --moe-predict`: this layer's experts as the previous routed layer predicted them (its router's top-k on
  // that layer's FFN input); empty without a prediction (no option, or the first routed layer).
  std::vector<uint32_t> predicted;
};

struct StepMarker {
  uint32_t step = 0;
  Phase phase = Phase::PROMPT;
  int32_t pos_begin = 0, pos_end = 0;
  uint64_t start_ns = 0, end_ns = 0;
  int32_t token = -1;
  float probability = 0;
  bool ended = false;
};

// With `run --io-trace`: one op's model-file ranges, how many of their pages were not in the page cache just
// before the op (mincore), and per worker the major/minor faults and bytes read from storage during the op.
struct IoRange {
  uint64_t offset = 0, length = 0;  // absolute file offset
  uint32_t pages = 0, nonresident_pages = 0;
};
struct IoWorker {
  uint16_t thread = 0;
  uint64_t major_faults = 0, minor_faults = 0;
  uint64_t read_bytes = 0;  // /proc/thread-self/io read_bytes
};
struct IoRecord {
  uint32_t step = 0, node = 0;
  uint32_t page_bytes = 4096;
  uint64_t pages = 0, nonresident_pages = 0;  // sums over ranges
  std::vector<IoRange> ranges;
  std::vector<IoWorker> workers;
};

// `run --weight-budget`: one demand access of a node to a weight unit, in access order (WEIGHT_LOAD records). The
// accesses are the stream the run's cache served: analyze replays them through the same policy.
struct WeightLoadRecord {
  uint32_t step = 0, node = 0;         // the node that needed the unit (and waited for its read)
  std::string tensor;                  // the weight
  int32_t expert = -1;                 // its expert slab; -1: the whole tensor
  uint64_t offset = 0, bytes = 0;      // the unit's absolute file offset and bytes
  uint64_t start_ns = 0, end_ns = 0;   // the read, relative to the run start (a hit: both when it was found)
  uint64_t wait_ns = 0;                // how long the node waited for it (a demand miss: its read)
  bool hit = false, prefetch = false;  // resident already; a prefetcher read, ahead of its use (`--prefetch`)
};

}  // namespace tt::trace
