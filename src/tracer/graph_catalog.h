// The distinct graph structures of a run: each one's JSON (graphs/graph-NNNN.json, written when first seen), its
// names interned in trace.bin's string table, and what the other parts read of it per node, worked out once per
// structure; which graph each step ran (graphs/index.json).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/allocator.h"
#include "graph/graph.h"
#include "trace/run_dir.h"
#include "trace/trace_file.h"
#include "tracer/flush.h"

namespace tt {

struct GraphEntry {
  int id = 0;  // graphs/graph-<id>.json
  // Node i's op, output and input names start at ids[node_offset[i]] (trace::TraceWriter::op's ids).
  std::vector<uint32_t> ids, node_offset;
  std::vector<uint8_t> repeatable;  // node reads and writes only step-independent bytes
  std::vector<uint32_t> compared;   // the other nodes but the routed ones, in order
  std::vector<uint32_t> routed;     // nodes whose reads the step's routing decides
  std::vector<uint8_t> view;        // node is a view (its shares are no spans)
  struct Event {                    // the allocation plan's events (the same for every step of the graph)
    int node;
    bool alloc, reuse;
    uint64_t offset, bytes;
    uint32_t tensor;
  };
  std::vector<Event> events;
  uint64_t activation_peak = 0;       // live arena bytes at the plan's peak
  uint32_t activation_peak_node = 0;  // the tensor allocated there
};

class GraphCatalog {
 public:
  GraphCatalog(RunDirWriter& dir, trace::TraceWriter& strings);
  // Before step `step` runs g: its entry, written and interned when first seen. A graph seen again with the same
  // structure id (a patched generation step) is not keyed again.
  const GraphEntry& on_graph_ready(const Graph& g, const AllocPlan& plan);
  // Whether the last on_graph_ready's graph is the one the step before ran.
  bool same_as_previous() const { return same_as_previous_; }
  int steps() const { return static_cast<int>(step_graph_.size()); }
  // Writes graphs/index.json; the graph count for run.json.
  size_t finish();

 private:
  std::string graph_key(const Graph& g);
  GraphEntry make_entry(const Graph& g, const AllocPlan& plan);

  RunDirWriter& dir_;
  trace::TraceWriter& strings_;
  std::map<std::string, GraphEntry> graphs_;  // by graph_key
  const Graph* last_graph_ = nullptr;
  uint64_t last_structure_id_ = 0;
  const GraphEntry* last_ = nullptr;
  bool same_as_previous_ = false;
  std::vector<int> step_graph_;     // [step]: its graph's id
  std::vector<uint8_t> key_bytes_;  // graph_key's scratch, reused
};

// The graph as graphs/graph-NNNN.json's text.
std::string graph_json(const Graph& g);

}  // namespace tt
