#include "model/engine.h"

#include <algorithm>

#include "core/error.h"
#include "graph/builder.h"

namespace tt {

Engine::Engine(const Model& model, EngineOptions options)
    : model_(model), options_(options), pool_(options.n_threads), executor_(pool_) {
  if (options_.n_ctx < 0) fail("context size must be positive, got {}", options_.n_ctx);
  if (options_.n_ctx == 0) options_.n_ctx = std::min(model.config.n_ctx_train, 4096);
  init_run_state(state_, model.config, options_.n_ctx, options_.kv_type);
  state_.llamacpp_build = options_.llamacpp_build;
  state_.n_threads = options_.n_threads;
  if (options_.moe_predict && model.config.n_expert == 0)
    fail("expert prediction (--moe-predict) needs a mixture-of-experts model; this {} model has no experts",
         model.config.arch_name);
  state_.moe_predict = options_.moe_predict;
}

std::span<const float> Engine::eval(std::span<const int32_t> tokens, StepObserver* observer) {
  // A step of the previous step's token count (every generation step) only moves positions: patch that graph.
  const bool patched = step_ && update_step_graph(*step_, model_, state_, tokens);
  if (!patched) {
    // The pool's background shares (run_async: the tracer's step line) may read the last step's buffers.
    pool_.wait();
    const size_t previous_nodes = step_ ? step_->graph.nodes().size() : 0;
    step_ = std::make_unique<StepGraph>();
    step_->graph.reserve_nodes(previous_nodes);
    build_step_graph(*step_, model_, state_, tokens);
    step_->graph.structure_id = ++graphs_built_;

    std::vector<const Tensor*> keep = {step_->logits, step_->hidden};
    for (const LayerRouting& r : step_->routing) {
      keep.insert(keep.end(), {r.probs, r.experts, r.weights});
      if (r.predicted) keep.push_back(r.predicted);
    }
    plan_ = plan_activations(step_->graph, keep);
    state_.arena.reserve(plan_.arena_bytes);
    state_.scratch.reserve(max_scratch_bytes(step_->graph));
    for (BufferInfo& b : step_->graph.buffers) {
      if (b.id == kArenaBuffer) b.data = state_.arena.data(), b.size = state_.arena.size();
      if (b.id == kScratchBuffer) b.data = state_.scratch.data(), b.size = state_.scratch.size();
    }
    bind_activation_data(step_->graph, state_.arena.data(), kArenaBuffer);
  }
  Graph& g = step_->graph;
  // Byte ranges (checked against their buffers): all of a new graph's, a patched one's where the patch moved them.
  if (patched)
    resolve_ranges(g, model_.file->file_size(), step_->patched_ranges);
  else
    resolve_ranges(g, model_.file->file_size());

  const std::span<const float> logits(step_->logits->as<const float>(), static_cast<size_t>(step_->logits->ne[0]));
  if (observer) observer->on_graph_ready(g, plan_);
  executor_.run(g, state_.scratch.data(), observer);
  state_.n_past += static_cast<int32_t>(tokens.size());
  return logits;
}

std::span<const float> Engine::hidden() const {
  return {step_->hidden->as<const float>(), static_cast<size_t>(step_->hidden->ne[0])};
}

uint64_t Engine::kv_cache_bytes() const {
  uint64_t b = 0;
  for (const auto& k : state_.k_cache) b += k->size();
  for (const auto& v : state_.v_cache) b += v->size();
  return b;
}

uint64_t Engine::runtime_bytes() const {
  return kv_cache_bytes() + state_.arena.size() + state_.scratch.size() + executor_.thread_memory_bytes() +
         state_.inputs.size();
}

}  // namespace tt
