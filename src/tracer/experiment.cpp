#include "tracer/experiment.h"

#include <fmt/chrono.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/version.h"
#include "gguf/memory_map.h"
#include "model/weight_store.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"
#include "trace/run_data.h"

namespace tt {

using nlohmann::json;

namespace {

json host_json() {
  std::string cpu;
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  struct utsname u {};
  uname(&u);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return {{"hostname", host},
          {"cpu", cpu},
          {"cores", sysconf(_SC_NPROCESSORS_ONLN)},
          {"memory_bytes", static_cast<uint64_t>(pages) * page},
          {"kernel", std::string(u.sysname) + " " + u.release},
          {"kernel_isa", kernel_isa()}};
}

// The file's hash, from the file itself: the loaded copy's bytes may be stored otherwise (row groups).
std::string file_xxh64(const std::string& path) {
  const MappedFile file(path);
  return fmt::format("{:016x}", XXH64(file.data(), file.size(), 0));
}

std::string iso_now() {
  auto now = std::chrono::system_clock::now();
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(now)));
}

json config_json(const ModelConfig& c) {
  json j = {{"architecture", c.arch_name},
            {"name", c.name},
            {"n_vocab", c.n_vocab},
            {"n_ctx_train", c.n_ctx_train},
            {"n_embd", c.n_embd},
            {"n_layer", c.n_layer},
            {"n_ff", c.n_ff},
            {"n_head", c.n_head},
            {"n_head_kv", c.n_head_kv},
            {"head_dim", c.head_dim},
            {"n_rot", c.n_rot},
            {"rope_base", c.rope_base},
            {"rope_freq_scale", c.rope_freq_scale},
            {"rope_neox", c.rope_neox},
            {"rms_eps", c.rms_eps}};
  if (c.n_expert > 0) {
    j["n_expert"] = c.n_expert;
    j["n_expert_used"] = c.n_expert_used;
    j["n_ff_exp"] = c.n_ff_exp;
    j["n_ff_shexp"] = c.n_ff_shexp;
    j["expert_gating"] = c.gating == ExpertGating::SOFTMAX ? "softmax" : "sigmoid";
    j["expert_weights_norm"] = c.expert_weights_norm;
    j["expert_weights_scale"] = c.expert_weights_scale;
  }
  return j;
}

// --weight-budget's options, checked before the model loads (null without the option).
std::optional<WeightStoreOptions> weight_store_options(const ExperimentOptions& o) {
  if (o.weight_budget.empty()) {
    if (o.cache_policy != "lru" || o.direct_io) fail("--cache-policy and --direct-io need --weight-budget SIZE");
    return std::nullopt;
  }
  WeightBudget::parse(o.weight_budget);
  WeightStoreOptions w;
  w.budget = o.weight_budget;
  w.direct_io = o.direct_io;
  // Another budgeted run's demand accesses, in order.
  auto demand_of = [](const std::string& from, const std::string& option) {
    const RunData rec = load_run(from, {.graphs = false});
    std::vector<RecordedUnit> units;
    for (const trace::WeightLoadRecord& l : rec.trace.weight_loads)
      if (!l.prefetch) units.push_back({l.tensor, l.expert, l.offset});
    if (units.empty()) fail("{}: that run has no weight loads (it ran without --weight-budget)", option);
    return units;
  };
  if (o.prefetch == "next-layer" || o.prefetch == "predicted") {
    w.prefetch = WeightStoreOptions::Prefetch::NEXT_LAYER;
  } else if (o.prefetch.rfind("from:", 0) == 0) {
    w.prefetch = WeightStoreOptions::Prefetch::RECORDED;
    w.recorded = demand_of(o.prefetch.substr(5), "--prefetch " + o.prefetch);
  } else if (o.prefetch != "none") {
    fail("--prefetch with --weight-budget must be none, next-layer, predicted or from:RUN_DIR, got '{}'", o.prefetch);
  }
  if (o.cache_policy.rfind("opt-from:", 0) == 0) {
    if (w.prefetch != WeightStoreOptions::Prefetch::NONE)
      fail(
          "--cache-policy {} with --prefetch {}: OPT's future is the demand stream, which a prefetcher's timing "
          "changes; opt-from runs without --prefetch",
          o.cache_policy, o.prefetch);
    w.policy = cache::Policy::OPT;
    w.future = demand_of(o.cache_policy.substr(9), "--cache-policy " + o.cache_policy);
  } else {
    const std::optional<cache::Policy> p = cache::policy_from_name(o.cache_policy);
    if (!p || *p == cache::Policy::OPT)
      fail("--cache-policy must be lru, lfu, fifo, lru-2, least-stale or opt-from:RUN_DIR, got '{}'", o.cache_policy);
    w.policy = *p;
  }
  return w;
}

