#include "tracer/tracer.h"

#include <pthread.h>
#include <sched.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "model/forward.h"

namespace tt {

nlohmann::json TraceOptions::to_json() const {
  return {{"values", values}, {"check_finite", check_finite}, {"logit_top_k", logit_top_k}, {"io", io}};
}

namespace {

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

Tracer::Tracer(RunDirWriter& dir, const Model& model, TraceOptions options, const ThreadPool& pool,
               uint64_t run_start_ns)
    : dir_(dir),
      model_(model),
      options_(options),
      n_threads_(pool.size()),
      t0_(run_start_ns),
      catalog_(dir),
      io_(model.file->bytes().data(), options.io),
      records_(dir.path("trace.bin"), run_start_ns),
      lines_(dir.path("steps.jsonl"), *model.tokenizer, options.logit_top_k),
      buffers_(dir, run_start_ns) {
  if (options_.logit_top_k < 1) fail("--logit-top-k must be at least 1, got {}", options_.logit_top_k);
  for (size_t i = 0; i < kQueueSteps; ++i) {
    captures_.push_back(std::make_unique<StepCapture>());
    free_.push_back(captures_.back().get());
  }
  ready_.reserve(kQueueSteps);
  ticks0_ = tick_count(), ns0_ = now_ns();
  last_flush_ns_ = ns0_;
  writer_ = std::thread([this] { writer_loop(); });
  // The writer runs only on a core the engine leaves idle: taking one from a worker mid-step would hold the other
  // workers at the next barrier. Behind by kQueueSteps, it gets the run's thread's core while that waits.
  const sched_param idle{};
  if (const int e = pthread_setschedparam(writer_.native_handle(), SCHED_IDLE, &idle); e != 0) {
    stop_writer();
    fail("cannot give the tracer's writer thread idle priority: {}", std::strerror(e));
  }
}

Tracer::~Tracer() { stop_writer(); }

uint64_t Tracer::ticks_to_ns(uint64_t ticks) const {
  const uint64_t run_ticks = std::max<uint64_t>(1, tick_count() - ticks0_), run_ns = now_ns() - ns0_;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * run_ns) / run_ticks);
}

void Tracer::record_static_buffer(const std::string& name, Pool pool, int buffer_id, uint64_t bytes) {
  buffer_events_.push_back({0, 0, pool, buffer_id, bytes, name});
  static_bytes_ += bytes;
}

void Tracer::on_step_begin(int32_t step, Phase phase, int32_t pos_begin, int32_t pos_end) {
  SelfTimer timer{*this};
  phase_ = phase;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !free_.empty() || writer_failure_; });
    if (writer_failure_) {
      lock.unlock();
      rethrow_writer_failure();
    }
    capture_ = free_.back();
    free_.pop_back();
  }
  capture_->marker = {static_cast<uint32_t>(step), phase, pos_begin, pos_end, now_ns() - t0_, 0, -1, 0, false};
}

void Tracer::on_graph_ready(const Graph& g, const AllocPlan& plan, std::span<const float> /*logits*/) {
  SelfTimer timer{*this};
  StepCapture& c = *capture_;
  const GraphSnapshot& snapshot = catalog_.on_graph(g, plan);
  const size_t n = g.nodes().size();
  // The executor writes every slot of a graph each step but views' on threads other than 0, which stay {0, 0}.
  if (c.graph != &snapshot || c.n_threads != n_threads_) c.spans.assign(static_cast<size_t>(n_threads_) * n, {});
  c.graph = &snapshot;
  c.n_threads = n_threads_;
  c.placements.resize(snapshot.variable.size());
  for (size_t j = 0; j < snapshot.variable.size(); ++j)
    fill_placement(c.placements[j], g.nodes()[snapshot.variable[j]]);
  if (wants_node_done()) c.stats.assign(n, trace::ValueStats{});
  io_.on_graph_ready(g, static_cast<int32_t>(c.marker.step), n_threads_, c);
  // Activation arena and scratch growth are buffer events too.
  for (const BufferInfo& b : g.buffers) {
    if (b.id != kArenaBuffer && b.id != kScratchBuffer) continue;
    uint64_t& known = b.id == kArenaBuffer ? arena_bytes_ : scratch_bytes_;
    if (b.size > known) {
      buffer_events_.push_back({now_ns() - t0_, c.marker.step, b.pool, b.id, b.size, b.name + " (grow)"});
      known = b.size;
    }
  }
  c.ns_before = now_ns();
  c.ticks_before = tick_count();
}

WorkerSpan* Tracer::span_slots(int thread) {
  return capture_->spans.data() + static_cast<size_t>(thread) * capture_->graph->records.size();
}

