#include "tracer/tracer.h"

#include <unistd.h>
#include <xxhash.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <type_traits>
#include <unordered_map>

#include "core/error.h"
#include "core/fp16.h"
#include "core/shape.h"
#include "core/vocab_clones.h"
#include "exec/executor.h"
#include "exec/thread_pool.h"
#include "gguf/memory_map.h"
#include "graph/builder.h"
#include "model/forward.h"
#include "tokenizer/tokenizer.h"
#include "trace/hash.h"
#include "trace/json_line.h"
#include "tracer/landscape.h"

namespace tt {

using nlohmann::json;

nlohmann::json TraceOptions::to_json() const {
  return {{"values", values},
          {"check_finite", check_finite},
          {"logit_top_k", logit_top_k},
          {"io", io},
          {"compact", compact}};
}

namespace {

// Sum, sum of squares (in double), min and max of v: vectors of the GCC/Clang extension with four independent
// chains per sum (the add latency, not the loads, bounded the two-chain loop), cloned for AVX-512 and AVX2 with FMA
// so the vocabulary-sized logits take a few microseconds a step.
TT_VOCAB_CLONES void moments(const float* v, size_t n, double& sum, double& sum2, float& mn, float& mx) {
  typedef float Float8 __attribute__((vector_size(32)));
  typedef double Double4 __attribute__((vector_size(32)));
  Double4 s[4] = {}, q[4] = {};
  Float8 lo = Float8{} + v[0], hi = lo;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int h = 0; h < 2; ++h) {
      Float8 x;
      std::memcpy(&x, v + i + 8 * h, sizeof(x));
      const Double4 a = {x[0], x[1], x[2], x[3]}, b = {x[4], x[5], x[6], x[7]};
      s[2 * h] += a, s[2 * h + 1] += b;
      q[2 * h] += a * a, q[2 * h + 1] += b * b;
      lo = x < lo ? x : lo;
      hi = x > hi ? x : hi;
    }
  }
  const Double4 st = (s[0] + s[1]) + (s[2] + s[3]), qt = (q[0] + q[1]) + (q[2] + q[3]);
  sum = (st[0] + st[1]) + (st[2] + st[3]);
  sum2 = (qt[0] + qt[1]) + (qt[2] + qt[3]);
  mn = lo[0], mx = hi[0];
  for (int k = 1; k < 8; ++k) mn = std::min(mn, lo[k]), mx = std::max(mx, hi[k]);
  for (; i < n; ++i) {
    sum += v[i], sum2 += static_cast<double>(v[i]) * v[i];
    mn = std::min(mn, v[i]), mx = std::max(mx, v[i]);
  }
}

// All but the hash.
ReadoutStats readout_moments(std::span<const float> v) {
  ReadoutStats r;
  if (v.empty()) return r;
  double s = 0, s2 = 0;
  moments(v.data(), v.size(), s, s2, r.min, r.max);
  r.mean = s / v.size();
  r.std = std::sqrt(std::max(0.0, s2 / v.size() - r.mean * r.mean));
  return r;
}

}  // namespace

uint64_t readout_hash(std::span<const float> v) { return xxh3_64(v.data(), v.size_bytes()); }

ReadoutStats readout_stats(std::span<const float> v) {
  ReadoutStats r = readout_moments(v);
  r.hash = readout_hash(v);
  return r;
}

namespace {

// 16 lowercase hex digits (as fmt's {:016x}, without its heap string: the line is written every step).
struct Hex64 {
  char digits[16];
  operator std::string_view() const { return {digits, sizeof(digits)}; }
};
Hex64 hex64(uint64_t v) {
  Hex64 h;
  for (int i = 15; i >= 0; --i, v >>= 4) h.digits[i] = "0123456789abcdef"[v & 15];
  return h;
}

constexpr uintptr_t kCacheLine = 64;

// Flushes the cache lines of [p, p + n) from every cache (a hint: the bytes stay as they are).
void evict_lines(const void* p, size_t n) {
#if defined(__x86_64__)
  const auto begin = reinterpret_cast<uintptr_t>(p) & ~(kCacheLine - 1), end = reinterpret_cast<uintptr_t>(p) + n;
  for (uintptr_t a = begin; a < end; a += kCacheLine) _mm_clflush(reinterpret_cast<const void*>(a));
#else
  (void)p, (void)n;
#endif
}

}  // namespace

void ReadoutStats::write(JsonLine& j) const {
  j.begin_object()
      .field("min", min)
      .field("max", max)
      .field("mean", mean)
      .field("std", std)
      .field("hash", hex64(hash))
      .end_object();
}

namespace {

// Category of a graph node from the name it was given where it was computed.
const char* node_category(const std::string& name) {
  auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  if (starts("embd") || starts("inp_")) return "embedding";
  if (starts("result_output")) return "output";
  if (starts("result_norm") || starts("norm") || starts("attn_norm") || starts("ffn_norm")) return "norm";
  if (starts("ffn_inp") || starts("l_out") || starts("inp_last")) return "residual";
  if (starts("ffn_")) return "ffn";
  return "attention";
}

// Capacity for n elements with every page already touched: on a VM the first touch of a fresh page costs far more
// than touching it again (docs/performance.md), so the buffers that fill during steps are faulted in here, at
// set-up, and then reused.
template <typename Container>
void reserve_touched(Container& c, size_t n) {
  c.resize(n);
  c.clear();  // keeps the capacity
}

trace::RangeRecord to_record(const ByteRange& r) {
  return {r.pool, r.buffer_id, r.offset, r.length, r.pos_begin, r.pos_end};
}

// Everything but the name (interned once per graph, see Tracer::intern_graph).
void fill_tensor(trace::TensorRecord& t, const Tensor& src) {
  t.type = src.type;
  for (int d = 0; d < 4; ++d) t.ne[d] = src.ne[d];
  const Tensor& s = src.storage();
  t.pool = s.pool;
  t.buffer_id = s.buffer_id;
  t.offset = s.offset + src.view_offset;
  t.bytes = src.n_bytes();
}

// The values an op wrote: its output, or for SET_ROWS the cache rows written (converted to f32).
void output_values(const Node& n, std::vector<float>& buf, std::span<const float>& values) {
  if (n.op == OpKind::SET_ROWS) {
    const Tensor& cache = n.out->storage();
    const int64_t count = static_cast<int64_t>(n.write.length / (cache.type == GgmlType::F16 ? 2 : 4));
    buf.resize(count);
    const uint8_t* p = cache.data + (n.write.offset - cache.offset);
    if (cache.type == GgmlType::F16)
      fp16_to_fp32_row(reinterpret_cast<const uint16_t*>(p), buf.data(), count);
    else
      std::memcpy(buf.data(), p, count * sizeof(float));
    values = buf;
    return;
  }
  values = {n.out->as<const float>(), static_cast<size_t>(n.out->n_elements())};
}

}  // namespace

namespace {

// Whether v lies in the graph's activation arena (the engine's outputs do; a caller's own vector does not).
bool in_arena(const Graph& g, std::span<const float> v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  for (const BufferInfo& b : g.buffers)
    if (b.id == kArenaBuffer && b.data != nullptr && p >= b.data && p + v.size_bytes() <= b.data + b.size) return true;
  return false;
}

}  // namespace

