#include "exec/allocator.h"

#include <algorithm>
#include <limits>
#include <map>

#include "core/error.h"

namespace tt {
namespace {

// Free space as offset -> size, merged with neighbours on release.
class FreeList {
 public:
  uint64_t allocate(uint64_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      uint64_t off = it->first, size = it->second;
      free_.erase(it);
      if (size > bytes) free_[off + bytes] = size - bytes;
      return off;
    }
    // No hole fits: grow at the end (merging a free tail block if there is one).
    uint64_t off = end_;
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == end_) {
        off = last->first;
        free_.erase(last);
      }
    }
    end_ = off + bytes;
    return off;
  }

  void release(uint64_t off, uint64_t bytes) {
    auto [it, inserted] = free_.emplace(off, bytes);
    TT_CHECK(inserted, "double free at offset {}", off);
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

  uint64_t end() const { return end_; }

 private:
  std::map<uint64_t, uint64_t> free_;
  uint64_t end_ = 0;
};

}  // namespace

AllocPlan plan_activations(Graph& g, const std::vector<const Tensor*>& keep, uint64_t alignment) {
  std::vector<Node>& nodes = g.nodes();
  // Last node reading each activation storage tensor, by graph index (-1: not read).
  std::vector<int> last_use(g.tensors().size(), -1);
  auto slot = [&](const Tensor& st) -> int& {
    TT_CHECK(st.graph_index >= 0 && st.graph_index < static_cast<int>(last_use.size()),
             "activation '{}' does not belong to the graph being planned", st.name);
    return last_use[st.graph_index];
  };
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i)
    for (const Tensor* s : nodes[i].src)
      if (s->storage().pool == Pool::ACTIVATION) slot(s->storage()) = i;
  for (const Tensor* k : keep)
    if (k->storage().pool == Pool::ACTIVATION) slot(k->storage()) = std::numeric_limits<int>::max();

  AllocPlan plan;
  FreeList free_list;
  auto aligned = [&](const Tensor& t) { return (t.n_bytes() + alignment - 1) / alignment * alignment; };
  // Kept tensors get bytes of their own, placed before any other: no other tensor of the step writes them, so
  // they hold the previous step's values until the node computing them runs again (the tracer reads the
  // previous step's logits while the next step runs).
  std::vector<uint8_t> kept(g.tensors().size(), 0);
  for (const Tensor* k : keep) {
    if (k->storage().pool != Pool::ACTIVATION) continue;
    slot(k->storage());  // checks that it is the graph's
    Tensor& st = g.tensors()[k->storage().graph_index];
    if (kept[st.graph_index]) continue;
    kept[st.graph_index] = 1;
    st.offset = free_list.allocate(aligned(st));
  }
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    Tensor* out = nodes[i].out;
    if (out->pool == Pool::ACTIVATION && !out->view_of) {
      const uint64_t high_water_before = free_list.end();
      const bool own_bytes = kept[out->graph_index];
      if (!own_bytes) out->offset = free_list.allocate(aligned(*out));
      plan.events.push_back(
          {AllocEvent::ALLOC, i, out, out->offset, out->n_bytes(), !own_bytes && out->offset < high_water_before});
    }
    for (const Tensor* s : nodes[i].src) {
      const Tensor& st = s->storage();
      if (st.pool != Pool::ACTIVATION) continue;
      int& last = slot(st);
      if (last != i) continue;
      last = -1;  // freed once even when read twice by this node
      free_list.release(st.offset, aligned(st));
      plan.events.push_back({AllocEvent::FREE, i, &st, st.offset, st.n_bytes(), false});
    }
  }
  plan.arena_bytes = free_list.end();
  return plan;
}

void bind_activation_data(Graph& g, uint8_t* arena, int arena_buffer_id) {
  for (Tensor& t : g.tensors()) {
    if (t.pool == Pool::ACTIVATION && !t.view_of) {
      t.data = arena + t.offset;
      t.buffer_id = arena_buffer_id;
    }
  }
  for (Tensor& t : g.tensors()) {
    if (!t.view_of) continue;
    const Tensor& s = t.storage();
    t.data = s.data + t.view_offset;
    t.buffer_id = s.buffer_id;
  }
}

}  // namespace tt