json weight_cache_json(const WeightStore& s, const std::string& prefetch) {
  const WeightStore::Totals t = s.totals();
  return {
      {"budget", s.options().budget},
      {"budget_bytes", s.budget()},
      {"unit_bytes", s.unit_bytes()},
      {"units", s.units().size()},
      {"page_bytes", s.page_bytes()},
      {"n_phases", s.n_phases()},
      {"policy", cache::policy_name(s.options().policy)},
      {"direct_io", s.options().direct_io},
      {"accesses", t.accesses},
      {"hits", t.hits},
      {"misses", t.misses},
      {"evictions", t.evictions},
      {"bytes_read", t.bytes_read},
      {"read_ns", t.read_ns},
      {"read_bytes_per_s", t.read_ns ? static_cast<double>(t.bytes_read) * 1e9 / static_cast<double>(t.read_ns) : 0.0},
      {"stall_ns", t.stall_ns},
      {"prefetch", prefetch},
      {"prefetches", t.prefetches},
      {"prefetch_bytes", t.prefetch_bytes},
      {"prefetch_hits", t.prefetch_hits},
      {"peak_resident_bytes", t.peak_resident_bytes},
      {"resident_bytes_at_end", s.measured_resident_bytes()}};
}

}  // namespace

std::string default_run_dir(const std::string& model_path) {
  auto now = std::chrono::system_clock::now();
  return fmt::format("runs/{:%Y%m%d-%H%M%S}-{}", fmt::localtime(std::chrono::system_clock::to_time_t(now)),
                     std::filesystem::path(model_path).stem().string());
}