Tracer::Tracer(RunDirWriter& dir, const Model& model, TraceOptions options, ThreadPool& pool, uint64_t run_start_ns)
    : dir_(dir),
      model_(model),
      options_(options),
      pool_(pool),
      n_threads_(pool.size()),
      t0_(run_start_ns),
      writer_(dir.path("trace.bin")) {
  if (options_.logit_top_k < 1) fail("--logit-top-k must be at least 1, got {}", options_.logit_top_k);
  steps_stream_ = std::make_unique<std::ofstream>(dir.path("steps.jsonl"), std::ios::trunc);
  if (!*steps_stream_) fail("cannot create '{}'", dir.path("steps.jsonl"));
  node_times_file_ = std::make_unique<std::fstream>(dir.path(kNodeTimesFile),
                                                    std::ios::in | std::ios::out | std::ios::trunc | std::ios::binary);
  if (!*node_times_file_) fail("cannot create '{}'", dir.path(kNodeTimesFile));
  // Flushed before they pass kFlushBytes (on_step_end), so they never grow inside a step.
  reserve_touched(steps_pending_, 2 * trace::TraceWriter::kFlushBytes);
  reserve_touched(node_times_, 2 * trace::TraceWriter::kFlushBytes / sizeof(Span));
  reserve_touched(step_buffers_, kStepsReserved);
  reserve_touched(step_graph_, kStepsReserved);
  ticks0_ = tick_count(), ns0_ = now_ns();
}

uint64_t Tracer::ticks_to_ns(uint64_t ticks) const {
  return static_cast<uint64_t>((ticks * tick_scale(tick_count() - ticks0_, now_ns() - ns0_)) >> 32);
}

void Tracer::record_static_buffer(const std::string& name, Pool pool, int buffer_id, uint64_t bytes) {
  buffer_events_.push_back({0, 0, 'a', pool, buffer_id, 0, bytes, writer_.intern(name), false});
  static_bytes_ += bytes;
}

void Tracer::on_step_begin(int32_t step, Phase phase, int32_t pos_begin, int32_t pos_end) {
  SelfTimer timer{*this};
  step_ = step;
  phase_ = phase;
  step_start_ = now_ns() - t0_;
  // Written with the step's records (write_records_piece), after the previous step's.
  records_[running_].marker = {static_cast<uint32_t>(step), phase, pos_begin, pos_end, step_start_, 0, -1, 0, false};
}

void Tracer::on_graph_rebuild() {
  SelfTimer timer{*this};
  pool_.end_between_jobs_work();  // not on the previous step's landscape any more
  finish_previous_step();         // its graph and logits go
}

Tracer::GraphNames Tracer::intern_graph(const Graph& g, const AllocPlan& plan) {
  GraphNames names;
  for (const Node& n : g.nodes()) {
    names.node_offset.push_back(static_cast<uint32_t>(names.ids.size()));
    const uint32_t out = writer_.intern(n.out->name);
    names.ids.insert(names.ids.end(), {out, out});  // the op is named after what it computes
    for (const Tensor* s : n.src) names.ids.push_back(writer_.intern(s->name));
  }
  uint64_t live = 0;
  for (const AllocEvent& e : plan.events) {
    const bool alloc = e.kind == AllocEvent::ALLOC;
    names.events.push_back({e.node, alloc, e.reuse, e.offset, e.bytes, writer_.intern(e.tensor->name)});
    live = alloc ? live + e.bytes : live - e.bytes;
    if (alloc && live > names.activation_peak)
      names.activation_peak = live, names.activation_peak_node = names.events.back().tensor;
  }
  for (const Node& n : g.nodes()) {
    const uint32_t i = static_cast<uint32_t>(names.repeatable.size());
    // MUL_MAT_ID reads the experts this step's router chose: known only once the node starts, so compared at the
    // step's end (routed), not in the waits before it.
    const bool routed = has_routed_reads(n);
    bool fixed = !routed && n.op != OpKind::GET_ROWS && n.write.pool != Pool::KV_CACHE &&
                 n.out->storage().pool != Pool::KV_CACHE;
    for (const Tensor* s : n.src) fixed = fixed && s->storage().pool != Pool::KV_CACHE;
    for (const ByteRange& r : n.reads) fixed = fixed && r.pos_begin < 0 && r.pool != Pool::KV_CACHE;
    names.repeatable.push_back(fixed);
    if (routed)
      names.routed.push_back(i);
    else if (!fixed)
      names.compared.push_back(i);
    names.view.push_back(op_is_view(n.op));
  }
  return names;
}

std::string Tracer::graph_key(const Graph& g) {
  // Structure without the step-dependent number of attended cache positions: every node's name, op, inputs,
  // shape and placement. Graphs with the same key have the same op records but for cache-dependent fields.
  // Gathered into one buffer and hashed once (a streaming update per field costs more than the hash).
  std::vector<uint8_t>& b = key_bytes_;
  b.clear();
  auto add = [&](const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  };
  for (const Node& n : g.nodes()) {
    add(n.out->name.data(), n.out->name.size() + 1);
    add(&n.op, sizeof(n.op));
    for (const Tensor* src : n.src) add(src->name.data(), src->name.size() + 1);
    if (n.out->pool != Pool::KV_CACHE) {
      const Tensor& storage = n.out->storage();
      const uint64_t place[3] = {storage.offset + n.out->view_offset, static_cast<uint64_t>(storage.buffer_id),
                                 static_cast<uint64_t>(storage.pool)};
      add(n.out->ne, sizeof(n.out->ne));
      add(place, sizeof(place));
    }
  }
  return fmt::format("{:016x}", XXH3_64bits(b.data(), b.size()));
}

// The graph as JSON text, written directly: building an nlohmann tree of the graph costs milliseconds, inside the
// first timed step of every new graph.
std::string Tracer::graph_json(const Graph& g) const {
  JsonLine nodes, edges;
  std::unordered_map<const Tensor*, std::string> producer;  // tensor -> node id that computed it
  std::unordered_map<const Tensor*, std::string> leaves;
  size_t n_nodes = 0, n_edges = 0;
  auto shape = [&](JsonLine& j, const Tensor& t) {
    if (t.pool == Pool::KV_CACHE) {
      j.key("shape").null();
      return;
    }
    j.begin_array("shape");
    for (int64_t d : shape_dims(t.ne)) j.value(d);
    j.end_array();
  };
  auto layer = [&](JsonLine& j, int l) {
    if (l >= 0)
      j.field("layer", l);
    else
      j.key("layer").null();
  };
  auto leaf = [&](const Tensor* t) -> const std::string& {
    auto it = leaves.find(t);
    if (it != leaves.end()) return it->second;
    const std::string& id = leaves[t] = fmt::format("leaf_{}", leaves.size());
    const TensorRole role = tensor_role(t->name);
    nodes.begin_object().field("id", std::string_view(id)).field("name", std::string_view(t->name)).field("op", "LEAF");
    shape(nodes, *t);
    nodes.field("type", type_name(t->type));
    layer(nodes, t->layer);
    nodes.field("category", t->pool == Pool::MODEL_FILE ? role.category : node_category(t->name))
        .field("pool", pool_name(t->pool))
        .end_object();
    ++n_nodes;
    return id;
  };
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    const std::string id = fmt::format("node_{}", i);
    // Leaves first, so a node's inputs precede it (as a tree built in this order listed them).
    std::vector<std::string> from;
    for (const Tensor* s : n.src) {
      auto it = producer.find(s);
      from.push_back(it != producer.end() ? it->second : leaf(s));
    }
    nodes.begin_object()
        .field("id", std::string_view(id))
        .field("index", static_cast<uint64_t>(i))
        .field("name", std::string_view(n.out->name))
        .field("op", op_name(n.op));
    shape(nodes, *n.out);
    nodes.field("type", type_name(n.out->type));
    layer(nodes, n.layer);
    nodes.field("category", node_category(n.out->name)).field("pool", pool_name(n.out->storage().pool));
    for (const Tensor* s : n.src)
      if (s->pool == Pool::MODEL_FILE) nodes.field("weight_tensor", std::string_view(s->name));
    nodes.end_object();
    ++n_nodes;
    for (size_t slot = 0; slot < n.src.size(); ++slot) {
      edges.begin_object()
          .field("source", std::string_view(from[slot]))
          .field("target", std::string_view(id))
          .field("slot", static_cast<uint64_t>(slot))
          .field("label", std::string_view(fmt::format("src[{}]", slot)))
          .end_object();
      ++n_edges;
    }
    producer[n.out] = id;
  }
  return fmt::format(
      "{{\"format\":\"tensortrace.graph\",\"version\":1,\"n_nodes\":{},\"n_edges\":{},\"note\":\"shape null: "
      "depends on the step's number of cache positions (see steps.jsonl pos_end)\",\"nodes\":[{}],\"edges\":[{}]}}",
      n_nodes, n_edges, nodes.str(), edges.str());
}

