#include "tracer/op_records.h"

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"

namespace tt {

namespace {

trace::RangeRecord to_record(const ByteRange& r) {
  return {r.pool, r.buffer_id, r.offset, r.length, r.pos_begin, r.pos_end};
}

// Everything but the name (interned once per graph, see GraphCatalog).
void fill_tensor(trace::TensorRecord& t, const Tensor& src) {
  t.type = src.type;
  for (int d = 0; d < 4; ++d) t.ne[d] = src.ne[d];
  const Tensor& s = src.storage();
  t.pool = s.pool;
  t.buffer_id = s.buffer_id;
  t.offset = s.offset + src.view_offset;
  t.bytes = src.n_bytes();
}

}  // namespace

unsigned __int128 tick_scale(uint64_t ticks, uint64_t ns) {
  return (static_cast<unsigned __int128>(ns) << 32) / std::max<uint64_t>(1, ticks);
}

OpRecords::OpRecords(trace::TraceWriter& writer, int n_threads, uint64_t run_start_ns)
    : writer_(writer), n_threads_(n_threads), t0_(run_start_ns) {
  spans_.resize(static_cast<size_t>(n_threads));
}

void OpRecords::on_step_begin(uint32_t step, Phase phase, int32_t pos_begin, int32_t pos_end, uint64_t start_ns) {
  marker_ = {step, phase, pos_begin, pos_end, start_ns, 0, -1, 0, false};
}

void OpRecords::on_graph_ready(const Graph& g, const GraphEntry& graph, bool same_as_previous, bool values) {
  const size_t n = g.nodes().size();
  if (!same_as_previous)
    for (auto& s : spans_) s.assign(n, WorkerSpan{});
  graph_ = &g;
  entry_ = &graph;
  ops_step_ = !values && same_as_previous;
  if (fields_.size() < n) fields_.resize(n);
  choices_.assign(n, Choice::ADVANCE);  // the repeatable nodes' (not compared)
  change_spans_.resize(n);
  changes_.clear();
  // The compared nodes' placement is final here (the engine has just patched and resolved it) and still in the
  // caches; at the step's end, after the weights have streamed through them, the same comparison costs about twice
  // as much (docs/performance.md). Routed nodes get their reads during the step: compared at its end.
  if (ops_step_)
    for (const uint32_t i : entry_->compared) choose_node(i);
  ns_before_ = now_ns();
  ticks_before_ = tick_count();
}

trace::OpRecord& OpRecords::place(size_t i) {
  const Node& n = graph_->nodes()[i];
  if (placed_.size() <= n.src.size()) placed_.resize(n.src.size() + 1);
  trace::OpRecord& r = placed_[n.src.size()];
  fill_tensor(r.out, *n.out);
  r.write = to_record(n.write);
  r.inputs.resize(n.src.size());
  for (size_t k = 0; k < n.src.size(); ++k) {
    fill_tensor(r.inputs[k], *n.src[k]);
    r.inputs[k].ranges.clear();
  }
  for (const ByteRange& br : n.reads) r.inputs[br.input].ranges.push_back(to_record(br));
  return r;
}

OpRecords::Choice OpRecords::choose(size_t i) {
  // (A repeatable node is not compared: on the same graph as the previous step, a node touching only
  // step-independent bytes has the same placement again, and it never gets a stride.)
  NodeFields& f = fields_[i];
  const trace::OpRecord& r = place(i);
  trace::placement_layout(r, layout_scratch_);
  if (layout_scratch_ != f.layout) return Choice::FULL;  // the same layout: as many fields as f.last
  trace::placement_fields(r, fields_scratch_);
  // Differences mod 2^64, as the reader adds them. The common case, an advance by the stride: the previous record
  // moved by its few nonzero stride fields, then one comparison of the whole.
  std::vector<uint64_t>& last = f.last;
  for (const auto& [k, d] : f.stride) last[k] += d;
  if (fields_scratch_ == last) return Choice::ADVANCE;
  for (const auto& [k, d] : f.stride) last[k] -= d;
  const size_t first_change = changes_.size();
  for (size_t k = 0; k < last.size(); ++k)
    if (const uint64_t d = fields_scratch_[k] - last[k]) changes_.emplace_back(static_cast<uint32_t>(k), d);
  last.swap(fields_scratch_);
  // The changes become the stride (none: the node stopped moving).
  f.stride.assign(changes_.begin() + static_cast<ptrdiff_t>(first_change), changes_.end());
  return Choice::MOVE;
}

void OpRecords::choose_node(uint32_t i) {
  const auto first = static_cast<uint32_t>(changes_.size());
  choices_[i] = choose(i);
  change_spans_[i] = {first, static_cast<uint32_t>(changes_.size())};
}

void OpRecords::spans_to_ns() {
  // ns = ns_before + (ticks - ticks_before) * scale / 2^32, clamped to the step (counter reads on other cores may
  // differ by a few ticks).
  const uint64_t ticks_after = tick_count(), ns_after = now_ns();
  const unsigned __int128 scale = tick_scale(ticks_after - ticks_before_, ns_after - ns_before_);
  for (std::vector<WorkerSpan>& slots : spans_)
    for (WorkerSpan& s : slots) {
      if (s.start == 0 && s.end == 0) continue;
      auto to_ns = [&](uint64_t t) {
        const uint64_t d = std::clamp(t, ticks_before_, ticks_after) - ticks_before_;
        return ns_before_ + static_cast<uint64_t>((d * scale) >> 32);
      };
      // A share ends after it starts: its two reads are on one thread (a migration between cores whose counters
      // differ could read them in the other order).
      s = {to_ns(s.start), to_ns(std::max(s.start, s.end))};
    }
}

void OpRecords::on_step_end(const StepOutcome& o, const ValueCheck& values, IoProbe* io, uint64_t now_ns) {
  spans_to_ns();
  const size_t n = choices_.size();
  if (ops_step_)
    for (const uint32_t i : entry_->routed) choose_node(i);
  writer_.step_begin(marker_);
  size_t run_begin = 0;  // first node of the pending OPS run
  for (size_t i = 0; i < n; ++i)
    if (!ops_step_ || choices_[i] == Choice::FULL) {
      write_ops_run(run_begin, i);
      write_op(i, values);
      run_begin = i + 1;
    }
  write_ops_run(run_begin, n);
  if (io)
    for (size_t i = 0; i < n; ++i) {
      const auto* r = io->record(marker_.step, static_cast<uint32_t>(i), [&](int t) {
        const WorkerSpan& s = spans_[static_cast<size_t>(t)][i];
        return s.start || s.end;
      });
      if (r) writer_.io(*r);
    }
  write_routing(o);
  trace::StepMarker end = marker_;
  end.end_ns = o.end_ns - t0_;
  end.token = o.sampled.token, end.probability = o.sampled.probability;
  end.ended = true;
  writer_.step_end(end);
  if (flush_.due(now_ns, writer_.bytes_buffered())) writer_.flush();
}

int OpRecords::put_times(size_t i, uint64_t* out) const {
  int shares = 0;
  for (int t = 0; t < n_threads_; ++t, out += 2) {
    const WorkerSpan& s = spans_[static_cast<size_t>(t)][i];
    const bool share = (s.start | s.end) != 0;
    out[0] = share ? s.start - t0_ : trace::TraceWriter::kNoShareNs;
    out[1] = share ? s.end - t0_ : trace::TraceWriter::kNoShareNs;
    shares += share;
  }
  return shares;
}

void OpRecords::write_op(size_t i, const ValueCheck& values) {
  const Node& n = graph_->nodes()[i];
  trace::OpRecord& r = place(i);
  r.step = marker_.step;
  r.node = static_cast<uint32_t>(i);
  r.op = n.op;
  r.layer = static_cast<int16_t>(n.layer);
  const trace::ValueStats* stats = values.stats(i);
  r.has_stats = stats != nullptr && !op_is_view(n.op);
  if (r.has_stats) r.stats = *stats;
  run_times_.resize(2 * static_cast<size_t>(n_threads_));
  put_times(i, run_times_.data());
  writer_.op(r, &entry_->ids[entry_->node_offset[i]], run_times_);
  // The reader's state after an OP record: these fields, stride 0.
  NodeFields& f = fields_[i];
  trace::placement_layout(r, f.layout);
  trace::placement_fields(r, f.last);
  f.stride.clear();
}

void OpRecords::write_ops_run(size_t first, size_t end) {
  if (first == end) return;
  // Written through a pointer into a buffer kept at its size (a run of every node of a step, every step).
  const size_t per_node = 2 * static_cast<size_t>(n_threads_);
  run_times_.resize((end - first) * per_node);
  moved_.clear();
  uint64_t n_spans = 0;
  for (size_t i = first; i < end; ++i) {
    const int shares = put_times(i, run_times_.data() + (i - first) * per_node);
    if (!entry_->view[i]) n_spans += static_cast<uint64_t>(shares);
    if (choices_[i] == Choice::MOVE) {
      const auto [begin, stop] = change_spans_[i];
      moved_.push_back({static_cast<uint32_t>(i), std::span(changes_).subspan(begin, stop - begin)});
    }
  }
  writer_.ops({marker_.step, static_cast<uint32_t>(first), static_cast<uint32_t>(end - first),
               static_cast<uint16_t>(n_threads_)},
              run_times_, moved_, n_spans);
}

void OpRecords::write_routing(const StepOutcome& o) {
  const size_t k0 = o.routing.empty() ? 0 : static_cast<size_t>(o.routing.front().n_used());
  for (const LayerRouting& l : o.routing) {
    const int64_t k = l.n_used(), n = l.n_tokens();
    TT_CHECK(static_cast<size_t>(k) == k0 && k <= trace::kMaxRoutedExperts, "layer {} routes to {} experts a token",
             l.layer, k);
    const int32_t* experts = l.experts->as<const int32_t>();
    const float* weights = l.weights->as<const float>();
    for (int64_t t = 0; t < n; ++t) {
      predicted_scratch_.clear();
      if (l.predicted)
        for (int64_t slot = 0; slot < k; ++slot) predicted_scratch_.push_back(l.predicted_expert(t, slot));
      // Rows are the step's last n tokens (the last layer of a prompt routes only its last token).
      writer_.routing(marker_.step, static_cast<uint16_t>(l.layer), o.pos_end - static_cast<int32_t>(n - t),
                      std::span(experts + t * k, static_cast<size_t>(k)),
                      std::span(weights + t * k, static_cast<size_t>(k)), l.margin(t), predicted_scratch_);
    }
  }
}

}  // namespace tt
