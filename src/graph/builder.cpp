#include "graph/builder.h"

#include <algorithm>

#include "core/error.h"
#include "quant/attend.h"

namespace tt {

std::string GraphBuilder::name(const std::string& base) const {
  return layer_ >= 0 ? base + "-" + std::to_string(layer_) : base;
}

Tensor* GraphBuilder::input(const std::string& name, GgmlType type, std::initializer_list<int64_t> ne, int buffer_id,
                            uint8_t* data, uint64_t offset) {
  Tensor* t = g_.new_tensor(name, type, ne, -1, Pool::INPUT);
  t->buffer_id = buffer_id;
  t->data = data + offset;
  t->offset = offset;
  return t;
}

Tensor* GraphBuilder::get_rows(const Tensor* table, const Tensor* ids, std::vector<int32_t> rows,
                               const std::string& name) {
  for (int32_t r : rows)
    if (r < 0 || r >= table->n_rows())
      fail("GET_ROWS '{}': row {} is outside '{}' ({} rows)", name, r, table->name, table->n_rows());
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {table->ne[0], static_cast<int64_t>(rows.size())}, layer_);
  Node& n = g_.add_node(OpKind::GET_ROWS, out, {table, ids}, layer_);
  n.params.rows = std::move(rows);
  return out;
}

Tensor* GraphBuilder::rms_norm(const Tensor* x, float eps, const std::string& name) {
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, layer_);
  g_.add_node(OpKind::RMS_NORM, out, {x}, layer_).params.eps = eps;
  return out;
}

// b broadcast over a's rows (b has a's row length and divides its rows), or one value of b per row of a.
static void check_broadcast(const char* op, const Tensor* a, const Tensor* b, const std::string& name) {
  const bool per_row = b->ne[0] == 1 && b->n_rows() == a->n_rows();
  if (!per_row && (a->ne[0] != b->ne[0] || a->n_rows() % b->n_rows() != 0))
    fail("{} '{}': cannot broadcast '{}' {} over '{}' {}", op, name, b->name, shape_string(*b), a->name,
         shape_string(*a));
}

Tensor* GraphBuilder::mul(const Tensor* a, const Tensor* b, const std::string& name) {
  check_broadcast("MUL", a, b, name);
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, layer_);
  g_.add_node(OpKind::MUL, out, {a, b}, layer_);
  return out;
}

Tensor* GraphBuilder::add(const Tensor* a, const Tensor* b, const std::string& name) {
  check_broadcast("ADD", a, b, name);
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, layer_);
  g_.add_node(OpKind::ADD, out, {a, b}, layer_);
  return out;
}

Tensor* GraphBuilder::mul_mat(const Tensor* w, const Tensor* x, const std::string& name) {
  if (w->ne[0] != x->ne[0])
    fail("MUL_MAT '{}': '{}' {} rows have {} elements but '{}' {} rows have {}", name, w->name, shape_string(*w),
         w->ne[0], x->name, shape_string(*x), x->ne[0]);
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {w->ne[1], x->n_rows()}, layer_);
  g_.add_node(OpKind::MUL_MAT, out, {w, x}, layer_);
  return out;
}

Tensor* GraphBuilder::rope(const Tensor* x, const Tensor* positions, const RopeParams& p, int32_t pos0,
                           const std::string& name) {
  if (p.n_dims > x->ne[0] || p.n_dims % 2)
    fail("ROPE '{}': {} rotated dims for head size {}", name, p.n_dims, x->ne[0]);
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, layer_);
  Node& n = g_.add_node(OpKind::ROPE, out, {x, positions}, layer_);
  n.params.rope = p;
  n.params.pos0 = pos0;
  return out;
}

Tensor* GraphBuilder::swiglu(const Tensor* gate, const Tensor* up, const std::string& name) {
  check_broadcast("SWIGLU", gate, up, name);
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {gate->ne[0], gate->ne[1], gate->ne[2], gate->ne[3]}, layer_);
  g_.add_node(OpKind::SWIGLU, out, {gate, up}, layer_);
  return out;
}