void Tracer::on_graph_ready(const Graph& g, const AllocPlan& plan, std::span<const float> logits) {
  SelfTimer timer{*this};
  // The other slot: a thread still in the previous run's between-runs work reads that run's.
  run_slot_ ^= 1;
  RunLogits& run = run_logits_[run_slot_];
  run.tracer = this, run.logits = logits, run.records = &records_[running_];
  run.state.store(!logits.empty() && in_arena(g, logits) ? OPEN : CLOSED, std::memory_order_relaxed);
  graph_ = &g;
  plan_ = &plan;
  const size_t n = g.nodes().size();
  if (wants_node_done()) stats_.assign(n, trace::ValueStats{});
  if (options_.io) {
    io_slots_.resize(n_threads_);
    io_workers_.resize(n_threads_);
    for (auto& w : io_workers_) w.assign(n, trace::IoWorker{});
    io_ranges_.resize(n);
    for (auto& r : io_ranges_) r.clear();
  }
  if (prefetcher_) prefetcher_->on_graph_ready(g, step_);

  // A graph seen again unchanged (a patched generation step) keeps its key, names and span slots.
  const bool same_structure = &g == last_graph_ && g.structure_id != 0 && g.structure_id == last_structure_id_;
  StepRecords& rec = records_[running_];
  if (!same_structure) {
    logits_writer_ = {};
    if (n > trace::kMaxNodes) fail("a graph of {} nodes: trace.bin holds at most {}", n, trace::kMaxNodes);
    // A new graph comes after on_graph_rebuild (or first): nothing of the previous step's is left to write.
    TT_CHECK(!pending_.load(std::memory_order_relaxed), "a new graph at step {} before the previous step's records",
             step_);
    for (StepRecords& r : records_) {
      r.spans.resize(n_threads_);
      for (auto& s : r.spans) s.assign(n, Span{});
    }
    auto [it, first_seen] = graphs_.try_emplace(graph_key(g));
    KnownGraph& known = it->second;
    if (first_seen) {
      known.id = static_cast<int>(graphs_.size()) - 1;
      dir_.write_file(fmt::format("graphs/graph-{:04}.json", known.id), graph_json(g));
      known.names = intern_graph(g, plan);
    }
    last_graph_ = &g;
    last_structure_id_ = g.structure_id;
    last_known_ = &known;
  }
  KnownGraph& known = *last_known_;
  // The key covers names, ops, shapes and placement, so the allocation plan is the same too.
  TT_CHECK(known.names.events.size() == plan.events.size(), "graph {} seen again with another allocation plan",
           known.id);
  step_graph_.push_back(known.id);
  names_ = &known.names;
  // Compact records (write_records_piece): on a step of the same graph as the previous one, without value
  // statistics, each node's record is chosen by comparing its placement with its previous record's; the threads
  // make the choices while they wait at the step's barriers (idle_unit), on_step_end makes the rest.
  rec.compact = options_.compact && stats_.empty() && names_ == previous_names_;
  previous_names_ = names_;
  if (options_.compact && fields_.size() < n) fields_.resize(n);
  rec.names = names_;
  rec.graph = &g;
  rec.chosen = rec.full = rec.written = rec.routing_written = 0;
  rec.deferred = rec.begun = false;
  rec.choices.assign(n, RecordChoice::ADVANCE);  // the repeatable nodes' (choose_record's shortcut)
  rec.change_spans.resize(n);
  rec.changes.clear();

  // Activation arena and scratch growth are buffer events too.
  for (const BufferInfo& b : g.buffers) {
    uint64_t& known = b.id == kArenaBuffer ? arena_bytes_ : b.id == kScratchBuffer ? scratch_bytes_ : static_bytes_;
    if ((b.id == kArenaBuffer || b.id == kScratchBuffer) && b.size > known) {
      buffer_events_.push_back({now_ns() - t0_, static_cast<uint32_t>(step_), 'a', b.pool, b.id, 0, b.size,
                                writer_.intern(b.name + " (grow)"), false});
      known = b.size;
    }
  }
  rec.ns_before = now_ns();
  rec.ticks_before = tick_count();
}

unsigned __int128 Tracer::tick_scale(uint64_t ticks, uint64_t ns) {
  return (static_cast<unsigned __int128>(ns) << 32) / std::max<uint64_t>(1, ticks);
}

unsigned __int128 Tracer::tick_scale(const StepRecords& r) {
  return tick_scale(r.ticks_after - r.ticks_before, r.ns_after - r.ns_before);
}

void Tracer::spans_to_ns(StepRecords& r) {
  // ns = ns_before + (ticks - ticks_before) * scale / 2^32, clamped to the step (TSC reads on other cores may
  // differ by a few ticks).
  const unsigned __int128 scale = tick_scale(r);
  for (std::vector<Span>& slots : r.spans)
    for (Span& s : slots) {
      if (s.start == 0 && s.end == 0) continue;
      auto to_ns = [&](uint64_t t) {
        const uint64_t d = std::clamp(t, r.ticks_before, r.ticks_after) - r.ticks_before;
        return r.ns_before + static_cast<uint64_t>((d * scale) >> 32);
      };
      // A share ends after it starts: its two reads are on one thread (a migration between cores whose counters
      // differ could read them in the other order).
      s = {to_ns(s.start), to_ns(std::max(s.start, s.end))};
    }
}

void Tracer::on_worker_end(int thread, int node) {
  if (options_.io && !op_is_view(graph_->nodes()[node].op)) {
    IoSlot& s = io_slots_[thread];
    const ThreadIoCounters e = read_thread_io(s.proc_fd);
    io_workers_[thread][node] = {static_cast<uint16_t>(thread), e.major_faults - s.begin.major_faults,
                                 e.minor_faults - s.begin.minor_faults, e.read_bytes - s.begin.read_bytes};
  }
}

void Tracer::on_node_begin(int node, const Node& n) {
  if (options_.io) {
    const uint8_t* base = model_.file->bytes().data();
    auto& ranges = io_ranges_[node];
    for (const ByteRange& r : n.reads)
      if (r.pool == Pool::MODEL_FILE && r.length) {
        const Residency res = residency(base, r.offset, r.length, mincore_buf_);
        ranges.push_back({r.offset, r.length, res.pages, res.nonresident});
      }
  }
  if (prefetcher_) prefetcher_->on_node_begin(node);
}

