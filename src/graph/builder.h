// Adds named ops to a graph, computing output shapes. Names follow llama.cpp ("attn_norm-3"), given by the
// caller where the op is used, so the forward pass reads like the model's paper: one line per op.
#pragma once

#include <initializer_list>
#include <span>
#include <string>

#include "graph/graph.h"

namespace tt {

class GraphBuilder {
 public:
  explicit GraphBuilder(Graph& g) : g_(g) {}

  // Which layer the following ops belong to (-1: none) and the suffix of their names ("-3").
  void set_layer(int layer) { layer_ = layer; }
  int layer() const { return layer_; }
  std::string name(const std::string& base) const;

  Tensor* input(const std::string& name, GgmlType type, std::initializer_list<int64_t> ne, int buffer_id, uint8_t* data,
                uint64_t offset);
  Tensor* get_rows(const Tensor* table, const Tensor* ids, std::vector<int32_t> rows, const std::string& name);
  Tensor* rms_norm(const Tensor* x, float eps, const std::string& name);
  Tensor* mul(const Tensor* a, const Tensor* b, const std::string& name);
  Tensor* add(const Tensor* a, const Tensor* b, const std::string& name);
  Tensor* mul_mat(const Tensor* w, const Tensor* x, const std::string& name);
  Tensor* rope(const Tensor* x, const Tensor* positions, const RopeParams& p, int32_t pos0, const std::string& name);
  Tensor* swiglu(const Tensor* gate, const Tensor* up, const std::string& name);
  // Writes x's rows into `cache` at rows [pos0, pos0 + n); returns the written view of the cache.
  Tensor* set_rows(const Tensor* cache, const Tensor* x, int32_t pos0, const std::string& name);
  // split: llama.cpp's cache chunks for one-token steps; tiled_tokens: the step's first tokens that take llama.cpp's
  // tiled path (OpParams).
  struct KvSplit {
    int32_t chunk = 0, chunks_max = 0;
  };
  Tensor* flash_attn(const Tensor* q, const Tensor* k, const Tensor* v, int32_t pos0, int32_t n_kv, float scale,
                     KvSplit split, int32_t tiled_tokens, const std::string& name);
  // Mixture of experts (llama.cpp's build_moe_ffn).
  Tensor* soft_max(const Tensor* x, const std::string& name);
  Tensor* sigmoid(const Tensor* x, const std::string& name);
  // Per row of x: the indices of its k largest values, largest first (equal values: lower index first). I32 [k, ..].
  Tensor* top_k(const Tensor* x, int32_t k, const std::string& name);
  // Per token t: x[ids[s, t], t] for each slot s of ids [k, n_tokens]; x is [n, n_tokens]. Output [1, k, n_tokens].
  Tensor* get_rows_per_token(const Tensor* x, const Tensor* ids, const std::string& name);
  Tensor* sum_rows(const Tensor* x, const std::string& name);  // [1, rows]
  Tensor* clamp(const Tensor* x, float lo, float hi, const std::string& name);
  Tensor* div(const Tensor* a, const Tensor* b, const std::string& name);
  Tensor* scale(const Tensor* x, float s, const std::string& name);
  // out[:, s, t] = W[:, :, ids[s, t]] x[:, s % x_slots, t]: w [K, N, n_expert], x [K, 1 or k, n_tokens], ids
  // [k, n_tokens] (I32). Output [N, k, n_tokens]. Reads only the experts the ids name (resolve_routed_reads).
  Tensor* mul_mat_id(const Tensor* w, const Tensor* x, const Tensor* ids, const std::string& name);
  // The sum over slots of x [n, k, n_tokens] in slot order, ((x0 + x1) + x2) + ..., as llama.cpp's chain of ADDs
  // over views: one ADD node with one input. Output [n, n_tokens].
  Tensor* add_slots(const Tensor* x, const std::string& name);
  // Views: no computation, the output shares x's bytes.
  Tensor* reshape(const Tensor* x, std::initializer_list<int64_t> ne, const std::string& name);
  Tensor* view(const Tensor* x, std::initializer_list<int64_t> ne, const std::string& name);
  Tensor* permute(const Tensor* x, std::initializer_list<int64_t> ne, const std::string& name);

 private:
  Tensor* view_node(OpKind op, const Tensor* x, std::initializer_list<int64_t> ne, const std::string& name);
  Graph& g_;
  int layer_ = -1;
};

// After the allocator has placed every tensor: computes each node's exact read and write byte ranges and checks
// every one against its buffer (or, for weights, against the tensor's bytes in the file). A range out of bounds
// is an Error naming the op, the tensor, the offset and the size.
void resolve_ranges(Graph& g, uint64_t file_size);
// The same for the given nodes only (those whose ranges changed, e.g. a patched step's, see StepGraph): the others
// keep their ranges and the checks they passed.
void resolve_ranges(Graph& g, uint64_t file_size, std::span<const uint32_t> nodes);

// Whether a node's reads depend on values computed in the same step (MUL_MAT_ID: the experts its ids name).
bool has_routed_reads(const Node& n);
// Sets such a node's reads of its weights from its ids as they are now (call once they are computed, before the
// node runs): one range per expert any token chose (the expert's contiguous slab), in ascending expert order,
// each checked against the tensor's bytes. Ids outside [0, n_expert) are an Error naming the node.
void resolve_routed_reads(Node& n);

}  // namespace tt
