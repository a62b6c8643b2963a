// Evaluates tokens with a loaded model: builds the step's graph, places its activations, runs it on the thread
// pool, and hands the logits back. Observers (the tracer) see the graph, the allocation plan and every node.
#pragma once

#include <memory>
#include <span>

#include "exec/allocator.h"
#include "exec/executor.h"
#include "exec/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"

namespace tt {

struct EngineOptions {
  int32_t n_ctx = 0;  // 0: the model's training context, capped at 4096
  int n_threads = 1;
  GgmlType kv_type = GgmlType::F16;
  // Whose float order to reproduce where llama.cpp's builds differ by CPU kind (quant.h): by default this CPU's.
  LlamaCppBuild llamacpp_build = default_llamacpp_build();
  // Mixture-of-experts models: predict each next layer's experts (RunState::moe_predict, LayerRouting::predicted).
  bool moe_predict = false;
};

class StepObserver : public ExecObserver {
 public:
  // Before execution: the graph with every tensor placed and every byte range resolved.
  virtual void on_graph_ready(const Graph& g, const AllocPlan& plan) {}
};

class Engine {
 public:
  Engine(const Model& model, EngineOptions options);

  // Evaluates `tokens` at positions [n_past, n_past + n) as one batch; returns the last token's logits.
  std::span<const float> eval(std::span<const int32_t> tokens, StepObserver* observer = nullptr);

  // After eval: the final normalised hidden state of the last token (result_norm).
  std::span<const float> hidden() const;
  const StepGraph& last_step() const { return *step_; }
  // After eval: the routing of every mixture-of-experts layer in that step (empty for dense models); valid until
  // the next eval.
  std::span<const LayerRouting> routing() const { return step_->routing; }
  const AllocPlan& last_plan() const { return plan_; }

  int32_t n_past() const { return state_.n_past; }
  int32_t n_ctx() const { return state_.n_ctx; }
  void reset() { state_.n_past = 0; }
  const Model& model() const { return model_; }
  // Where the weights each node reads are made resident (`run --weight-budget`); null: the mapped file.
  void set_residency(NodeResidency* residency) { executor_.set_residency(residency); }
  // The compute workers; idle between eval() calls (observers may use them then).
  ThreadPool& pool() { return pool_; }
  const EngineOptions& options() const { return options_; }
  // Memory beyond the model file's pages: KV cache, activations, scratch, the threads' work memory and inputs.
  uint64_t kv_cache_bytes() const;
  uint64_t runtime_bytes() const;

 private:
  const Model& model_;
  EngineOptions options_;
  RunState state_;
  ThreadPool pool_;
  Executor executor_;
  std::unique_ptr<StepGraph> step_;
  AllocPlan plan_;
  uint64_t graphs_built_ = 0;
};

}  // namespace tt