void Tracer::on_worker_begin(int thread, int node) {
  if (!options_.io) return;
  IoSlot& s = io_slots_[thread];
  s.begin = read_thread_io(s.proc_fd);
}

Tracer::~Tracer() {
  pool_.end_between_jobs_work();  // no thread may call into the tracer once it has gone
  for (IoSlot& s : io_slots_)
    if (s.proc_fd >= 0) ::close(s.proc_fd);
}

void Tracer::on_node_done(int node, const Node& n) {
  if (op_is_view(n.op)) return;
  thread_local std::vector<float> buf;
  std::span<const float> v;
  output_values(n, buf, v);
  trace::ValueStats s;
  double sum = 0;
  float mn = INFINITY, mx = -INFINITY;
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = v[i];
    if (std::isnan(x)) {
      if (!s.nan_count++ && options_.check_finite && !nonfinite_)
        nonfinite_ = fmt::format("NaN in the output of {} '{}' (step {}, layer {}, element {})", op_name(n.op),
                                 n.out->name, step_, n.layer, i);
      continue;
    }
    if (std::isinf(x)) {
      if (!s.inf_count++ && options_.check_finite && !nonfinite_)
        nonfinite_ = fmt::format("Inf in the output of {} '{}' (step {}, layer {}, element {})", op_name(n.op),
                                 n.out->name, step_, n.layer, i);
      continue;
    }
    sum += x;
    mn = std::min(mn, x);
    mx = std::max(mx, x);
  }
  const uint64_t finite = v.size() - s.nan_count - s.inf_count;
  s.min = finite ? mn : 0;
  s.max = finite ? mx : 0;
  s.mean = finite ? sum / finite : 0;
  s.hash = XXH64(v.data(), v.size_bytes(), 0);
  stats_[node] = s;
}

void Tracer::fill_placement(trace::OpRecord& r, const Node& n) {
  fill_tensor(r.out, *n.out);
  r.write = to_record(n.write);
  r.inputs.resize(n.src.size());
  for (size_t k = 0; k < n.src.size(); ++k) {
    fill_tensor(r.inputs[k], *n.src[k]);
    r.inputs[k].ranges.clear();
  }
  for (const ByteRange& br : n.reads) r.inputs[br.input].ranges.push_back(to_record(br));
}

namespace {

// What trace::placement_layout and trace::placement_fields give for the record fill_placement makes of n, straight
// from the graph: the compact path compares them every step, and building the record (vectors of inputs and ranges)
// cost several times more. Values go through the record's field types, so they convert as the record's do; write_op
// checks the two agree on every full record.
void node_placement(const Node& n, std::vector<uint32_t>& layout, std::vector<uint64_t>& fields) {
  constexpr size_t kTensorFields = 9, kRangeFields = 6;
  layout.assign(1 + n.src.size(), 0);
  layout[0] = static_cast<uint32_t>(n.src.size());
  for (const ByteRange& br : n.reads) ++layout[1 + br.input];
  fields.resize(kTensorFields + kRangeFields + n.src.size() * kTensorFields + n.reads.size() * kRangeFields);
  uint64_t* p = fields.data();
  auto put = [&](auto v) { *p++ = static_cast<uint64_t>(v); };
  auto tensor = [&](const Tensor& t) {
    using R = trace::TensorRecord;
    const Tensor& s = t.storage();
    put(t.type), put(s.pool);
    for (int64_t d : t.ne) put(static_cast<std::remove_extent_t<decltype(R::ne)>>(d));
    put(static_cast<decltype(R::buffer_id)>(s.buffer_id));
    put(static_cast<decltype(R::offset)>(s.offset + t.view_offset)), put(static_cast<decltype(R::bytes)>(t.n_bytes()));
  };
  auto range = [&](const ByteRange& br) {
    const trace::RangeRecord x = to_record(br);
    put(x.pool), put(x.buffer_id), put(x.offset), put(x.length), put(x.pos_begin), put(x.pos_end);
  };
  tensor(*n.out);
  range(n.write);
  for (size_t k = 0; k < n.src.size(); ++k) {
    tensor(*n.src[k]);
    for (const ByteRange& br : n.reads)
      if (br.input == static_cast<int>(k)) range(br);
  }
}

}  // namespace

Tracer::RecordChoice Tracer::choose_record(StepRecords& r, size_t i) {
  // (A repeatable node is not compared: on the same graph as the previous step, a node touching only
  // step-independent bytes has the same placement again, and it never gets a stride.)
  NodeFields& f = fields_[i];
  node_placement(graph_->nodes()[i], layout_scratch_, fields_scratch_);
  if (layout_scratch_ != f.layout) return RecordChoice::FULL;  // the same layout: as many fields as f.last
  // Differences mod 2^64, as the reader adds them. The common case, an advance by the stride: the previous record
  // moved by its few nonzero stride fields, then one comparison of the whole.
  std::vector<uint64_t>& last = f.last;
  for (const auto& [k, d] : f.stride) last[k] += d;
  if (fields_scratch_ == last) return RecordChoice::ADVANCE;
  for (const auto& [k, d] : f.stride) last[k] -= d;
  const size_t first_change = r.changes.size();
  for (size_t k = 0; k < last.size(); ++k)
    if (const uint64_t d = fields_scratch_[k] - last[k]) r.changes.emplace_back(static_cast<uint32_t>(k), d);
  last.swap(fields_scratch_);
  // The changes become the stride (none: the node stopped moving).
  f.stride.assign(r.changes.begin() + static_cast<ptrdiff_t>(first_change), r.changes.end());
  return RecordChoice::DELTA;
}

bool Tracer::choose_next_record() {
  StepRecords& r = records_[running_];
  if (!r.compact) return false;
  // One compared node a call (a fraction of a microsecond).
  const std::vector<uint32_t>& compared = r.names->compared;
  if (r.chosen == compared.size()) return false;
  choose(r, compared[r.chosen++]);
  return r.chosen < compared.size();
}

void Tracer::choose(StepRecords& r, uint32_t i) {
  const auto changes_begin = static_cast<uint32_t>(r.changes.size());
  r.choices[i] = choose_record(r, i);
  r.full += r.choices[i] == RecordChoice::FULL;
  r.change_spans[i] = {changes_begin, static_cast<uint32_t>(r.changes.size())};
}

bool Tracer::idle_pieces(bool choose, const IdleStop& stop) {
  // One thread at a time: the others, finding it taken, go back to waiting (and call again later). After a failure,
  // none (what failed would fail again).
  if (idle_failed_.load(std::memory_order_acquire)) return false;
  if (idle_busy_.exchange(true, std::memory_order_acquire)) return true;
  bool more = false;
  try {
    do {
      if (pending_.load(std::memory_order_relaxed)) {  // the previous step's records, landscape and line
        previous_step_piece();
        more = true;
      } else if (choose) {
        StepRecords& r = records_[running_];
        const size_t before = r.chosen;
        more = choose_next_record();
        scheduling_.records_chosen_waiting += r.chosen - before;
      } else {
        more = false;
      }
    } while (more && !stop.requested());
  } catch (...) {
    keep_idle_failure();
  }
  idle_busy_.store(false, std::memory_order_release);
  return more;
}

bool Tracer::idle_unit(void* self, const IdleStop& stop) { return static_cast<Tracer*>(self)->idle_pieces(true, stop); }

