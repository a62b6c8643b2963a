#include "trace/tracer.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <cstring>
#include <unistd.h>

#include "core/error.h"
#include "core/fp16.h"
#include "exec/executor.h"
#include "gguf/memory_map.h"
#include "model/forward.h"
#include "tokenizer/tokenizer.h"
#include "core/shape.h"
#include "trace/landscape.h"

namespace tt {

using nlohmann::json;

nlohmann::json TraceOptions::to_json() const {
  return {{"values", values}, {"check_finite", check_finite}, {"logit_top_k", logit_top_k}, {"io", io}};
}

json readout_stats(std::span<const float> v) {
  if (v.empty()) return json::object();
  // Four independent partial sums: one chain of dependent double adds would take 4 cycles an element.
  double sum[4] = {}, sum2[4] = {};
  float mn = v[0], mx = v[0];
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = v[i];
    sum[i % 4] += x;
    sum2[i % 4] += x * x;
    mn = std::min(mn, v[i]);
    mx = std::max(mx, v[i]);
  }
  const double mean = (sum[0] + sum[1] + sum[2] + sum[3]) / v.size();
  const double var = std::max(0.0, (sum2[0] + sum2[1] + sum2[2] + sum2[3]) / v.size() - mean * mean);
  return {{"min", mn},
          {"max", mx},
          {"mean", mean},
          {"std", std::sqrt(var)},
          {"hash", fmt::format("{:016x}", XXH64(v.data(), v.size_bytes(), 0))}};
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

trace::RangeRecord to_record(const ByteRange& r) {
  return {r.pool, r.buffer_id, r.offset, r.length, r.pos_begin, r.pos_end};
}

void fill_tensor(trace::TensorRecord& t, const Tensor& src) {
  t.name = src.name;
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

Tracer::Tracer(RunDirWriter& dir, const Model& model, TraceOptions options, int n_threads, uint64_t run_start_ns)
    : dir_(dir),
      model_(model),
      options_(options),
      n_threads_(n_threads),
      t0_(run_start_ns),
      writer_(dir.path("trace.bin")) {
  if (options_.logit_top_k < 1) fail("--logit-top-k must be at least 1, got {}", options_.logit_top_k);
  steps_stream_ = std::make_unique<std::ofstream>(dir.path("steps.jsonl"), std::ios::trunc);
  if (!*steps_stream_) fail("cannot create '{}'", dir.path("steps.jsonl"));
}

void Tracer::record_static_buffer(const std::string& name, Pool pool, int buffer_id, uint64_t bytes) {
  buffer_events_.push_back({0, 0, 'a', pool, buffer_id, 0, bytes, name, false});
  static_bytes_ += bytes;
}

void Tracer::on_step_begin(int32_t step, Phase phase, int32_t pos_begin, int32_t pos_end) {
  step_ = step;
  phase_ = phase;
  pos_begin_ = pos_begin;
  pos_end_ = pos_end;
  step_start_ = now_ns() - t0_;
  writer_.step_begin({static_cast<uint32_t>(step), phase, pos_begin, pos_end, step_start_, 0, -1, 0, false});
}

std::string Tracer::graph_key(const Graph& g) const {
  // Structure without the step-dependent number of attended cache positions.
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  for (const Node& n : g.nodes()) {
    XXH64_update(st, n.out->name.data(), n.out->name.size());
    XXH64_update(st, &n.op, sizeof(n.op));
    const bool kv_dependent = n.out->pool == Pool::KV_CACHE;
    if (!kv_dependent) XXH64_update(st, n.out->ne, sizeof(n.out->ne));
  }
  std::string key = fmt::format("{:016x}", XXH64_digest(st));
  XXH64_freeState(st);
  return key;
}

json Tracer::graph_json(const Graph& g) const {
  json nodes = json::array(), edges = json::array();
  std::map<const Tensor*, std::string> producer;  // tensor -> node id that computed it
  std::map<const Tensor*, std::string> leaves;
  auto leaf = [&](const Tensor* t) -> std::string {
    auto it = leaves.find(t);
    if (it != leaves.end()) return it->second;
    std::string id = fmt::format("leaf_{}", leaves.size());
    leaves[t] = id;
    TensorRole role = tensor_role(t->name);
    nodes.push_back({{"id", id},
                     {"name", t->name},
                     {"op", "LEAF"},
                     {"shape", t->pool == Pool::KV_CACHE ? json(nullptr) : json(shape_dims(t->ne))},
                     {"type", type_name(t->type)},
                     {"layer", t->layer >= 0 ? json(t->layer) : json(nullptr)},
                     {"category", t->pool == Pool::MODEL_FILE ? role.category : node_category(t->name)},
                     {"pool", pool_name(t->pool)}});
    return id;
  };
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    const std::string id = fmt::format("node_{}", i);
    json node = {{"id", id},
                 {"index", i},
                 {"name", n.out->name},
                 {"op", op_name(n.op)},
                 {"shape", n.out->pool == Pool::KV_CACHE ? json(nullptr) : json(shape_dims(n.out->ne))},
                 {"type", type_name(n.out->type)},
                 {"layer", n.layer >= 0 ? json(n.layer) : json(nullptr)},
                 {"category", node_category(n.out->name)},
                 {"pool", pool_name(n.out->storage().pool)}};
    for (const Tensor* s : n.src)
      if (s->pool == Pool::MODEL_FILE) node["weight_tensor"] = s->name;
    nodes.push_back(node);
    for (size_t slot = 0; slot < n.src.size(); ++slot) {
      const Tensor* s = n.src[slot];
      auto it = producer.find(s);
      std::string from = it != producer.end() ? it->second : leaf(s);
      edges.push_back({{"source", from}, {"target", id}, {"slot", slot}, {"label", fmt::format("src[{}]", slot)}});
    }
    producer[n.out] = id;
  }
  return {{"format", "tensortrace.graph"},
          {"version", 1},
          {"n_nodes", nodes.size()},
          {"n_edges", edges.size()},
          {"note", "shape null: depends on the step's number of cache positions (see steps.jsonl pos_end)"},
          {"nodes", nodes},
          {"edges", edges}};
}

void Tracer::on_graph_ready(const Graph& g, const AllocPlan& plan) {
  graph_ = &g;
  plan_ = &plan;
  const size_t n = g.nodes().size();
  spans_.resize(n_threads_);
  for (auto& s : spans_) s.assign(n, Span{});
  if (wants_node_done()) stats_.assign(n, trace::ValueStats{});
  if (options_.io) {
    io_slots_.resize(n_threads_);
    io_workers_.resize(n_threads_);
    for (auto& w : io_workers_) w.assign(n, trace::IoWorker{});
    io_ranges_.resize(n);
    for (auto& r : io_ranges_) r.clear();
  }
  if (prefetcher_) prefetcher_->on_graph_ready(g, step_);

  const std::string key = graph_key(g);
  auto it = graph_ids_.find(key);
  if (it == graph_ids_.end()) {
    const int id = static_cast<int>(graph_ids_.size());
    it = graph_ids_.emplace(key, id).first;
    dir_.write_json(fmt::format("graphs/graph-{:04}.json", id), graph_json(g), -1);
  }
  step_graph_.push_back(it->second);

  // Activation arena and scratch growth are buffer events too.
  for (const BufferInfo& b : g.buffers) {
    uint64_t& known = b.id == kArenaBuffer ? arena_bytes_ : b.id == kScratchBuffer ? scratch_bytes_ : static_bytes_;
    if ((b.id == kArenaBuffer || b.id == kScratchBuffer) && b.size > known) {
      buffer_events_.push_back({now_ns() - t0_, static_cast<uint32_t>(step_), 'a', b.pool, b.id, 0, b.size,
                                b.name + " (grow)", false});
      known = b.size;
    }
  }
}

void Tracer::on_span(int thread, int node, uint64_t start_ns, uint64_t end_ns) {
  spans_[thread][node] = {start_ns, end_ns};
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

void Tracer::write_step_ops(const StepOutcome& o) {
  const Graph& g = *graph_;
  trace::OpRecord& r = record_;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    r.step = static_cast<uint32_t>(o.step);
    r.node = static_cast<uint32_t>(i);
    r.phase = o.phase;
    r.op = n.op;
    r.layer = static_cast<int16_t>(n.layer);
    r.pos_begin = o.pos_begin;
    r.pos_end = o.pos_end;
    uint64_t start = UINT64_MAX, end = 0;
    int first_thread = -1, workers = 0;
    for (int t = 0; t < n_threads_; ++t) {
      const Span& s = spans_[t][i];
      if (s.start == 0 && s.end == 0) continue;
      if (first_thread < 0) first_thread = t;
      if (!op_is_view(n.op)) ++workers;
      start = std::min(start, s.start);
      end = std::max(end, s.end);
      if (!op_is_view(n.op))
        writer_.span({r.step, r.node, static_cast<uint16_t>(t), s.start - t0_, s.end - t0_});
    }
    r.thread = static_cast<uint16_t>(std::max(first_thread, 0));
    r.n_threads = static_cast<uint16_t>(workers);
    r.start_ns = start == UINT64_MAX ? 0 : start - t0_;
    r.end_ns = end == 0 ? r.start_ns : end - t0_;
    r.name = n.out->name;
    fill_tensor(r.out, *n.out);
    r.write = to_record(n.write);
    r.fused = n.fused;
    r.inputs.resize(n.src.size());
    for (size_t k = 0; k < n.src.size(); ++k) {
      fill_tensor(r.inputs[k], *n.src[k]);
      r.inputs[k].ranges.clear();
    }
    for (const ByteRange& br : n.reads) r.inputs[br.input].ranges.push_back(to_record(br));
    r.has_stats = !stats_.empty() && !op_is_view(n.op);
    if (r.has_stats) r.stats = stats_[i];
    writer_.op(r);
    if (options_.io && !io_ranges_[i].empty()) {
      trace::IoRecord& io = io_record_;
      io.step = r.step;
      io.node = r.node;
      io.page_bytes = static_cast<uint32_t>(page_bytes());
      io.ranges = io_ranges_[i];
      io.workers.clear();
      for (int t = 0; t < n_threads_; ++t)
        if (spans_[t][i].start || spans_[t][i].end) io.workers.push_back(io_workers_[t][i]);
      writer_.io(io);
    }
  }
  // Buffer timeline: allocations when their node starts, frees when it ends.
  uint64_t live = 0, peak = 0;
  int peak_node = -1;
  for (const AllocEvent& e : plan_->events) {
    const uint64_t start = spans_[0][e.node].start ? spans_[0][e.node].start - t0_ : step_start_;
    const uint64_t end = spans_[0][e.node].end ? spans_[0][e.node].end - t0_ : start;
    if (e.kind == AllocEvent::ALLOC) {
      live += e.bytes;
      if (live > peak) peak = live, peak_node = e.node;
    } else {
      live -= e.bytes;
    }
    buffer_events_.push_back({e.kind == AllocEvent::ALLOC ? start : end, static_cast<uint32_t>(o.step),
                              e.kind == AllocEvent::ALLOC ? 'a' : 'f', Pool::ACTIVATION, kArenaBuffer, e.offset,
                              e.bytes, e.tensor->name, e.reuse});
  }
  step_peaks_.push_back({{"step", o.step},
                         {"activation_peak_bytes", peak},
                         {"activation_peak_node", peak_node >= 0 ? g.nodes()[peak_node].out->name : ""},
                         {"arena_bytes", arena_bytes_},
                         {"scratch_bytes", scratch_bytes_},
                         {"static_bytes", static_bytes_},
                         {"total_peak_bytes", peak + scratch_bytes_ + static_bytes_}});
}

void Tracer::on_step_end(const StepOutcome& o) {
  write_step_ops(o);
  const Tokenizer& tok = *model_.tokenizer;

  // Logit landscape: top-k, top1-top2 gap, entropy of the full softmax.
  std::span<const float> logits = o.logits;
  const int k = std::min<int>(options_.logit_top_k, static_cast<int>(logits.size()));
  const LogitLandscape land = logit_landscape(logits, std::max(k, 2));
  json top = json::array();
  auto text_of = [&](int32_t id) { return id >= 0 && id < tok.n_vocab() ? tok.token_to_piece(id, true) : std::string(); };
  for (int i = 0; i < k; ++i) {
    const int32_t id = land.top[i];
    top.push_back({{"id", id}, {"text", text_of(id)}, {"logit", logits[id]}, {"prob", land.prob(logits[id])}});
  }
  const int32_t chosen = o.sampled.token;
  json step = {{"step", o.step},
               {"phase", phase_name(o.phase)},
               {"pos_begin", o.pos_begin},
               {"pos_end", o.pos_end},
               {"input_tokens", std::vector<int32_t>(o.input_tokens.begin(), o.input_tokens.end())},
               {"token", chosen >= 0 ? json(chosen) : json(nullptr)},
               {"token_text", chosen >= 0 ? json(text_of(chosen)) : json(nullptr)},
               {"probability", chosen >= 0 ? json(o.sampled.probability) : json(nullptr)},
               {"softmax_probability",
                chosen >= 0 ? json(land.prob(logits[chosen])) : json(nullptr)},
               {"end_of_generation", o.end_of_generation},
               {"top_k", top},
               {"top1_top2_gap", land.top.size() > 1 ? logits[land.top[0]] - logits[land.top[1]] : 0.0f},
               {"entropy", land.entropy},
               {"hidden_stats", readout_stats(o.hidden)},
               {"logits_stats", readout_stats(logits)},
               {"start_ns", o.start_ns - t0_},
               {"end_ns", o.end_ns - t0_},
               {"n_ops", graph_->nodes().size()},
               {"graph", step_graph_.back()}};
  // Token texts of random models may be invalid UTF-8: replaced, never an error.
  *steps_stream_ << step.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  steps_stream_->flush();
  writer_.step_end({static_cast<uint32_t>(o.step), o.phase, o.pos_begin, o.pos_end, step_start_, o.end_ns - t0_, chosen,
                    o.sampled.probability, true});
  writer_.flush();
  if (nonfinite_) fail("--check-finite: {}", *nonfinite_);
}

json Tracer::finish() {
  json index = json::array();
  for (size_t s = 0; s < step_graph_.size(); ++s) index.push_back({{"step", s}, {"graph", step_graph_[s]}});
  dir_.write_json("graphs/index.json", {{"graphs", graph_ids_.size()}, {"steps", index}});

  json events = json::array();
  for (const BufferEvent& e : buffer_events_)
    events.push_back({e.t_ns, e.step, std::string(1, e.kind), pool_name(e.pool), e.buffer_id, e.offset, e.bytes,
                      e.tensor, e.reuse});
  uint64_t peak = 0;
  for (const json& p : step_peaks_) peak = std::max<uint64_t>(peak, p["total_peak_bytes"].get<uint64_t>());
  dir_.write_json("buffers.json",
                  {{"format", "tensortrace.buffers"},
                   {"version", 1},
                   {"columns", {"t_ns", "step", "kind", "pool", "buffer_id", "offset", "bytes", "tensor", "reuse"}},
                   {"events", events},
                   {"steps", step_peaks_},
                   {"peak_bytes", peak}},
                  -1);
  writer_.flush();
  return {{"ops", writer_.op_count()},
          {"spans", writer_.span_count()},
          {"steps", step_graph_.size()},
          {"graphs", graph_ids_.size()},
          {"buffer_events", buffer_events_.size()},
          {"trace_bytes", writer_.bytes_written()}};
}

}  // namespace tt
