#include "graph/graph.h"

#include "core/error.h"

namespace tt {

const char* op_name(OpKind op) {
  switch (op) {
    case OpKind::GET_ROWS: return "GET_ROWS";
    case OpKind::RMS_NORM: return "RMS_NORM";
    case OpKind::MUL: return "MUL";
    case OpKind::ADD: return "ADD";
    case OpKind::MUL_MAT: return "MUL_MAT";
    case OpKind::ROPE: return "ROPE";
    case OpKind::SET_ROWS: return "SET_ROWS";
    case OpKind::FLASH_ATTN_EXT: return "FLASH_ATTN_EXT";
    case OpKind::SWIGLU: return "SWIGLU";
    case OpKind::RESHAPE: return "RESHAPE";
    case OpKind::VIEW: return "VIEW";
    case OpKind::PERMUTE: return "PERMUTE";
    case OpKind::kCount: break;
  }
  return "?";
}

bool op_is_view(OpKind op) { return op == OpKind::RESHAPE || op == OpKind::VIEW || op == OpKind::PERMUTE; }

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