void Tracer::finish_due_idle_work() {
  SelfTimer timer{*this};  // on the run's thread (the executor's thread 0), between two nodes of the step
  // The previous step's work only (the running step's record choices are not due), shared with whichever thread
  // holds idle_busy_ meanwhile.
  // A piece that failed leaves its step pending: the failure ends the step instead (on_step_end rethrows it).
  while (pending_.load(std::memory_order_acquire) && !idle_failed_.load(std::memory_order_acquire))
    idle_pieces(false, IdleStop());
}

void Tracer::keep_idle_failure() {
  // Not on a worker thread's stack: on_step_end rethrows it.
  if (!idle_failure_) idle_failure_ = std::current_exception();
  idle_failed_.store(true, std::memory_order_release);
}

IdleWork Tracer::between_runs_work() {
  RunLogits& r = run_logits_[run_slot_];
  return r.state.load(std::memory_order_relaxed) == OPEN ? IdleWork{&Tracer::between_runs_unit, &r} : IdleWork{};
}

bool Tracer::between_runs_unit(void* ctx, const IdleStop& stop) {
  RunLogits& r = *static_cast<RunLogits*>(ctx);
  Tracer& t = *r.tracer;
  if (t.idle_failed_.load(std::memory_order_acquire) || r.state.load(std::memory_order_acquire) == CLOSED) return false;
  if (t.idle_busy_.exchange(true, std::memory_order_acquire)) return true;
  bool more = false;
  try {
    // The run's step, unless the previous one is still pending (its logits were a copy: no node waited for it).
    uint8_t open = OPEN;
    if (!t.pending_.load(std::memory_order_acquire) &&
        r.state.compare_exchange_strong(open, OPENING, std::memory_order_acq_rel)) {
      t.begin_pending(r.logits, true, t.logits_written_fast(*r.records, r.logits));
      t.pending_step_.outcome_known = false;
      t.pending_.store(true, std::memory_order_release);
      ++t.scheduling_.steps_begun_between_runs;
      r.state.store(BEGUN, std::memory_order_release);
    }
    // Only the landscape and hash of a step begun here: the records and line need the step's end, and thread 0
    // meanwhile goes on to the next step's graph, which they read. Not a hash that lets go of the logits' cache lines
    // (PendingStep::evict_logits): thread 0 may not have read them yet (sampling), and would read them from memory.
    auto between_runs_piece_left = [&] {
      return t.landscape_or_hash_pending() &&
             !(t.pending_step_.stage == PendingStep::HASH && t.pending_step_.evict_logits);
    };
    while (r.state.load(std::memory_order_relaxed) == BEGUN && (more = between_runs_piece_left()) && !stop.requested())
      t.previous_step_piece();
  } catch (...) {
    t.keep_idle_failure();
    more = false;
  }
  t.idle_busy_.store(false, std::memory_order_release);
  return more;
}

IdleWork Tracer::idle_work() {
  if (!records_[running_].compact && !pending_.load(std::memory_order_relaxed)) return {};
  return {&Tracer::idle_unit, this};
}

