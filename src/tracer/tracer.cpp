#include "tracer/tracer.h"

#include <algorithm>
#include <thread>

#include "model/model.h"

namespace tt {

nlohmann::json TraceOptions::to_json() const {
  return {{"values", values}, {"check_finite", check_finite}, {"logit_top_k", logit_top_k}, {"io", io}};
}

Tracer::Tracer(RunDirWriter& dir, const Model& model, TraceOptions options, ThreadPool& pool, uint64_t run_start_ns)
    : t0_(run_start_ns),
      pool_(pool),
      writer_(dir.path("trace.bin")),
      catalog_(dir, writer_),
      op_records_(writer_, pool.size(), run_start_ns),
      step_lines_(dir, *model.tokenizer, options.logit_top_k, run_start_ns),
      timeline_(dir, writer_, run_start_ns),
      values_(options.values, options.check_finite),
      io_(options.io ? std::make_unique<IoProbe>(model.file->bytes().data(), pool.size()) : nullptr) {
  ticks0_ = tick_count(), ns0_ = now_ns();
  // The line's share: first the outcome's vectors (the caller's until on_step_end returns), then the line.
  line_job_ = [this](int ith) {
    if (ith != (pool_.size() > 1 ? 1 : 0)) return;
    const uint64_t start = tick_count();
    Line& l = line_;
    std::copy(l.logits_from.begin(), l.logits_from.end(), l.logits.begin());
    std::copy(l.hidden_from.begin(), l.hidden_from.end(), l.hidden.begin());
    l.copied.store(true, std::memory_order_release);
    step_lines_.on_step_end(l.outcome, l.graph, l.n_ops, l.now_ns, l.weights ? &*l.weights : nullptr);
    const uint64_t ticks = tick_count() - start;
    line_ticks_ += ticks;
    if (l.outcome.phase == Phase::GENERATE) generate_line_ticks_ += ticks;
  };
}

Tracer::~Tracer() {
  try {
    pool_.wait();  // the last line may still be running on the pool
  } catch (...) {
  }
}

uint64_t Tracer::ticks_to_ns(uint64_t ticks) const {
  return static_cast<uint64_t>((ticks * tick_scale(tick_count() - ticks0_, now_ns() - ns0_)) >> 32);
}

void Tracer::on_step_begin(int32_t step, Phase phase, int32_t pos_begin, int32_t pos_end) {
  SelfTimer timer{*this};
  step_ = step;
  phase_ = phase;
  step_start_ = now_ns() - t0_;
  op_records_.on_step_begin(static_cast<uint32_t>(step), phase, pos_begin, pos_end, step_start_);
}

void Tracer::on_graph_ready(const Graph& g, const AllocPlan& plan) {
  SelfTimer timer{*this};
  graph_ = &g;
  entry_ = &catalog_.on_graph_ready(g, plan);
  values_.on_graph_ready(g.nodes().size(), step_);
  if (io_) io_->on_graph_ready(g.nodes().size());
  if (prefetcher_) prefetcher_->on_graph_ready(g, step_);
  timeline_.on_graph_ready(g, static_cast<uint32_t>(step_));
  // Last: it reads the clocks the step's spans are converted from.
  op_records_.on_graph_ready(g, *entry_, catalog_.same_as_previous(), values_.wanted());
}

void Tracer::on_node_begin(int node, const Node& n) {
  if (io_) io_->on_node_begin(node, n);
  if (prefetcher_) prefetcher_->on_node_begin(node);
}

void Tracer::on_worker_begin(int thread, int /*node*/) {
  if (io_) io_->on_worker_begin(thread);
}

void Tracer::on_worker_end(int thread, int node) {
  if (io_) io_->on_worker_end(thread, node);
}

void Tracer::on_step_end(const StepOutcome& o) {
  SelfTimer timer{*this};
  const uint64_t now = now_ns();
  // The line's inputs, for the pool's second thread (once the previous line is done); the records meanwhile on this
  // one.
  pool_.wait();
  Line& l = line_;
  l.outcome = o;
  l.inputs.assign(o.input_tokens.begin(), o.input_tokens.end());
  l.outcome.input_tokens = l.inputs;
  l.logits_from = o.logits, l.hidden_from = o.hidden;
  l.logits.resize(o.logits.size()), l.hidden.resize(o.hidden.size());  // no allocation after the first step
  l.outcome.logits = l.logits, l.outcome.hidden = l.hidden;
  l.weights.reset();
  if (weight_loads_) l.weights = weight_loads_->take_step();
  l.now_ns = now, l.graph = entry_->id, l.n_ops = graph_->nodes().size();
  l.copied.store(false, std::memory_order_relaxed);
  pool_.run_async(line_job_);
  op_records_.on_step_end(o, values_, io_.get(), now);
  timeline_.on_step_end(static_cast<uint32_t>(o.step), *entry_, step_start_, op_records_.thread0_ns(), now);
  if (weight_loads_) weight_loads_->write(writer_, static_cast<uint32_t>(o.step));
  while (!l.copied.load(std::memory_order_acquire)) std::this_thread::yield();
  values_.check();
}

nlohmann::json Tracer::finish() {
  pool_.wait();
  step_lines_.finish();
  const size_t graphs = catalog_.finish();
  const size_t buffer_events = timeline_.finish();
  op_records_.finish();
  return {{"ops", writer_.op_count()}, {"spans", writer_.span_count()},      {"steps", catalog_.steps()},
          {"graphs", graphs},          {"buffer_events", buffer_events},     {"trace_bytes", writer_.bytes_written()},
          {"tracer_ns", self_ns()},    {"line_ns", ticks_to_ns(line_ticks_)}};
}

}  // namespace tt
