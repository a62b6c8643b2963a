// A tensor as the graph sees it: shape, type and where its bytes live. Weights point into the memory-mapped
// model file (pool MODEL_FILE, offset = absolute file offset); runtime tensors live in runtime buffers (KV cache,
// activation arena, inputs). Tensors are contiguous but for expert slabs spaced apart (expert_stride); views share
// the bytes of the tensor they view.
#pragma once

#include <cstdint>
#include <string>

#include "core/ops.h"
#include "gguf/ggml_type.h"

namespace tt {

struct Tensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  int64_t ne[4] = {1, 1, 1, 1};  // ggml order: ne[0] is the row length
  Pool pool = Pool::ACTIVATION;
  int buffer_id = -1;               // runtime buffer holding it (-1 for MODEL_FILE)
  uint64_t offset = 0;              // MODEL_FILE: absolute file offset; else byte offset in the buffer
  uint8_t* data = nullptr;          // set when allocated (or mapped)
  int layer = -1;                   // -1: not in a layer
  const Tensor* view_of = nullptr;  // non-null: shares view_of's bytes (starting at view_offset)
  uint64_t view_offset = 0;
  int graph_index = -1;  // position in the graph that created it (-1: a model weight), for per-tensor tables
  // 3-D expert weights: bytes from one expert's slab to the next (0: contiguous, ne[1] rows). The weight store lays
  // each slab out page-aligned so it can be loaded and dropped alone (model/weight_store.h).
  uint64_t expert_stride = 0;
  // Weights in memory whose rows are stored in groups of 16 for the kernels (RowGroups, quant/quant.h): every 16
  // rows of each slab, from its start; the last ne[1] % 16 rows of a slab stay in file order.
  bool rows_grouped = false;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  uint64_t row_size() const { return row_bytes(type, ne[0]); }
  uint64_t n_bytes() const { return row_size() * n_rows(); }
  uint64_t slab_stride() const { return expert_stride ? expert_stride : row_size() * static_cast<uint64_t>(ne[1]); }
  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data);
  }
  // The tensor whose storage this one uses (itself unless a view).
  const Tensor& storage() const { return view_of ? view_of->storage() : *this; }
};

std::string shape_string(const Tensor& t);  // "[64, 5]" with trailing 1s dropped

}  // namespace tt
