#include "exec/executor.h"

#include <algorithm>
#include <chrono>

#include "exec/thread_pool.h"
#include "graph/builder.h"
#include "graph/kernels.h"

namespace tt {

size_t max_scratch_bytes(const Graph& g) {
  size_t m = 0;
  for (const Node& n : g.nodes()) m = std::max(m, scratch_bytes(n));
  return m;
}

void Executor::plan(const Graph& g) {
  const std::vector<Node>& nodes = g.nodes();
  const bool threads = pool_.size() > 1;  // one thread: no splits, no barriers at all
  plan_.assign(nodes.size(), 0);
  size_t thread_bytes = 0;
  // A node is split when its work pays for the split; a barrier follows a node when a thread other than the one
  // that ran it may read its output next: after a split node, and after a one-thread node followed by a split one.
  // Runs of one-thread nodes go back to back on thread 0.
  int last = -1;  // the previous executed node
  for (size_t i = 0; i < nodes.size(); ++i) {
    thread_bytes = std::max(thread_bytes, thread_scratch_bytes(nodes[i]));
    if (residency_ && !op_is_view(nodes[i].op))
      for (const Tensor* s : nodes[i].src)
        if (s->storage().pool == Pool::MODEL_FILE) plan_[i] |= kResident;
    if (!threads || op_is_view(nodes[i].op)) continue;
    if (node_work(nodes[i]) >= min_parallel_work_) {
      plan_[i] |= kSplit | kBarrierAfter;
      if (last >= 0) plan_[last] |= kBarrierAfter;
    }
    last = static_cast<int>(i);
  }
  read_ahead_.assign(nodes.size(), -1);
  int next_split = -1;
  for (size_t i = nodes.size(); i-- > 0;) {
    if (plan_[i] & kBarrierAfter) read_ahead_[i] = next_split;
    if (plan_[i] & kSplit)
      next_split = nodes[i].src[0] && nodes[i].src[0]->storage().pool == Pool::MODEL_FILE ? static_cast<int>(i) : -1;
  }
  thread_scratch_stride_ = (thread_bytes + 63) / 64 * 64;  // a cache line apart: no false sharing
  thread_scratch_.reserve(thread_scratch_stride_ * static_cast<size_t>(pool_.size()));
}

// The most of a product's first chunk a thread waiting before it reads ahead: well within a core's L2 (1 MiB on
// Zen 4, 512 KiB on Zen 3) beside the activations.
constexpr size_t kReadAheadBytes = 128 * 1024;

void Executor::run(Graph& g, uint8_t* scratch, ExecObserver* observer) {
  std::vector<Node>& nodes = g.nodes();
  const int nth = pool_.size();
#if !TT_TRACE_HOOKS
  observer = nullptr;
#endif
  const bool node_done = observer && observer->wants_node_done();
  const bool node_begin = observer && observer->wants_node_begin();
  // Off where each node's own reads are what is studied (I/O tracing, prefetching) and under residency_, whose
  // weights may not be resident before acquire().
  const bool read_ahead = !node_begin && !residency_;
  plan(g);
  if (residency_) residency_->check(g);
  chunk_counters_[0].store(0, std::memory_order_relaxed);
  chunk_counters_[1].store(0, std::memory_order_relaxed);
  auto job = [&](int ith) {
    WorkerSpan* spans = observer ? observer->span_slots(ith) : nullptr;
    int64_t executed = 0;                // split nodes run so far: the same count on every thread
    const Node* scratch_user = nullptr;  // the last node that wrote scratch
    // One counter read a node: a span starts where the thread's previous one ended (the loop between them is a few
    // instructions), unless the thread has waited or called out since (tick_fresh false), when it is read again.
    [[maybe_unused]] uint64_t last_tick = 0;
    bool tick_fresh = false;
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      Node& n = nodes[i];
      if (op_is_view(n.op)) {
#if TT_TRACE_HOOKS
        if (spans && ith == 0) {
          if (!tick_fresh) last_tick = tick_count(), tick_fresh = true;
          spans[i] = {last_tick, last_tick};
        }
#endif
        continue;
      }
      const bool split = plan_[i] & kSplit, barrier_after = plan_[i] & kBarrierAfter, resident = plan_[i] & kResident;
      // Its inputs are complete here (a barrier follows every node another thread may read next); the other
      // threads' kernels do not read `reads`, and a split node's observer hooks come after this.
      if (ith == 0 && has_routed_reads(n)) resolve_routed_reads(n);
      const bool input_converted = scratch_user && shares_converted_input(*scratch_user, n);
      if (scratch_bytes(n) > 0) scratch_user = &n;  // on every thread, whether it runs the node or not
      if (!split && ith != 0) {
        if (spans) spans[i] = {};  // no share (the slot may hold a span of a step that split this node)
      } else {
        ComputeContext ctx{split ? ith : 0, split ? nth : 1, &barrier_, scratch,
                           thread_scratch_.data() + static_cast<size_t>(ith) * thread_scratch_stride_};
        ctx.chunk_counter = split ? &chunk_counters_[executed % 2] : nullptr;
        ctx.input_converted = input_converted;
        ctx.llamacpp_build = g.llamacpp_build;
        if (resident && ith == 0) {
          residency_->acquire(i, n);
          tick_fresh = false;
        }
#if TT_TRACE_HOOKS
        if (node_begin) {
          if (ith == 0) observer->on_node_begin(i, n);
          if (split) pool_.barrier();
          observer->on_worker_begin(ith, i);
          tick_fresh = false;
        } else if (resident && split) {  // the others wait for the weights
          pool_.barrier();
          tick_fresh = false;
        }
        const uint64_t t0 = !spans ? 0 : tick_fresh ? last_tick : tick_count();
        compute_node(n, ctx);
        if (spans) {
          last_tick = tick_count(), tick_fresh = true;
          spans[i] = {t0, last_tick};
        }
        if (node_begin) {
          observer->on_worker_end(ith, i);
          tick_fresh = false;
        }
#else
        if (resident && split) pool_.barrier();
        compute_node(n, ctx);
#endif
      }
      if (split) {
        // The other counter's last users finished before this node began: ready it for the next split node.
        if (ith == 0) chunk_counters_[(executed + 1) % 2].store(0, std::memory_order_relaxed);
        ++executed;
      }
      if (barrier_after) {
        const int ahead = read_ahead ? read_ahead_[i] : -1;
        pool_.barrier([&] {
          return ahead < 0 ? std::span<const uint8_t>{} : first_weight_bytes(nodes[ahead], ith, nth, kReadAheadBytes);
        });
        tick_fresh = false;
      }
      if (node_done) {
        if (ith == 0) observer->on_node_done(i, n);
        if (barrier_after) pool_.barrier();
        tick_fresh = false;
      }
      // Every thread is done with the node: after its barrier, or it ran on thread 0 alone.
      if (resident && ith == 0) residency_->release(i, n);
    }
  };
  // An error on any thread (a node's weights that cannot be made resident, a kernel's check, the observer) ends
  // the job on every thread and is rethrown here (ThreadPool::run).
  pool_.run(job);
}

}  // namespace tt