namespace {

// The first node of g writing any byte of v, or a node whose output g cannot place (-1: none).
int first_writer(const Graph& g, std::span<const float> v) {
  const auto* begin = reinterpret_cast<const uint8_t*>(v.data());
  const auto* end = begin + v.size_bytes();
  const std::vector<Node>& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (op_is_view(n.op) || n.write.pool != Pool::ACTIVATION || n.write.length == 0) continue;
    const uint8_t* data = g.buffer(n.write.buffer_id).data;
    if (data == nullptr || (data + n.write.offset < end && begin < data + n.write.offset + n.write.length))
      return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

int Tracer::logits_writer(const Graph& g, std::span<const float> logits) {
  if (logits.data() != logits_writer_.logits) logits_writer_ = {logits.data(), first_writer(g, logits)};
  return logits_writer_.node;
}

int Tracer::idle_work_due(const Graph& g) {
  // The previous step's logits, read in place, until the first node writing any of their bytes (the output
  // projection: the engine gives the logits bytes of their own, see plan_activations).
  if (!pending_.load(std::memory_order_relaxed) || !pending_step_.logits_in_place) return -1;
  return logits_writer(g, pending_step_.logits);
}

bool Tracer::logits_written_fast(const StepRecords& r, std::span<const float> logits) {
  const int writer = logits_writer(*r.graph, logits);
  if (writer < 0) return false;
  // The node's longest share (its spans are still counter ticks) over the lines each worker wrote.
  uint64_t ticks = 0;
  int workers = 0;
  for (const std::vector<Span>& slots : r.spans) {
    const Span& s = slots[static_cast<size_t>(writer)];
    if (s.start == 0 && s.end == 0) continue;
    ticks = std::max(ticks, s.end - s.start), ++workers;
  }
  if (workers == 0) return false;
  // At the counter's rate over the run (r's own step may not have ended: the decision is made between runs).
  const auto ns = static_cast<double>(ticks_to_ns(ticks));
  const double lines_a_worker = static_cast<double>(logits.size_bytes()) / kCacheLine / workers;
  return ns < kFastLineNs * lines_a_worker;
}

bool Tracer::write_records_piece(StepRecords& r) {
  // Compact records (versions 5 and 6): on a step of the same graph as the previous step (and without value
  // statistics), a node's record is its previous one with new times and positions, advanced by its stride
  // (OP_ADVANCES_PACKED; runs of consecutive nodes in one record) or with listed changes that become its stride
  // (OP_DELTA): cache views grow one position a step, so after one OP_DELTA they advance; token rows (GET_ROWS) change
  // arbitrarily. Otherwise a full OP record. The choice compares the node's placement with the previous record's plus
  // stride exactly, so the reader restores every record whole. Pieces of a fraction of a microsecond each (a step's
  // records may be written in the next step's waits): the step's begin and its spans in nanoseconds; kNodesAPiece nodes
  // (a run of OP_ADVANCES_PACKED ends with its piece); the step's end.
  constexpr size_t kNodesAPiece = 32;
  const size_t n = r.choices.size();
  if (!r.begun) {
    trace::StepMarker begin = r.marker;
    begin.end_ns = 0, begin.token = -1, begin.probability = 0, begin.ended = false;
    writer_.step_begin(begin);
    spans_to_ns(r);
    r.begun = true;
    return true;
  }
  if (r.written < n) {
    const size_t end = std::min(n, r.written + kNodesAPiece);
    size_t run_begin = end;  // first node of the pending OP_ADVANCES_PACKED run (end: none)
    auto end_run = [&](size_t stop) {
      if (run_begin == end) return;
      write_advance_run(r, run_begin, stop);
      run_begin = end;
    };
    for (size_t i = r.written; i < end; ++i) {
      const RecordChoice choice = r.compact ? r.choices[i] : RecordChoice::FULL;
      if (choice == RecordChoice::ADVANCE) {
        if (run_begin == end) run_begin = i;
      } else {
        end_run(i);
        write_op(r, i, choice);
      }
      if (options_.io) {  // each op's IO record follows it
        end_run(i + 1);
        write_io(r, i);
      }
    }
    end_run(end);
    r.written = end;
    return true;
  }
  if (r.routing_written < r.routing_rows.size()) {
    const size_t end = std::min(r.routing_rows.size(), r.routing_written + kNodesAPiece);
    const size_t k = r.routing_k;
    for (size_t i = r.routing_written; i < end; ++i) {
      const StepRecords::RoutingRow& row = r.routing_rows[i];
      writer_.routing(r.marker.step, row.layer, row.token_pos, std::span(r.routing_experts).subspan(i * k, k),
                      std::span(r.routing_weights).subspan(i * k, k), row.margin,
                      row.predicted ? std::span(r.routing_predicted).subspan(i * k, k) : std::span<const int32_t>());
    }
    r.routing_written = end;
    return true;
  }
  // Buffer timeline: allocations when their node starts, frees when it ends. The events themselves are the
  // graph's (cached with its names); a step keeps only the run thread's node times, expanded into buffers.json
  // by finish(). They go to a scratch file with each flush: memory that grows with the run costs a step far more
  // than its copy on a VM (first touches of fresh pages, see reserve_touched).
  StepBuffers b = r.buffers;
  b.times_at = node_times_written_ + node_times_.size();
  step_buffers_.push_back(b);
  node_times_.insert(node_times_.end(), r.spans[0].begin(), r.spans[0].end());
  writer_.step_end(r.marker);
  return false;
}

void Tracer::write_op(const StepRecords& step, size_t i, RecordChoice choice) {
  const Node& n = step.graph->nodes()[i];
  trace::OpRecord& r = record_;
  r.step = step.marker.step;
  r.node = static_cast<uint32_t>(i);
  r.phase = step.marker.phase;
  r.op = n.op;
  r.layer = static_cast<int16_t>(n.layer);
  r.pos_begin = step.marker.pos_begin;
  r.pos_end = step.marker.pos_end;
  uint64_t start = UINT64_MAX, end = 0;
  int first_thread = -1, workers = 0;
  for (int t = 0; t < n_threads_; ++t) {
    const Span& s = step.spans[t][i];
    if (s.start == 0 && s.end == 0) continue;
    if (first_thread < 0) first_thread = t;
    if (!op_is_view(n.op)) ++workers;
    start = std::min(start, s.start);
    end = std::max(end, s.end);
    if (!op_is_view(n.op)) writer_.span({r.step, r.node, static_cast<uint16_t>(t), s.start - t0_, s.end - t0_});
  }
  r.thread = static_cast<uint16_t>(std::max(first_thread, 0));
  r.n_threads = static_cast<uint16_t>(workers);
  r.start_ns = start == UINT64_MAX ? 0 : start - t0_;
  r.end_ns = end == 0 ? r.start_ns : end - t0_;
  if (choice == RecordChoice::DELTA) {  // choose_record() stored its changes
    const auto [first, stop] = step.change_spans[i];
    writer_.op_delta(r, std::span(step.changes).subspan(first, stop - first));
    return;
  }
  // A whole record reads the graph as this step ran it: never deferred (the next step patches the graph).
  TT_CHECK(!step.deferred, "step {}: a deferred whole record of node {}", step.marker.step, i);
  fill_placement(r, n);
  r.has_stats = !stats_.empty() && !op_is_view(n.op);
  if (r.has_stats) r.stats = stats_[i];
  writer_.op(r, &step.names->ids[step.names->node_offset[i]]);
  if (options_.compact) {  // the reader's state after an OP record: these fields, stride 0
    NodeFields& f = fields_[i];
    trace::placement_layout(r, f.layout);
    trace::placement_fields(r, f.last);
    f.stride.clear();
    // choose_record() compares node_placement() with these on the following steps: they must agree.
    node_placement(n, layout_scratch_, fields_scratch_);
    if (layout_scratch_ != f.layout || fields_scratch_ != f.last)
      fail("internal error: the tracer's placement fields of node {} ('{}') differ from its record's", i, n.out->name);
  }
}

void Tracer::write_io(const StepRecords& step, size_t i) {
  if (io_ranges_[i].empty()) return;
  trace::IoRecord& io = io_record_;
  io.step = step.marker.step;
  io.node = static_cast<uint32_t>(i);
  io.page_bytes = static_cast<uint32_t>(page_bytes());
  io.ranges = io_ranges_[i];
  io.workers.clear();
  for (int t = 0; t < n_threads_; ++t)
    if (step.spans[t][i].start || step.spans[t][i].end) io.workers.push_back(io_workers_[t][i]);
  writer_.io(io);
}

void Tracer::write_advance_run(const StepRecords& step, size_t first, size_t end) {
  // Written through a pointer into a buffer kept at its size (a run of every node of a step, every step).
  std::vector<uint64_t>& times = run_times_;
  times.resize((end - first) * static_cast<size_t>(n_threads_) * 2);
  uint64_t* out = times.data();
  uint64_t n_spans = 0;
  for (size_t i = first; i < end; ++i) {
    const bool view = step.names->view[i];
    for (int t = 0; t < n_threads_; ++t) {
      const Span& s = step.spans[t][i];
      if ((s.start | s.end) == 0) {  // no share
        *out++ = trace::TraceWriter::kNoShareNs, *out++ = trace::TraceWriter::kNoShareNs;
        continue;
      }
      *out++ = s.start - t0_, *out++ = s.end - t0_;
      n_spans += !view;
    }
  }
  const trace::StepMarker& m = step.marker;
  writer_.op_advances({m.step, m.phase, m.pos_begin, m.pos_end, static_cast<uint32_t>(first),
                       static_cast<uint32_t>(end - first), static_cast<uint16_t>(n_threads_)},
                      times, n_spans);
}

void Tracer::copy_routing(StepRecords& r, const StepOutcome& o) {
  r.routing_rows.clear(), r.routing_experts.clear(), r.routing_weights.clear(), r.routing_predicted.clear();
  r.routing_k = o.routing.empty() ? 0 : static_cast<size_t>(o.routing.front().n_used());
  for (const LayerRouting& l : o.routing) {
    const int64_t k = l.n_used(), n = l.n_tokens();
    TT_CHECK(static_cast<size_t>(k) == r.routing_k && k <= trace::kMaxRoutedExperts,
             "layer {} routes to {} experts a token", l.layer, k);
    for (int64_t t = 0; t < n; ++t) {
      // Rows are the step's last n tokens (the last layer of a prompt routes only its last token).
      r.routing_rows.push_back({static_cast<uint16_t>(l.layer), o.pos_end - static_cast<int32_t>(n - t), l.margin(t),
                                l.predicted != nullptr});
      for (int64_t slot = 0; slot < k; ++slot) {
        r.routing_experts.push_back(l.expert(t, slot));
        r.routing_weights.push_back(l.weight(t, slot));
        // Aligned with the rows (zeros where a row has no prediction).
        r.routing_predicted.push_back(l.predicted ? l.predicted_expert(t, slot) : 0);
      }
    }
  }
}

void Tracer::on_step_end(const StepOutcome& o) {
  SelfTimer timer{*this};
  // A piece's failure (the flag first: a thread between runs may be setting it meanwhile).
  if (idle_failed_.load(std::memory_order_acquire) && idle_failure_)
    std::rethrow_exception(std::exchange(idle_failure_, nullptr));
  StepRecords& rec = records_[running_];
  rec.ticks_after = tick_count(), rec.ns_after = now_ns();
  std::span<const float> logits = o.logits;
  if (logits.empty()) fail("internal error: step {} has no logits to trace", o.step);
  // Begun between runs (between_runs_unit) on the engine's logits: kept when they are the step's, and its pieces go on
  // meanwhile (a caller may give its own logits: then given up).
  RunLogits& run = run_logits_[run_slot_];
  uint8_t state = OPEN;
  const bool begun = !run.state.compare_exchange_strong(state, CLOSED, std::memory_order_acq_rel) && state != CLOSED;
  const bool keep_begun = begun && run.logits.data() == logits.data() && run.logits.size() == logits.size();
  // A begun step's opening reads the spans (the flush decision) and logits_writer_: thread 0 lets it complete before
  // it changes them.
  auto opened = [&] {
    if (keep_begun)
      while (run.state.load(std::memory_order_acquire) == OPENING) _mm_pause();
  };
  if (begun && !keep_begun) {
    pool_.end_between_jobs_work();  // no thread is on it any more
    run.state.store(CLOSED, std::memory_order_relaxed);
    pending_.store(false, std::memory_order_relaxed), ++scheduling_.begun_steps_given_up;
  }
  PendingStep& next = pending_step_;
  // What is left of the previous step's records, landscape and line (begun: none, this step's output node waited for
  // them), and of this step's record choices (the threads' waits in this step did the rest).
  if (!keep_begun) finish_previous_step();
  while (choose_next_record()) {
  }
  if (rec.compact)
    for (const uint32_t i : rec.names->routed) choose(rec, i);
  rec.marker.end_ns = o.end_ns - t0_;
  rec.marker.token = o.sampled.token, rec.marker.probability = o.sampled.probability;
  rec.marker.ended = true;
  copy_routing(rec, o);
  rec.buffers = {static_cast<uint32_t>(o.step),
                 rec.names,
                 0,
                 step_start_,
                 buffer_events_.size(),
                 arena_bytes_,
                 scratch_bytes_,
                 static_bytes_};
  // The records wait for the next step's barriers when each follows from its node's previous record (a whole
  // record reads the graph, which the next step patches); else they go now.
  rec.deferred = rec.compact && rec.full == 0 && !options_.io;
  const bool in_place = keep_begun || in_arena(*graph_, logits);
  // Before the spans become ns (begun: decided then).
  const bool evict_logits = !keep_begun && in_place && logits_written_fast(rec, logits);
  if (!rec.deferred) {
    opened();
    while (write_records_piece(rec)) {
    }
  }
  // The engine's logits keep their bytes until the node computing them runs in the next step (the threads finish the
  // landscape before it, see idle_work_due; a new graph calls on_graph_rebuild first); a caller's own are copied.
  if (!in_place) {
    if (logits_copy_.size() < logits.size()) logits_copy_.resize(logits.size());
    std::memcpy(logits_copy_.data(), logits.data(), logits.size_bytes());
  }
  if (!keep_begun)
    begin_pending(in_place ? logits : std::span<const float>(logits_copy_.data(), logits.size()), in_place,
                  evict_logits);
  next.step = o.step, next.phase = o.phase, next.pos_begin = o.pos_begin, next.pos_end = o.pos_end;
  next.input_tokens.assign(o.input_tokens.begin(), o.input_tokens.end());
  next.sampled = o.sampled;
  next.end_of_generation = o.end_of_generation;
  next.hidden_stats = readout_stats(o.hidden);
  next.start_ns = o.start_ns - t0_, next.end_ns = o.end_ns - t0_;
  next.n_ops = graph_->nodes().size();
  next.graph = step_graph_.back();
  next.records = rec.deferred ? &rec : nullptr;
  // Read by the line before this slot's next use: the next step's end finishes it (finish_previous_step).
  next.routing = rec.routing_rows.empty() ? nullptr : &rec;
  opened();
  next.weights.reset();
  if (weight_loads_) next.weights = weight_loads_->step_end(writer_, static_cast<uint32_t>(o.step));
  next.outcome_known = true;
  pending_.store(true, std::memory_order_release);
  running_ ^= 1;  // the next step's spans and choices go to the other records
  // Each buffer is written when it passes kFlushBytes (it is reserved twice that, so it never grows inside a
  // step), and all of them at least every kFlushIntervalNs (what a killed run can lose): a write call costs tens of
  // microseconds on a VM whatever its size, so small buffers are not written every few steps.
  const uint64_t now = rec.ns_after;  // a few microseconds ago at most
  const bool interval = now - last_flush_ns_ >= kFlushIntervalNs;
  if (interval || steps_pending_.size() >= trace::TraceWriter::kFlushBytes) flush_steps();
  if (interval || node_times_.size() * sizeof(Span) >= trace::TraceWriter::kFlushBytes) flush_node_times();
  if (interval || writer_.bytes_buffered() >= trace::TraceWriter::kFlushBytes) writer_.flush();
  if (interval) last_flush_ns_ = now;
  if (nonfinite_) fail("--check-finite: {}", *nonfinite_);
}

void Tracer::begin_pending(std::span<const float> logits, bool in_place, bool evict) {
  PendingStep& p = pending_step_;
  p.k = std::min<int>(options_.logit_top_k, static_cast<int>(logits.size()));
  p.logits = logits;
  p.logits_in_place = in_place;
  p.evict_logits = evict;
  p.landscape.begin(logits, std::max(p.k, 2));  // the top-1/top-2 gap needs two
  p.stage = PendingStep::LANDSCAPE;
  p.next_piece = 0;
}

void Tracer::finish_previous_step() {
  while (previous_step_piece()) {
  }
}

bool Tracer::previous_step_piece() {
  if (!pending_.load(std::memory_order_acquire)) return false;
  PendingStep& l = pending_step_;
  // Pieces of a fraction of a microsecond each: one pass of the landscape over one block; the logits' hash
  // kHashPiece bytes at a time; the records (write_records_piece); the line's head, each top-k entry, the rest.
  if (l.stage == PendingStep::LANDSCAPE) {
    // One block a piece: a waiting thread goes on piece after piece until its barrier opens (idle_pieces), so a
    // piece that outlasts the wait delays its thread by at most one block.
    if (!l.landscape.next()) {
      // The line's logits, kept: the hash lets go of the logits' cache lines (below).
      const LogitLandscape& land = l.landscape.result();
      l.top_logits.clear();
      for (int32_t id : land.top) {
        l.top_logits.push_back(l.logits[static_cast<size_t>(id)]);
        model_.tokenizer->prefetch_piece(id);  // read by the line's pieces, after the hash's
      }
      l.stage = PendingStep::HASH;
      l.hashed = 0;
      logits_hash_.reset();
    }
    return true;
  }
  if (l.stage == PendingStep::HASH) {
    constexpr size_t kHashPiece = 8 * 1024;  // ~0.15 us, as a landscape block's pass
    const std::span<const std::byte> bytes = std::as_bytes(l.logits);
    const size_t n = std::min(kHashPiece, bytes.size() - l.hashed);
    logits_hash_.update(bytes.data() + l.hashed, n);
    // The last read of the engine's logits: when they were written fast, their cache lines go from every cache
    // (see PendingStep::evict_logits).
    if (l.evict_logits) evict_lines(bytes.data() + l.hashed, n);
    l.hashed += n;
    if (l.hashed == bytes.size()) {
      const LogitLandscape& land = l.landscape.result();
      l.logits_stats.min = land.min_logit, l.logits_stats.max = land.max_logit;
      l.logits_stats.mean = land.mean_logit, l.logits_stats.std = land.std_logit;
      l.logits_stats.hash = logits_hash_.digest();
      l.stage = PendingStep::RECORDS;
    }
    return true;
  }
  TT_CHECK(l.outcome_known, "step {}'s records and line before its end", l.step);
  if (l.stage == PendingStep::RECORDS) {
    if (l.records == nullptr || !write_records_piece(*l.records)) l.stage = PendingStep::TEXT;
    return true;
  }
  const LogitLandscape& land = l.landscape.result();
  const Tokenizer& tok = *model_.tokenizer;
  auto text_of = [&](int32_t id) {
    return id >= 0 && id < tok.n_vocab() ? tok.piece_view(id, true) : std::string_view();
  };
  JsonLine& j = step_line_;
  // Pieces of a fraction of a microsecond each: the head, each top-k entry, the rest.
  const int piece = l.next_piece++;
  if (piece == 0) {
    // The chosen token's logit: mostly one of the top ids' (the hash may have let go of the logits' cache lines).
    const int32_t chosen = l.sampled.token;
    const auto top = std::find(land.top.begin(), land.top.end(), chosen);
    l.chosen_logit = top != land.top.end() ? l.top_logits[static_cast<size_t>(top - land.top.begin())]
                     : chosen >= 0 && static_cast<size_t>(chosen) < l.logits.size() ? l.logits[chosen]
                                                                                    : 0.0f;
    j.clear();
    j.begin_object()
        .field("step", l.step)
        .field("phase", phase_name(l.phase))
        .field("pos_begin", l.pos_begin)
        .field("pos_end", l.pos_end);
    j.begin_array("input_tokens");
    for (int32_t t : l.input_tokens) j.value(t);
    j.end_array();
    if (chosen >= 0) {
      j.field("token", chosen)
          .field("token_text", text_of(chosen))
          .field("probability", l.sampled.probability)
          .field("softmax_probability", land.prob(l.chosen_logit));
    } else {
      j.key("token").null().key("token_text").null().key("probability").null().key("softmax_probability").null();
    }
    j.field("end_of_generation", l.end_of_generation);
    j.begin_array("top_k");
    return true;
  }
  if (piece <= l.k) {
    const int32_t id = land.top[piece - 1];
    const float logit = l.top_logits[piece - 1];
    j.begin_object()
        .field("id", id)
        .field("text", text_of(id))
        .field("logit", logit)
        .field("prob", land.prob(logit))
        .end_object();
    return true;
  }
  j.end_array();
  j.field("top1_top2_gap", land.top.size() > 1 ? l.top_logits[0] - l.top_logits[1] : 0.0f)
      .field("entropy", land.entropy);
  if (l.routing) write_routing_field(j, *l.routing);
  if (l.weights) l.weights->write(j);
  j.key("hidden_stats");
  l.hidden_stats.write(j);
  j.key("logits_stats");
  l.logits_stats.write(j);
  j.field("start_ns", l.start_ns)
      .field("end_ns", l.end_ns)
      .field("n_ops", l.n_ops)
      .field("graph", l.graph)
      .end_object();
  steps_pending_ += j.str();
  steps_pending_ += '\n';
  pending_.store(false, std::memory_order_release);
  return false;
}

void Tracer::write_routing_field(JsonLine& j, const StepRecords& r) {
  // "routing": [{"layer": L, "pos_begin": P, "experts": [[ids of token P], [ids of P + 1], ...]}, ...]
  j.begin_array("routing");
  const size_t k = r.routing_k;
  for (size_t i = 0; i < r.routing_rows.size();) {
    const uint16_t layer = r.routing_rows[i].layer;
    j.begin_object().field("layer", static_cast<uint32_t>(layer)).field("pos_begin", r.routing_rows[i].token_pos);
    j.begin_array("experts");
    for (; i < r.routing_rows.size() && r.routing_rows[i].layer == layer; ++i) {
      j.begin_array();
      for (size_t s = 0; s < k; ++s) j.value(r.routing_experts[i * k + s]);
      j.end_array();
    }
    j.end_array().end_object();
  }
  j.end_array();
}

void Tracer::flush_node_times() {
  node_times_file_->write(reinterpret_cast<const char*>(node_times_.data()),
                          static_cast<std::streamsize>(node_times_.size() * sizeof(Span)));
  if (!*node_times_file_) fail("error writing '{}'", dir_.path(kNodeTimesFile));
  node_times_written_ += node_times_.size();
  node_times_.clear();
}

void Tracer::flush_steps() {
  steps_stream_->write(steps_pending_.data(), static_cast<std::streamsize>(steps_pending_.size()));
  steps_stream_->flush();
  steps_pending_.clear();
}

void Tracer::finish_last_step() {
  SelfTimer timer{*this};
  pool_.end_between_jobs_work();
  finish_previous_step();
}

json Tracer::finish() {
  finish_last_step();
  flush_steps();
  if (!*steps_stream_) fail("error writing '{}'", dir_.path("steps.jsonl"));
  json index = json::array();
  for (size_t s = 0; s < step_graph_.size(); ++s) index.push_back({{"step", s}, {"graph", step_graph_[s]}});
  dir_.write_json("graphs/index.json", {{"graphs", graphs_.size()}, {"steps", index}});

  // The node times of every step, back from the scratch file (which then goes).
  flush_node_times();
  node_times_.resize(node_times_written_);
  node_times_file_->seekg(0);
  node_times_file_->read(reinterpret_cast<char*>(node_times_.data()),
                         static_cast<std::streamsize>(node_times_.size() * sizeof(Span)));
  if (!*node_times_file_) fail("error reading '{}'", dir_.path(kNodeTimesFile));
  node_times_file_.reset();
  std::filesystem::remove(dir_.path(kNodeTimesFile));

  // Explicit events (static buffers, growth) in their place before each step's arena events.
  json events = json::array(), step_peaks = json::array();
  auto add = [&](const BufferEvent& e) {
    events.push_back({e.t_ns, e.step, std::string(1, e.kind), pool_name(e.pool), e.buffer_id, e.offset, e.bytes,
                      writer_.string_of(e.tensor), e.reuse});
  };
  size_t next_explicit = 0;
  uint64_t peak = 0;
  for (const StepBuffers& sb : step_buffers_) {
    for (; next_explicit < sb.explicit_end; ++next_explicit) add(buffer_events_[next_explicit]);
    const GraphNames& g = *sb.names;
    for (const GraphNames::Event& e : g.events) {
      const Span& span = node_times_[sb.times_at + e.node];
      const uint64_t start = span.start ? span.start - t0_ : sb.step_start;
      const uint64_t t = e.alloc ? start : span.end ? span.end - t0_ : start;
      add({t, sb.step, e.alloc ? 'a' : 'f', Pool::ACTIVATION, kArenaBuffer, e.offset, e.bytes, e.tensor, e.reuse});
    }
    const uint64_t total = g.activation_peak + sb.scratch_bytes + sb.static_bytes;
    peak = std::max(peak, total);
    step_peaks.push_back({{"step", sb.step},
                          {"activation_peak_bytes", g.activation_peak},
                          {"activation_peak_node", g.events.empty() ? "" : writer_.string_of(g.activation_peak_node)},
                          {"arena_bytes", sb.arena_bytes},
                          {"scratch_bytes", sb.scratch_bytes},
                          {"static_bytes", sb.static_bytes},
                          {"total_peak_bytes", total}});
  }
  for (; next_explicit < buffer_events_.size(); ++next_explicit) add(buffer_events_[next_explicit]);
  dir_.write_json("buffers.json",
                  {{"format", "tensortrace.buffers"},
                   {"version", 1},
                   {"columns", {"t_ns", "step", "kind", "pool", "buffer_id", "offset", "bytes", "tensor", "reuse"}},
                   {"events", events},
                   {"steps", step_peaks},
                   {"peak_bytes", peak}},
                  -1);
  writer_.flush();
  return {{"ops", writer_.op_count()}, {"spans", writer_.span_count()},  {"steps", step_graph_.size()},
          {"graphs", graphs_.size()},  {"buffer_events", events.size()}, {"trace_bytes", writer_.bytes_written()},
          {"tracer_ns", self_ns()}};
}

}  // namespace tt