Tensor* GraphBuilder::set_rows(const Tensor* cache, const Tensor* x, int32_t pos0, const std::string& name) {
  if (x->ne[0] != cache->ne[0])
    fail("SET_ROWS '{}': rows of {} elements into cache '{}' rows of {}", name, x->ne[0], cache->name, cache->ne[0]);
  const int64_t n_tokens = x->n_elements() / cache->ne[0];
  if (pos0 < 0 || pos0 + n_tokens > cache->ne[1])
    fail("SET_ROWS '{}': positions [{}, {}) are outside the cache '{}' of {} positions (context overflow)", name, pos0,
         pos0 + n_tokens, cache->name, cache->ne[1]);
  Tensor* out = g_.new_tensor(name, cache->type, {cache->ne[0], cache->ne[1]}, layer_, cache->pool);
  out->view_of = cache;
  out->buffer_id = cache->buffer_id;
  out->data = cache->data;
  Node& n = g_.add_node(OpKind::SET_ROWS, out, {x}, layer_);
  n.params.pos0 = pos0;
  return out;
}

Tensor* GraphBuilder::flash_attn(const Tensor* q, const Tensor* k, const Tensor* v, int32_t pos0, int32_t n_kv,
                                 float scale, KvSplit split, int32_t tiled_tokens, const std::string& name) {
  const Tensor& qs = q->storage();  // [head_dim, n_heads, n_tokens]
  const Tensor& ks = k->storage();  // [n_kv_heads * head_dim, n_ctx]
  if (qs.ne[0] <= 0 || ks.ne[0] % qs.ne[0] != 0 || qs.ne[1] % (ks.ne[0] / qs.ne[0]) != 0)
    fail("FLASH_ATTN_EXT '{}': {} query heads of size {} do not group over cache rows of {}", name, qs.ne[1], qs.ne[0],
         ks.ne[0]);
  if (n_kv > ks.ne[1] || pos0 + qs.ne[2] > n_kv)
    fail("FLASH_ATTN_EXT '{}': attends {} positions but the cache holds {}", name, n_kv, ks.ne[1]);
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {qs.ne[0], qs.ne[1], qs.ne[2]}, layer_);
  Node& n = g_.add_node(OpKind::FLASH_ATTN_EXT, out, {q, k, v}, layer_);
  n.params.pos0 = pos0;
  n.params.n_kv = n_kv;
  n.params.scale = scale;
  if (split.chunk < 0 || split.chunks_max < 0 || (split.chunks_max > 0 && qs.ne[2] != 1) ||
      (split.chunk > 0 && (split.chunks_max == 0 || (n_kv + split.chunk - 1) / split.chunk > split.chunks_max)))
    fail("FLASH_ATTN_EXT '{}': {} positions in cache chunks of {} (at most {}) for {} tokens", name, n_kv, split.chunk,
         split.chunks_max, qs.ne[2]);
  n.params.kv_chunk = split.chunk;
  n.params.kv_chunks_max = split.chunks_max;
  if (tiled_tokens < 0 || tiled_tokens > qs.ne[2] || (tiled_tokens > 0 && !attention_is_tiled(tiled_tokens, qs.ne[0])))
    fail("FLASH_ATTN_EXT '{}': {} of {} tokens cannot take the tiled path (head size {})", name, tiled_tokens, qs.ne[2],
         qs.ne[0]);
  n.params.tiled_tokens = tiled_tokens;
  return out;
}

Tensor* GraphBuilder::soft_max(const Tensor* x, const std::string& name) {
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, layer_);
  g_.add_node(OpKind::SOFT_MAX, out, {x}, layer_);
  return out;
}

Tensor* GraphBuilder::sigmoid(const Tensor* x, const std::string& name) {
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, layer_);
  g_.add_node(OpKind::SIGMOID, out, {x}, layer_);
  return out;
}

Tensor* GraphBuilder::top_k(const Tensor* x, int32_t k, const std::string& name) {
  if (k <= 0 || k > x->ne[0]) fail("TOP_K '{}': {} of rows of {} values", name, k, x->ne[0]);
  Tensor* out = g_.new_tensor(name, GgmlType::I32, {k, x->ne[1], x->ne[2], x->ne[3]}, layer_);
  g_.add_node(OpKind::TOP_K, out, {x}, layer_).params.k = k;
  return out;
}

Tensor* GraphBuilder::get_rows_per_token(const Tensor* x, const Tensor* ids, const std::string& name) {
  if (ids->type != GgmlType::I32 || ids->n_rows() != x->n_rows())
    fail("GET_ROWS '{}': ids '{}' {} do not select from the {} rows of '{}'", name, ids->name, shape_string(*ids),
         x->n_rows(), x->name);
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {1, ids->ne[0], ids->n_rows()}, layer_);
  g_.add_node(OpKind::GET_ROWS, out, {x, ids}, layer_);  // params.rows empty: the ids are src[1]'s
  return out;
}

