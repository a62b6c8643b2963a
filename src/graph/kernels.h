// The CPU kernels of the graph's ops. Every thread of the pool calls compute_node for every node with its
// index ith of nth; each kernel does its share and may synchronise with ctx.barrier().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "graph/graph.h"

namespace tt {

// Where the threads sharing a node wait for each other (the executor's thread pool implements it).
class Barrier {
 public:
  virtual void wait() = 0;

 protected:
  ~Barrier() = default;
};

struct ComputeContext {
  int ith = 0;
  int nth = 1;
  Barrier* threads = nullptr;  // for barrier(); null when single-threaded
  uint8_t* scratch = nullptr;  // shared work memory, at least scratch_bytes(node)
  // This thread's own work memory, at least thread_scratch_bytes(node), 64-byte aligned (kernels must not allocate).
  uint8_t* thread_scratch = nullptr;
  // Shared by the node's threads, zero when the node starts: next_chunk() hands out 0, 1, 2, ... across threads,
  // so a thread slowed down (by the machine or its share) takes fewer chunks. Null: chunks split evenly.
  std::atomic<int64_t>* chunk_counter = nullptr;
  // MUL_MAT: scratch already holds this node's activations in its vec_dot_type, converted by the previous scratch
  // user (see shares_converted_input), as for the Q, K and V products of one input.
  bool input_converted = false;
  LlamaCppBuild llamacpp_build = LlamaCppBuild::kIntelAvx512Fp16;  // the graph's (Graph::llamacpp_build)
  void barrier() const;
  int64_t next_chunk() const;
};

// Work memory a node needs (e.g. its activations converted to the weight's vec_dot_type).
size_t scratch_bytes(const Node& node);

// Work memory each thread running a share of a node needs for itself (e.g. rope's angle table).
size_t thread_scratch_bytes(const Node& node);

// Whether `node`, run right after `previous` as the next user of scratch, finds its converted activations there:
// both are products of the same input tensor whose weights take the same activation type.
bool shares_converted_input(const Node& previous, const Node& node);

void compute_node(const Node& node, const ComputeContext& ctx);

// The weight bytes thread ith of nth streams first in a split MUL_MAT (its first chunk of output rows, which it takes
// without a claim), at most max_bytes of them; empty for other ops. A thread waiting at the barrier before the node
// can read them ahead (Executor::run).
std::span<const uint8_t> first_weight_bytes(const Node& node, int ith, int nth, size_t max_bytes);

// A node's work in byte-equivalents: the bytes it reads and writes, plus its multiply-adds for products and
// attention (a thread streams a byte from L2 in about the time it does a multiply-add of these kernels).
uint64_t node_work(const Node& node);

// Below this much work a node runs on one thread: splitting it saves less than the barrier after it and the
// other core's cache lines cost (a barrier costs hundreds of ns on the 2-core test VM; docs/performance.md).
constexpr uint64_t kMinParallelWork = 64 * 1024;

}  // namespace tt
