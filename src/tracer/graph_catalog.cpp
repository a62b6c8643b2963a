#include "tracer/graph_catalog.h"

#include <xxhash.h>

#include <unordered_map>

#include "core/error.h"
#include "core/shape.h"
#include "gguf/memory_map.h"
#include "graph/builder.h"
#include "trace/json_line.h"

namespace tt {

namespace {

// Category of a graph node from the name it was given where it was computed.
const char* node_category(const std::string& name) {
  auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  if (starts("embd") || starts("inp_")) return "embedding";
  if (starts("result_output")) return "output";
  if (starts("result_norm") || starts("norm") || starts("attn_norm") || starts("ffn_norm")) return "norm";
  if (starts("ffn_inp") || starts("l_out") || starts("inp_last")) return "residual";
  if (starts("ffn_")) return "ffn";
  return "attention";
}

}  // namespace

GraphCatalog::GraphCatalog(RunDirWriter& dir, trace::TraceWriter& strings) : dir_(dir), strings_(strings) {
  reserve_touched(step_graph_, kStepsReserved);
}

const GraphEntry& GraphCatalog::on_graph_ready(const Graph& g, const AllocPlan& plan) {
  const GraphEntry* previous = step_graph_.empty() ? nullptr : last_;
  if (!(&g == last_graph_ && g.structure_id != 0 && g.structure_id == last_structure_id_)) {
    if (g.nodes().size() > trace::kMaxNodes)
      fail("a graph of {} nodes: trace.bin holds at most {}", g.nodes().size(), trace::kMaxNodes);
    auto [it, first_seen] = graphs_.try_emplace(graph_key(g));
    GraphEntry& entry = it->second;
    if (first_seen) {
      const int id = static_cast<int>(graphs_.size()) - 1;
      dir_.write_file(fmt::format("graphs/graph-{:04}.json", id), graph_json(g));
      entry = make_entry(g, plan);
      entry.id = id;
    }
    last_graph_ = &g;
    last_structure_id_ = g.structure_id;
    last_ = &entry;
  }
  // The key covers names, ops, shapes and placement, so the allocation plan is the same too.
  TT_CHECK(last_->events.size() == plan.events.size(), "graph {} seen again with another allocation plan", last_->id);
  same_as_previous_ = last_ == previous;
  step_graph_.push_back(last_->id);
  return *last_;
}

size_t GraphCatalog::finish() {
  nlohmann::json index = nlohmann::json::array();
  for (size_t s = 0; s < step_graph_.size(); ++s) index.push_back({{"step", s}, {"graph", step_graph_[s]}});
  dir_.write_json("graphs/index.json", {{"graphs", graphs_.size()}, {"steps", index}});
  return graphs_.size();
}

GraphEntry GraphCatalog::make_entry(const Graph& g, const AllocPlan& plan) {
  GraphEntry names;
  for (const Node& n : g.nodes()) {
    names.node_offset.push_back(static_cast<uint32_t>(names.ids.size()));
    const uint32_t out = strings_.intern(n.out->name);
    names.ids.insert(names.ids.end(), {out, out});  // the op is named after what it computes
    for (const Tensor* s : n.src) names.ids.push_back(strings_.intern(s->name));
  }
  uint64_t live = 0;
  for (const AllocEvent& e : plan.events) {
    const bool alloc = e.kind == AllocEvent::ALLOC;
    names.events.push_back({e.node, alloc, e.reuse, e.offset, e.bytes, strings_.intern(e.tensor->name)});
    live = alloc ? live + e.bytes : live - e.bytes;
    if (alloc && live > names.activation_peak)
      names.activation_peak = live, names.activation_peak_node = names.events.back().tensor;
  }
  for (const Node& n : g.nodes()) {
    const uint32_t i = static_cast<uint32_t>(names.repeatable.size());
    // MUL_MAT_ID reads the experts this step's router chose: known only once the node starts, so compared at the
    // step's end (routed), not before the step runs with the other compared nodes.
    const bool routed = has_routed_reads(n);
    bool fixed = !routed && n.op != OpKind::GET_ROWS && n.write.pool != Pool::KV_CACHE &&
                 n.out->storage().pool != Pool::KV_CACHE;
    for (const Tensor* s : n.src) fixed = fixed && s->storage().pool != Pool::KV_CACHE;
    for (const ByteRange& r : n.reads) fixed = fixed && r.pos_begin < 0 && r.pool != Pool::KV_CACHE;
    names.repeatable.push_back(fixed);
    if (routed)
      names.routed.push_back(i);
    else if (!fixed)
      names.compared.push_back(i);
    names.view.push_back(op_is_view(n.op));
  }
  return names;
}

std::string GraphCatalog::graph_key(const Graph& g) {
  // Structure without the step-dependent number of attended cache positions: every node's name, op, inputs,
  // shape and placement. Graphs with the same key have the same op records but for cache-dependent fields.
  // Gathered into one buffer and hashed once (a streaming update per field costs more than the hash).
  std::vector<uint8_t>& b = key_bytes_;
  b.clear();
  auto add = [&](const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  };
  for (const Node& n : g.nodes()) {
    add(n.out->name.data(), n.out->name.size() + 1);
    add(&n.op, sizeof(n.op));
    for (const Tensor* src : n.src) add(src->name.data(), src->name.size() + 1);
    if (n.out->pool != Pool::KV_CACHE) {
      const Tensor& storage = n.out->storage();
      const uint64_t place[3] = {storage.offset + n.out->view_offset, static_cast<uint64_t>(storage.buffer_id),
                                 static_cast<uint64_t>(storage.pool)};
      add(n.out->ne, sizeof(n.out->ne));
      add(place, sizeof(place));
    }
  }
  return fmt::format("{:016x}", XXH3_64bits(b.data(), b.size()));
}

// The graph as JSON text, written directly: building an nlohmann tree of the graph costs milliseconds, inside the
// first timed step of every new graph.
std::string graph_json(const Graph& g) {
  JsonLine nodes, edges;
  std::unordered_map<const Tensor*, std::string> producer;  // tensor -> node id that computed it
  std::unordered_map<const Tensor*, std::string> leaves;
  size_t n_nodes = 0, n_edges = 0;
  auto shape = [&](JsonLine& j, const Tensor& t) {
    if (t.pool == Pool::KV_CACHE) {
      j.key("shape").null();
      return;
    }
    j.begin_array("shape");
    for (int64_t d : shape_dims(t.ne)) j.value(d);
    j.end_array();
  };
  auto layer = [&](JsonLine& j, int l) {
    if (l >= 0)
      j.field("layer", l);
    else
      j.key("layer").null();
  };
  auto leaf = [&](const Tensor* t) -> const std::string& {
    auto it = leaves.find(t);
    if (it != leaves.end()) return it->second;
    const std::string& id = leaves[t] = fmt::format("leaf_{}", leaves.size());
    const TensorRole role = tensor_role(t->name);
    nodes.begin_object().field("id", std::string_view(id)).field("name", std::string_view(t->name)).field("op", "LEAF");
    shape(nodes, *t);
    nodes.field("type", type_name(t->type));
    layer(nodes, t->layer);
    nodes.field("category", t->pool == Pool::MODEL_FILE ? role.category : node_category(t->name))
        .field("pool", pool_name(t->pool))
        .end_object();
    ++n_nodes;
    return id;
  };
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    const std::string id = fmt::format("node_{}", i);
    // Leaves first, so a node's inputs precede it (as a tree built in this order listed them).
    std::vector<std::string> from;
    for (const Tensor* s : n.src) {
      auto it = producer.find(s);
      from.push_back(it != producer.end() ? it->second : leaf(s));
    }
    nodes.begin_object()
        .field("id", std::string_view(id))
        .field("index", static_cast<uint64_t>(i))
        .field("name", std::string_view(n.out->name))
        .field("op", op_name(n.op));
    shape(nodes, *n.out);
    nodes.field("type", type_name(n.out->type));
    layer(nodes, n.layer);
    nodes.field("category", node_category(n.out->name)).field("pool", pool_name(n.out->storage().pool));
    for (const Tensor* s : n.src)
      if (s->pool == Pool::MODEL_FILE) nodes.field("weight_tensor", std::string_view(s->name));
    nodes.end_object();
    ++n_nodes;
    for (size_t slot = 0; slot < n.src.size(); ++slot) {
      edges.begin_object()
          .field("source", std::string_view(from[slot]))
          .field("target", std::string_view(id))
          .field("slot", static_cast<uint64_t>(slot))
          .field("label", std::string_view(fmt::format("src[{}]", slot)))
          .end_object();
      ++n_edges;
    }
    producer[n.out] = id;
  }
  return fmt::format(
      "{{\"format\":\"tensortrace.graph\",\"version\":1,\"n_nodes\":{},\"n_edges\":{},\"note\":\"shape null: "
      "depends on the step's number of cache positions (see steps.jsonl pos_end)\",\"nodes\":[{}],\"edges\":[{}]}}",
      n_nodes, n_edges, nodes.str(), edges.str());
}

}  // namespace tt