Tensor* GraphBuilder::sum_rows(const Tensor* x, const std::string& name) {
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {1, x->ne[1], x->ne[2], x->ne[3]}, layer_);
  g_.add_node(OpKind::SUM_ROWS, out, {x}, layer_);
  return out;
}

Tensor* GraphBuilder::clamp(const Tensor* x, float lo, float hi, const std::string& name) {
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, layer_);
  Node& n = g_.add_node(OpKind::CLAMP, out, {x}, layer_);
  n.params.lo = lo;
  n.params.hi = hi;
  return out;
}

Tensor* GraphBuilder::div(const Tensor* a, const Tensor* b, const std::string& name) {
  check_broadcast("DIV", a, b, name);
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, layer_);
  g_.add_node(OpKind::DIV, out, {a, b}, layer_);
  return out;
}

Tensor* GraphBuilder::scale(const Tensor* x, float s, const std::string& name) {
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}, layer_);
  g_.add_node(OpKind::SCALE, out, {x}, layer_).params.scale = s;
  return out;
}

Tensor* GraphBuilder::mul_mat_id(const Tensor* w, const Tensor* x, const Tensor* ids, const std::string& name) {
  const int64_t k = ids->ne[0], n_tokens = ids->n_rows();
  if (w->ne[0] != x->ne[0] || w->ne[3] != 1)
    fail("MUL_MAT_ID '{}': experts '{}' {} do not take rows of '{}' {}", name, w->name, shape_string(*w), x->name,
         shape_string(*x));
  if (ids->type != GgmlType::I32 || x->ne[2] != n_tokens || (x->ne[1] != 1 && x->ne[1] != k) || x->ne[3] != 1)
    fail("MUL_MAT_ID '{}': ids '{}' {} do not match the input '{}' {}", name, ids->name, shape_string(*ids), x->name,
         shape_string(*x));
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {w->ne[1], k, n_tokens}, layer_);
  g_.add_node(OpKind::MUL_MAT_ID, out, {w, x, ids}, layer_);
  return out;
}

Tensor* GraphBuilder::add_slots(const Tensor* x, const std::string& name) {
  Tensor* out = g_.new_tensor(name, GgmlType::F32, {x->ne[0], x->ne[2]}, layer_);
  g_.add_node(OpKind::ADD, out, {x}, layer_);
  return out;
}

Tensor* GraphBuilder::view_node(OpKind op, const Tensor* x, std::initializer_list<int64_t> ne,
                                const std::string& name) {
  Tensor* out = g_.new_tensor(name, x->type, ne, layer_, x->pool);
  if (out->n_elements() > x->n_elements() && x->pool != Pool::KV_CACHE)
    fail("{} '{}': view of {} elements into '{}' of {}", op_name(op), name, out->n_elements(), x->name,
         x->n_elements());
  out->view_of = x;
  out->buffer_id = x->buffer_id;
  out->data = x->data;
  g_.add_node(op, out, {x}, layer_);
  return out;
}

Tensor* GraphBuilder::reshape(const Tensor* x, std::initializer_list<int64_t> ne, const std::string& name) {
  Tensor* t = view_node(OpKind::RESHAPE, x, ne, name);
  if (t->n_elements() != x->n_elements())
    fail("RESHAPE '{}': {} elements into shape {}", name, x->n_elements(), shape_string(*t));
  return t;
}

Tensor* GraphBuilder::view(const Tensor* x, std::initializer_list<int64_t> ne, const std::string& name) {
  return view_node(OpKind::VIEW, x, ne, name);
}

Tensor* GraphBuilder::permute(const Tensor* x, std::initializer_list<int64_t> ne, const std::string& name) {
  return view_node(OpKind::PERMUTE, x, ne, name);
}