void Tracer::on_node_done(int node, const Node& n) {
  if (op_is_view(n.op)) return;
  std::span<const float> v;
  output_values(n, values_, v);
  trace::ValueStats s;
  double sum = 0;
  float mn = INFINITY, mx = -INFINITY;
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = v[i];
    if (std::isnan(x)) {
      if (!s.nan_count++ && options_.check_finite && !nonfinite_)
        nonfinite_ = fmt::format("NaN in the output of {} '{}' (step {}, layer {}, element {})", op_name(n.op),
                                 n.out->name, capture_->marker.step, n.layer, i);
      continue;
    }
    if (std::isinf(x)) {
      if (!s.inf_count++ && options_.check_finite && !nonfinite_)
        nonfinite_ = fmt::format("Inf in the output of {} '{}' (step {}, layer {}, element {})", op_name(n.op),
                                 n.out->name, capture_->marker.step, n.layer, i);
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
  capture_->stats[node] = s;
}

void Tracer::on_step_end(const StepOutcome& o) {
  SelfTimer timer{*this};
  StepCapture& c = *capture_;
  c.ticks_after = tick_count(), c.ns_after = now_ns();
  if (o.logits.empty()) fail("internal error: step {} has no logits to trace", o.step);
  c.marker.end_ns = o.end_ns - t0_;
  c.marker.token = o.sampled.token, c.marker.probability = o.sampled.probability;
  c.marker.ended = true;
  c.input_tokens.assign(o.input_tokens.begin(), o.input_tokens.end());
  c.sampled = o.sampled;
  c.end_of_generation = o.end_of_generation;
  c.eval_start_ns = o.start_ns - t0_, c.eval_end_ns = o.end_ns - t0_;
  c.logits.assign(o.logits.begin(), o.logits.end());
  c.hidden.assign(o.hidden.begin(), o.hidden.end());
  c.buffer_events.swap(buffer_events_);
  buffer_events_.clear();
  c.arena_bytes = arena_bytes_, c.scratch_bytes = scratch_bytes_, c.static_bytes = static_bytes_;
  {
    std::lock_guard lock(mutex_);
    ready_.push_back(capture_);
  }
  changed_.notify_all();
  capture_ = nullptr;
  ++steps_;
  if (nonfinite_) fail("--check-finite: {}", *nonfinite_);
}

void Tracer::writer_loop() {
  while (true) {
    StepCapture* c;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return !ready_.empty() || closing_; });
      if (ready_.empty()) return;
      c = ready_.front();
      ready_.erase(ready_.begin());
      ++writing_;
    }
    std::exception_ptr failure;
    if (!writer_failure_) {  // after a failure, captures go back unwritten (the run's thread throws it)
      try {
        write_step(*c);
      } catch (...) {
        failure = std::current_exception();
      }
    }
    {
      std::lock_guard lock(mutex_);
      if (failure && !writer_failure_) writer_failure_ = failure;
      free_.push_back(c);
      --writing_;
    }
    changed_.notify_all();
  }
}

void Tracer::write_step(StepCapture& c) {
  records_.write(c);  // first: it turns the spans into ns
  lines_.write(c);
  buffers_.write(c);
  // Each file is written when its buffer passes its size, and all at least every kFlushIntervalNs (what a killed
  // run can lose).
  const uint64_t now = now_ns();
  const bool interval = now - last_flush_ns_ >= kFlushIntervalNs;
  if (interval || records_.wants_flush()) records_.flush();
  if (interval || lines_.wants_flush()) lines_.flush();
  if (interval || buffers_.wants_flush()) buffers_.flush();
  if (interval) last_flush_ns_ = now;
}

void Tracer::rethrow_writer_failure() {
  std::exception_ptr failure;
  {
    std::lock_guard lock(mutex_);
    failure = writer_failure_;
  }
  if (failure) std::rethrow_exception(failure);
}

void Tracer::drain() {
  SelfTimer timer{*this};
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return (ready_.empty() && writing_ == 0) || writer_failure_; });
  }
  rethrow_writer_failure();
}

void Tracer::stop_writer() {
  if (!writer_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  changed_.notify_all();
  writer_.join();
}

nlohmann::json Tracer::finish() {
  drain();
  stop_writer();
  rethrow_writer_failure();
  records_.flush();
  lines_.flush();
  catalog_.finish();
  const size_t buffer_events = buffers_.finish();
  const trace::TraceWriter& file = records_.file();
  return {{"ops", file.op_count()},    {"spans", file.span_count()},     {"steps", catalog_.steps()},
          {"graphs", catalog_.size()}, {"buffer_events", buffer_events}, {"trace_bytes", file.bytes_written()},
          {"tracer_ns", self_ns()}};
}

}  // namespace tt
