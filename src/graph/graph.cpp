#include "graph/graph.h"

#include "core/error.h"

namespace tt {

Tensor* Graph::new_tensor(std::string name, GgmlType type, std::initializer_list<int64_t> ne, int layer, Pool pool) {
  TT_CHECK(ne.size() >= 1 && ne.size() <= 4, "tensor '{}' with {} dims", name, ne.size());
  Tensor& t = tensors_.emplace_back();
  t.graph_index = static_cast<int>(tensors_.size()) - 1;
  t.name = std::move(name);
  t.type = type;
  int d = 0;
  for (int64_t n : ne) t.ne[d++] = n;
  t.layer = layer;
  t.pool = pool;
  return &t;
}

Node& Graph::add_node(OpKind op, Tensor* out, std::initializer_list<const Tensor*> src, int layer) {
  Node& n = nodes_.emplace_back();
  n.op = op;
  n.out = out;
  n.src = src;
  n.layer = layer;
  return n;
}

const BufferInfo& Graph::buffer(int id) const {
  for (const BufferInfo& b : buffers)
    if (b.id == id) return b;
  fail("graph refers to unknown buffer {}", id);
}

}  // namespace tt