namespace {

ByteRange whole(int input, const Tensor& t) {
  const Tensor& s = t.storage();
  ByteRange r;
  r.input = input;
  r.pool = s.pool;
  r.buffer_id = s.buffer_id;
  r.offset = s.offset + (t.view_of ? t.view_offset : 0);
  r.length = t.n_bytes();
  return r;
}

// Node n's reads and write, each checked against its buffer or its tensor's bytes in the file.
void resolve_node_ranges(const Graph& g, Node& n, uint64_t file_size) {
  auto check = [&](const ByteRange& r, const Tensor& t) {
    if (r.pool == Pool::MODEL_FILE) {
      const Tensor& s = t.storage();
      if (r.offset < s.offset || r.offset + r.length > s.offset + s.n_bytes() || r.offset + r.length > file_size)
        fail("{} '{}': reads [{}, {}) of '{}', outside its bytes [{}, {}) in the file", op_name(n.op), n.out->name,
             r.offset, r.offset + r.length, t.name, s.offset, s.offset + s.n_bytes());
      return;
    }
    const BufferInfo& b = g.buffer(r.buffer_id);
    if (r.offset + r.length > b.size)
      fail("{} '{}': range [{}, {}) of '{}' is outside buffer '{}' ({} bytes)", op_name(n.op), n.out->name, r.offset,
           r.offset + r.length, t.name, b.name, b.size);
  };
  n.reads.clear();
  if (op_is_view(n.op)) return;
  for (size_t i = 0; i < n.src.size(); ++i) {
    const Tensor& t = *n.src[i];
    if (n.op == OpKind::GET_ROWS && i == 0 && !n.params.rows.empty()) {
      // Only the rows looked up: consecutive rows merge into one range.
      const uint64_t rs = t.row_size();
      for (int32_t row : n.params.rows) {
        ByteRange r = whole(0, t);
        r.offset += static_cast<uint64_t>(row) * rs;
        r.length = rs;
        if (!n.reads.empty() && n.reads.back().input == 0 && n.reads.back().offset + n.reads.back().length == r.offset)
          n.reads.back().length += rs;
        else
          n.reads.push_back(r);
        check(n.reads.back(), t);
      }
      continue;
    }
    if (n.op == OpKind::MUL_MAT_ID && i == 0) continue;  // the experts chosen: resolve_routed_reads
    ByteRange r = whole(static_cast<int>(i), t);
    if (n.op == OpKind::FLASH_ATTN_EXT && i > 0) {
      // The cache rows attended: positions [0, n_kv).
      const Tensor& cache = t.storage();
      r.length = cache.row_size() * n.params.n_kv;
      r.pos_begin = 0;
      r.pos_end = n.params.n_kv;
    }
    check(r, t);
    n.reads.push_back(r);
  }
  n.write = whole(-1, *n.out);
  if (n.op == OpKind::SET_ROWS) {
    const Tensor& cache = n.out->storage();
    const int64_t n_tokens = n.src[0]->n_elements() / cache.ne[0];
    n.write.offset = cache.offset + n.params.pos0 * cache.row_size();
    n.write.length = n_tokens * cache.row_size();
    n.write.pos_begin = n.params.pos0;
    n.write.pos_end = n.params.pos0 + static_cast<int32_t>(n_tokens);
  }
  check(n.write, *n.out);
}

}  // namespace

bool has_routed_reads(const Node& n) { return n.op == OpKind::MUL_MAT_ID; }

void resolve_routed_reads(Node& n) {
  const Tensor& w = *n.src[0];
  const Tensor& ids = *n.src[2];
  const int64_t n_expert = w.ne[2];
  // Which experts any token chose (ascending: the order the kernel goes through them).
  std::vector<bool> chosen(static_cast<size_t>(n_expert), false);
  const int32_t* id = ids.as<const int32_t>();
  for (int64_t i = 0; i < ids.n_elements(); ++i) {
    if (id[i] < 0 || id[i] >= n_expert)
      fail("MUL_MAT_ID '{}': expert id {} is outside '{}' ({} experts)", n.out->name, id[i], w.name, n_expert);
    chosen[static_cast<size_t>(id[i])] = true;
  }
  std::vector<ByteRange> reads;
  const uint64_t slab = w.row_size() * static_cast<uint64_t>(w.ne[1]);
  for (int64_t e = 0; e < n_expert; ++e) {
    if (!chosen[static_cast<size_t>(e)]) continue;
    ByteRange r = whole(0, w);
    r.offset += static_cast<uint64_t>(e) * slab;
    r.length = slab;
    const Tensor& s = w.storage();
    TT_CHECK(r.offset + r.length <= s.offset + s.n_bytes(), "MUL_MAT_ID '{}': expert {} beyond '{}'", n.out->name, e,
             w.name);
    reads.push_back(r);
  }
  for (const ByteRange& r : n.reads)
    if (r.input != 0) reads.push_back(r);
  n.reads = std::move(reads);
}

void resolve_ranges(Graph& g, uint64_t file_size) {
  for (Node& n : g.nodes()) resolve_node_ranges(g, n, file_size);
}

void resolve_ranges(Graph& g, uint64_t file_size, std::span<const uint32_t> nodes) {
  std::vector<Node>& all = g.nodes();
  for (uint32_t i : nodes) {
    TT_CHECK(i < all.size(), "byte ranges of node {} in a graph of {}", i, all.size());
    resolve_node_ranges(g, all[i], file_size);
  }
}

}  // namespace tt