ExperimentResult run_experiment(const ExperimentOptions& o, const std::function<void(std::string_view)>& on_text,
                                const std::function<void()>& on_ready) {
  ExperimentResult result;
  const uint64_t t0 = now_ns();
  o.sampling.validate();
  if (o.overwrite && o.run_dir.empty()) fail("--overwrite needs -o RUN_DIR (a default run directory is always new)");
  std::unique_ptr<RunDirWriter> dir;
  if (o.trace && o.run_dir.empty())
    dir = std::make_unique<RunDirWriter>(default_run_dir(o.model_path), ExistingRunDir::NEXT_FREE);
  else if (o.trace)
    dir = std::make_unique<RunDirWriter>(o.run_dir, o.overwrite ? ExistingRunDir::OVERWRITE : ExistingRunDir::REFUSE);

  const std::optional<WeightStoreOptions> store_options = weight_store_options(o);
  if (o.progress) fmt::print(stderr, "loading {} ...\n", o.model_path);
  // Runs that study how weights come from the file map it; the rest read it into memory if it fits
  // (default_residency).
  std::string why;
  const FileResidency residency = o.mmap || o.cold || o.trace_options.io || o.prefetch != "none" || store_options
                                      ? FileResidency::MAPPED
                                      : default_residency(o.model_path, &why);
  if (!why.empty()) fmt::print(stderr, "note: {}\n", why);
  const bool mapped = residency == FileResidency::MAPPED;
  std::unique_ptr<Model> model = load_model(o.model_path, residency);
  const bool moe = model->config.n_expert > 0;
  if (store_options && o.prefetch == "predicted" && !moe)
    fail("--prefetch predicted needs a mixture-of-experts model (it prefetches the predicted experts); use next-layer");
  std::unique_ptr<WeightStore> store = store_options ? std::make_unique<WeightStore>(*model, *store_options) : nullptr;
  // next-layer on a mixture-of-experts model prefetches the experts the engine predicts.
  const bool moe_predict =
      o.moe_predict || (moe && store_options && store_options->prefetch == WeightStoreOptions::Prefetch::NEXT_LAYER);
  Engine engine(*model, {o.n_ctx, o.n_threads, o.kv_type, o.llamacpp_build, moe_predict});
  if (store) engine.set_residency(store.get());
  result.load_ns = now_ns() - t0;
  result.prompt_tokens = model->tokenizer->encode(o.prompt, /*add_special=*/true);
  if (store) store->require(static_cast<int64_t>(result.prompt_tokens.size()));
  if (o.progress)
    fmt::print(stderr, "model: {} ({}, {} layers, dim {}, {} kernels), {} threads, context {}, prompt {} tokens\n",
               model->config.name, model->config.arch_name, model->config.n_layer, model->config.n_embd, kernel_isa(),
               o.n_threads, engine.n_ctx(), result.prompt_tokens.size());

  std::unique_ptr<Tracer> tracer;
  std::unique_ptr<Prefetcher> prefetcher;
  json run;
  json cold_check = nullptr;
  if (o.prefetch != "none" && !store && !dir)
    fail("--prefetch needs tracing (it hooks the executor through the tracer)");
  if (o.prefetch != "none" && !store) {
    const GgufFile& f = *model->file;
    if (o.prefetch == "next-layer") {
      prefetcher = std::make_unique<Prefetcher>(f.fd(), f.file_size(), Prefetcher::Mode::NEXT_LAYER);
    } else if (o.prefetch.rfind("from:", 0) == 0) {
      const std::string rec_dir = o.prefetch.substr(5);
      const RunData rec = load_run(rec_dir, {.graphs = false});
      Prefetcher::Plan plan;
      for (const trace::OpRecord& op : rec.trace.ops) {
        if (plan.size() <= op.step) plan.resize(op.step + 1);
        auto& nodes = plan[op.step];
        if (nodes.size() <= op.node) nodes.resize(op.node + 1);
        for (const trace::TensorRecord& in : op.inputs)
          for (const trace::RangeRecord& r : in.ranges)
            if (r.pool == Pool::MODEL_FILE && r.length) nodes[op.node].push_back({r.offset, r.length});
      }
      if (plan.empty()) fail("--prefetch {}: the recorded run has no ops", o.prefetch);
      prefetcher = std::make_unique<Prefetcher>(f.fd(), f.file_size(), Prefetcher::Mode::RECORDED, std::move(plan));
    } else {
      fail("--prefetch must be none, next-layer or from:RUN_DIR, got '{}'", o.prefetch);
    }
  }
  if (o.cold) {
    const GgufFile& f = *model->file;
    const EvictResult ev = evict_from_page_cache(f.fd(), f.bytes().data(), f.bytes().size());
    cold_check = ev.to_json();
    if (o.progress || ev.resident_after > 0 || !ev.error.empty()) {
      if (ev.resident_after == 0 && ev.error.empty())
        fmt::print(stderr, "cold: evicted the model file from the page cache ({} pages were resident, 0 remain)\n",
                   ev.resident_before);
      else
        fmt::print(stderr, "cold: could NOT fully evict the model file: {} of {} pages remain resident{}{}\n",
                   ev.resident_after, ev.pages, ev.error.empty() ? "" : "; ", ev.error);
    }
  }
  if (dir) {
    tracer = std::make_unique<Tracer>(*dir, *model, o.trace_options, engine.pool(), t0);
    if (prefetcher) tracer->set_prefetcher(prefetcher.get());
    if (store) tracer->set_weight_store(*store);
    for (int il = 0; il < model->config.n_layer; ++il) {
      const uint64_t bytes = row_bytes(o.kv_type, model->config.n_embd_kv()) * engine.n_ctx();
      tracer->record_static_buffer(fmt::format("cache_k_l{}", il), Pool::KV_CACHE, k_buffer_id(il), bytes);
      tracer->record_static_buffer(fmt::format("cache_v_l{}", il), Pool::KV_CACHE, v_buffer_id(il), bytes);
    }
    dir->write_json("memory-map.json", memory_map_json(*model->file));
  }

  GenerateOptions go;
  go.prompt_tokens = result.prompt_tokens;
  go.n_predict = o.n_predict;
  go.sampling = o.sampling;
  go.stop = o.stop;
  uint64_t last_progress = 0;
  int produced = 0;
  if (on_ready) on_ready();
  result.generation = generate(engine, go, tracer.get(), [&](std::string_view piece) {
    ++produced;
    if (on_text) on_text(piece);
    const uint64_t now = now_ns();
    if (o.progress && !on_text && now - last_progress > 500'000'000) {
      fmt::print(stderr, "\rgenerated {}/{} tokens", produced, o.n_predict);
      last_progress = now;
    }
  });

  if (store && !result.generation.interrupted) store->finish();
  result.runtime_bytes = engine.runtime_bytes();
  result.kv_cache_bytes = engine.kv_cache_bytes();
  if (!dir) return result;

  const GenerateResult& g = result.generation;
  json timings = {{"load_ns", result.load_ns}, {"prompt_ns", g.prompt_ns}, {"step_ns", g.step_ns}};
  json counts = tracer->finish();
  const GgufFile& f = *model->file;
  json notes = model->config.notes;
  for (const std::string& n : model->weights.notes) notes.push_back(n);
  run = {{"format", "tensortrace.run"},
         {"version", 1},
         {"tool", {{"name", "tensortrace"}, {"version", TT_VERSION}, {"git_revision", git_revision()}}},
         {"date", iso_now()},
         {"host", host_json()},
         {"model",
          {{"path", std::filesystem::absolute(o.model_path).string()},
           {"file", std::filesystem::path(o.model_path).filename().string()},
           {"size_bytes", f.file_size()},
           {"xxh64", file_xxh64(o.model_path)},
           {"gguf_version", f.version()},
           {"config", config_json(model->config)},
           {"output_tied", model->weights.output_tied},
           {"load_checks",
            {{"passed", true},
             {"notes", notes},
             {"checked", "hyperparameters, every required tensor's presence, shape and type"}}}}},
         {"options",
          {{"prompt", o.prompt},
           {"n_predict", o.n_predict},
           {"threads", o.n_threads},
           {"ctx", engine.n_ctx()},
           {"kv_type", type_name(o.kv_type)},
           {"llamacpp_build", llamacpp_build_name(o.llamacpp_build)},
           {"moe_predict", moe_predict},
           {"sampling",
            {{"temperature", o.sampling.temperature},
             {"top_k", o.sampling.top_k},
             {"top_p", o.sampling.top_p},
             {"min_p", o.sampling.min_p},
             {"repeat_penalty", o.sampling.repeat_penalty},
             {"repeat_last_n", o.sampling.repeat_last_n},
             {"seed", o.sampling.seed}}},
           {"trace", o.trace_options.to_json()},
           {"weights", store    ? "weight-budget"
                       : mapped ? "mapped"
                                : "in-memory"},
           {"cold", o.cold},
           {"cold_check", cold_check},
           {"prefetch", o.prefetch},
           {"prefetch_stats", prefetcher ? prefetcher->stats() : json(nullptr)},
           {"config_file", o.config_file.empty() ? json(nullptr) : json(o.config_file)},
           {"config", o.config}}},
         {"prompt_tokens", result.prompt_tokens},
         {"generated_tokens", g.tokens},
         {"generated_text", g.text},
         {"stopped_at_end_of_generation", g.stopped_at_eog},
         {"interrupted", g.interrupted},
         {"steps_done", g.steps},
         {"timings", timings},
         {"memory", {{"runtime_bytes", result.runtime_bytes}, {"kv_cache_bytes", result.kv_cache_bytes}}},
         {"weight_cache", store ? weight_cache_json(*store, o.prefetch) : json(nullptr)},
         {"trace", counts},
         {"files",
          {{"trace", "trace.bin"},
           {"memory_map", "memory-map.json"},
           {"steps", "steps.jsonl"},
           {"buffers", "buffers.json"},
           {"graphs", "graphs/index.json"}}}};
  dir->write_json("run.json", run);
  dir->commit();
  result.run_dir = dir->final_path();
  result.run_json = run;
  return result;
}

}  // namespace tt
