// Places a step's intermediate tensors in the activation arena, ggml-alloc style: a tensor gets space when the
// node computing it runs and gives it back after its last reader, first fit over the free blocks, so memory is
// reused within the step. The plan is an event list the tracer records as the buffer timeline.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace tt {

struct AllocEvent {
  enum Kind : uint8_t { ALLOC, FREE };
  Kind kind;
  int node;  // index of the node at which it happens (ALLOC before it runs, FREE after)
  const Tensor* tensor;
  uint64_t offset;
  uint64_t bytes;
  bool reuse;  // ALLOC into bytes an earlier tensor of this step used
};

struct AllocPlan {
  uint64_t arena_bytes = 0;  // high-water mark of the arena
  std::vector<AllocEvent> events;
};

// Plans ACTIVATION tensors (views excluded: they share their storage). `keep` tensors (outputs the host reads after
// the step) get bytes no other tensor of the step uses, so they keep their values until the nodes computing them
// run in the next step. Sets each tensor's offset; data pointers are set by bind_activation_data.
AllocPlan plan_activations(Graph& g, const std::vector<const Tensor*>& keep, uint64_t alignment = 64);

// Points every ACTIVATION tensor (and every view) at its bytes in `arena`.
void bind_activation_data(Graph& g, uint8_t* arena, int arena_buffer_id);

}  // namespace tt
