// The graph catalog (graphs/): each distinct graph structure once, as graphs/graph-<id>.json, and which graph each
// step ran (graphs/index.json). On the run's thread, when the engine has a new graph: it also makes the graph's
// GraphSnapshot, which the other parts of the tracer describe each step with.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/allocator.h"
#include "graph/graph.h"
#include "trace/run_dir.h"
#include "tracer/step_capture.h"

namespace tt {

// Every placement field of node n (its output's, its write range's, its inputs' and the ranges they read) into r:
// the one place a node's placement becomes record fields.
void fill_placement(trace::OpRecord& r, const Node& n);

class GraphCatalog {
 public:
  explicit GraphCatalog(RunDirWriter& dir) : dir_(dir) {}
  // g's snapshot, made (and graphs/graph-<id>.json written) the first time its structure is seen. Called before each
  // step; the snapshot lives as long as the catalog.
  const GraphSnapshot& on_graph(const Graph& g, const AllocPlan& plan);
  size_t size() const { return graphs_.size(); }
  size_t steps() const { return step_graph_.size(); }
  void finish();  // graphs/index.json

 private:
  RunDirWriter& dir_;
  std::map<std::string, std::unique_ptr<GraphSnapshot>> graphs_;  // by structure key (graph_key)
  // The last graph and its structure (Graph::structure_id): seen again unchanged, it needs no new key.
  const Graph* last_graph_ = nullptr;
  uint64_t last_structure_id_ = 0;
  const GraphSnapshot* last_ = nullptr;
  std::vector<int> step_graph_;
};

}  // namespace tt
