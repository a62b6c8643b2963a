// The compute graph of one step: nodes in execution order, each an op with named inputs and output, the layer it
// belongs to, and the exact byte ranges it reads (computed and bounds-checked when the node is built). The
// executor runs these nodes; the tracer records exactly these nodes.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/ops.h"
#include "graph/tensor.h"
#include "quant/quant.h"

namespace tt {

// Bytes an op reads from one input, attributed to where they live.
struct ByteRange {
  int input = 0;  // index into Node::src
  Pool pool = Pool::MODEL_FILE;
  int buffer_id = -1;
  uint64_t offset = 0;  // MODEL_FILE: absolute file offset; otherwise offset in the buffer
  uint64_t length = 0;
  int32_t pos_begin = -1, pos_end = -1;  // KV_CACHE: token positions [begin, end)
};

struct RopeParams {
  int n_dims = 0;     // rotated dimensions per head
  bool neox = false;  // NeoX mode rotates (i, i + n_dims/2); normal mode rotates (2i, 2i+1)
  float base = 10000.0f;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // optional per-pair divisors (rope_freqs.weight), n_dims/2 values
};

struct OpParams {
  float eps = 0.0f;    // RMS_NORM
  RopeParams rope;     // ROPE
  int32_t pos0 = 0;    // ROPE, SET_ROWS, FLASH_ATTN_EXT: position of the first token of the step
  int32_t n_kv = 0;    // FLASH_ATTN_EXT: positions [0, n_kv) of the cache are attended (causal within)
  float scale = 1.0f;  // FLASH_ATTN_EXT
  // FLASH_ATTN_EXT, one-token graphs: llama.cpp's split of the cache into chunks of kv_chunk positions (0: none this
  // step), at most kv_chunks_max of them (its thread count; the graph's room for their partial results).
  int32_t kv_chunk = 0, kv_chunks_max = 0;
  int32_t tiled_tokens = 0;    // FLASH_ATTN_EXT: the step's first tokens that llama.cpp's tiled path serves
  std::vector<int32_t> rows;   // GET_ROWS: row ids (known when the graph is built); empty: per token, src[1]'s ids
  int32_t k = 0;               // TOP_K: values kept per row
  float lo = 0.0f, hi = 0.0f;  // CLAMP
};

struct Node {
  OpKind op = OpKind::kCount;
  Tensor* out = nullptr;
  std::vector<const Tensor*> src;
  int layer = -1;
  OpParams params;
  // Exact bytes read, per input. MUL_MAT_ID's weight ranges depend on the ids it is given, computed in the same
  // step: they are filled in by resolve_routed_reads (src/graph/builder.h) once the ids are known, just before
  // the node runs (the executor calls it), so an observer sees them from on_node_begin on.
  std::vector<ByteRange> reads;
  ByteRange write;  // bytes written (for SET_ROWS: the cache rows)
};

// Sizes of runtime buffers, so every range is checked against its buffer when the graph is built.
struct BufferInfo {
  int id = -1;
  Pool pool = Pool::ACTIVATION;
  std::string name;
  uint8_t* data = nullptr;
  uint64_t size = 0;
};

class Graph {
 public:
  // Tensors live as long as the graph; pointers stay valid.
  Tensor* new_tensor(std::string name, GgmlType type, std::initializer_list<int64_t> ne, int layer,
                     Pool pool = Pool::ACTIVATION);
  Node& add_node(OpKind op, Tensor* out, std::initializer_list<const Tensor*> src, int layer);

  // Room for n nodes (the engine passes the previous step's count: steps rebuild the same graph).
  void reserve_nodes(size_t n) { nodes_.reserve(n); }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::deque<Tensor>& tensors() const { return tensors_; }
  std::deque<Tensor>& tensors() { return tensors_; }

  // Runtime buffers the graph refers to (KV layers, inputs, the activation arena), by id.
  std::vector<BufferInfo> buffers;
  // Set by whoever builds the graph, new for every build: a graph seen again with the same id has the same
  // nodes, names and shapes, apart from positions and attended cache lengths (which it may have been updated to).
  uint64_t structure_id = 0;
  // Whose float order the kernels reproduce where llama.cpp's builds differ by CPU kind (quant.h).
  LlamaCppBuild llamacpp_build = LlamaCppBuild::kIntelAvx512Fp16;
  const BufferInfo& buffer(int id) const;

 private:
  std::deque<Tensor> tensors_;
  std::vector<Node> nodes_;
};

}  // namespace tt
