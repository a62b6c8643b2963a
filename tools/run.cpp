// tensortrace run -m MODEL -p PROMPT [...]: generate text (llama.cpp's flag conventions) and trace it into a run
// directory (docs/run-directory.md).
#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/work_split.h"
#include "quant/quant.h"
#include "tools/command.h"
#include "tracer/experiment.h"

namespace tt::cli {
namespace {

struct RunArgs {
  ExperimentOptions exp;
  std::string prompt_file;
  int threads = 0;
  std::string kv_type = "f16";
  bool no_trace = false;
  std::string kernel_isa = "auto";
  std::string llamacpp_build = "auto";
};

// The first SIGINT or SIGTERM stops the run after its current step (the run directory is finished, run.json says
// interrupted); a second one ends the process at once. A signal handler reaches only static state: the signal that
// asked (for the exit status) and the stop request the engine checks between steps.
std::atomic<int> stop_signal{0};
std::atomic<bool> stop_requested{false};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "used in a signal handler");

void on_stop_signal(int sig) {
  int none = 0;
  if (!stop_signal.compare_exchange_strong(none, sig)) {  // the second signal: the default action, now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  stop_requested.store(true);
}

void stop_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM})
    if (sigaction(sig, &sa, nullptr) != 0) fail("cannot install the {} handler", sig == SIGINT ? "SIGINT" : "SIGTERM");
}

std::string read_prompt_file(const std::string& path) {
  try {
    const MappedFile file(path);  // names the path when missing, a directory, unreadable or empty
    return std::string(reinterpret_cast<const char*>(file.data()), file.size());
  } catch (const Error& e) {
    fail("-f: {}", e.what());
  }
}

int run(RunArgs a) {
  limit_kernel_isa(a.kernel_isa);  // before the model's tensors meet the kernel table
  if (a.llamacpp_build != "auto")
    a.exp.llamacpp_build =
        a.llamacpp_build == "amd-avx512" ? LlamaCppBuild::kAmdAvx512 : LlamaCppBuild::kIntelAvx512Fp16;
  ExperimentOptions& o = a.exp;
  if (!o.prompt.empty() && !a.prompt_file.empty()) fail("give only one of -p PROMPT or -f PROMPT_FILE");
  if (!a.prompt_file.empty()) o.prompt = read_prompt_file(a.prompt_file);
  if (o.prompt.empty()) fail("the prompt is empty (give -p PROMPT or -f PROMPT_FILE)");
  o.n_threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::optional<GgmlType> kv = type_from_name(a.kv_type);
  if (!kv || (*kv != GgmlType::F16 && *kv != GgmlType::F32)) fail("--kv-type must be f16 or f32, got '{}'", a.kv_type);
  o.kv_type = *kv;
  o.trace = !a.no_trace;
  if (a.no_trace && !o.run_dir.empty()) fail("-o and --no-trace contradict each other");

  stop_on_signals();
  o.stop = &stop_requested;
  auto print = [](std::string_view text) {
    if (text.empty()) return;  // an empty piece's data() may be null, which fwrite must not get
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  // The prompt once the model has loaded and the run is set up, so that no error follows it on stdout.
  ExperimentResult r = run_experiment(o, print, [&] { print(o.prompt); });
  std::fputc('\n', stdout);
  std::fflush(stdout);

  const GenerateResult& g = r.generation;
  uint64_t gen_ns = 0;
  for (uint64_t s : g.step_ns) gen_ns += s;
  fmt::print(stderr, "load: {:.1f} ms\n", r.load_ns / 1e6);
  fmt::print(stderr, "prompt: {} tokens in {:.2f} ms ({:.1f} tokens/s)\n", r.prompt_tokens.size(), g.prompt_ns / 1e6,
             r.prompt_tokens.size() / (g.prompt_ns / 1e9));
  if (!g.step_ns.empty())
    fmt::print(stderr, "generation: {} tokens, {} decode steps in {:.2f} ms ({:.1f} tokens/s)\n", g.tokens.size(),
               g.step_ns.size(), gen_ns / 1e6, g.step_ns.size() / (gen_ns / 1e9));
  fmt::print(stderr, "memory beyond the model file: {:.2f} MiB (KV cache {:.2f} MiB)\n", r.runtime_bytes / 1048576.0,
             r.kv_cache_bytes / 1048576.0);
  if (!r.run_dir.empty()) {
    const auto& t = r.run_json["trace"];
    fmt::print(stderr, "trace: {} ops, {} steps, {:.2f} MiB -> {}\n", t["ops"].get<uint64_t>(),
               t["steps"].get<uint64_t>(), t["trace_bytes"].get<uint64_t>() / 1048576.0, r.run_dir);
    fmt::print(stderr, "look at it:\n  tensortrace dump {} --limit 20\n  tensortrace serve {}\n", r.run_dir, r.run_dir);
  }
  if (const int sig = stop_signal.load()) {
    fmt::print(stderr, "interrupted by {} after {} steps\n", sig == SIGINT ? "SIGINT" : "SIGTERM", g.steps);
    return 128 + sig;  // as a shell reports a process the signal ended
  }
  return 0;
}

RegisterCommand reg(
    "run", "Generate text from a prompt and trace every op into a run directory", 20, [](CLI::App& cmd) {
      auto a = std::make_shared<RunArgs>();
      ExperimentOptions& o = a->exp;
      add_config_option(cmd, [a](const std::string& path, const nlohmann::json& values) {
        a->exp.config_file = path;
        a->exp.config = values;
      });
      cmd.add_option("-m,--model", o.model_path, "GGUF model file")->required();
      cmd.add_option("-p,--prompt", o.prompt, "Prompt text");
      cmd.add_option("-f,--file", a->prompt_file, "Read the prompt from a file");
      cmd.add_option("-n,--n-predict", o.n_predict, "Tokens to generate")->check(range(0, 1 << 20));
      cmd.add_option("-t,--threads", a->threads, "Threads (default: all cores)")->check(range(1, kMaxThreads));
      cmd.add_option("-c,--ctx-size", o.n_ctx, "Context size (default: the model's, at most 4096)")
          ->check(range(1, 1 << 20));
      cmd.add_option("-s,--seed", o.sampling.seed, "Sampling seed")->check(range<uint32_t>(0, UINT32_MAX));
      cmd.add_option("--temp", o.sampling.temperature, "Temperature (0: greedy)")->check(range(0.0, 100.0));
      cmd.add_option("--top-k", o.sampling.top_k, "Top-k (0: off)")->check(range(0, 1 << 20));
      cmd.add_option("--top-p", o.sampling.top_p, "Top-p (1: off)")->check(range(0.0, 1.0, Ends::OPEN_LOW));
      cmd.add_option("--min-p", o.sampling.min_p, "Min-p (0: off)")->check(range(0.0, 1.0, Ends::OPEN_HIGH));
      cmd.add_option("--repeat-penalty", o.sampling.repeat_penalty, "Repetition penalty (1: off)")
          ->check(range(0.0, 100.0, Ends::OPEN_LOW));
      cmd.add_option("--repeat-last-n", o.sampling.repeat_last_n, "Tokens the repetition penalty looks back")
          ->check(range(0, 1 << 20));
      cmd.add_option("--kv-type", a->kv_type, "KV cache type: f16 or f32")->check(CLI::IsMember({"f16", "f32"}));
      cmd.add_option("-o,--output", o.run_dir, "Run directory (default: runs/<date-time>-<model>)");
      cmd.add_flag("--overwrite", o.overwrite,
                   "Replace an existing run directory given with -o, and delete its stale .partial (never one "
                   "another process is writing)");
      cmd.add_flag("--no-trace", a->no_trace, "Do not trace (no run directory)");
      cmd.add_flag("--trace-values", o.trace_options.values, "Record min/max/mean/NaN/Inf/hash of every op's output");
      cmd.add_flag("--check-finite", o.trace_options.check_finite, "Stop at the first op producing NaN or Inf");
      cmd.add_option("--logit-top-k", o.trace_options.logit_top_k, "Tokens in each step's logit landscape")
          ->check(range(1, 1000));
      cmd.add_flag("!--no-progress", o.progress, "No progress lines on stderr");
      cmd.add_flag("--io-trace", o.trace_options.io,
                   "Record page-cache residency before each op and faults/storage reads during it (IO records)");
      cmd.add_flag("--mmap", o.mmap,
                   "Map the model file in place (pages from the page cache as touched) instead of reading it into "
                   "memory at load; --cold, --io-trace, --prefetch and --weight-budget always map it");
      cmd.add_flag("--cold", o.cold, "Evict the model file from the page cache before the first step (and check)");
      cmd.add_option("--prefetch", o.prefetch,
                     "Read weights ahead of compute: none, next-layer, from:RUN_DIR (that run's accesses); with "
                     "--weight-budget into the cache on a thread of its own: next-layer loads the next layer's tensors "
                     "as a layer starts, a mixture-of-experts layer's experts as predicted from the hidden state "
                     "(implies --moe-predict); predicted: the same as next-layer, mixture-of-experts models only");
      cmd.add_option("--weight-budget", o.weight_budget,
                     "Serve the weights from storage through a cache of this many bytes (K/M/G) or percent of the "
                     "weights (50%)");
      cmd.add_option("--cache-policy", o.cache_policy,
                     "With --weight-budget: lru, lfu, fifo, lru-2, least-stale, or opt-from:RUN_DIR (Belady on that "
                     "budgeted run's accesses)");
      cmd.add_flag("--direct-io", o.direct_io,
                   "With --weight-budget: read weights with O_DIRECT (past the page cache)");
      cmd.add_flag("--moe-predict", o.moe_predict,
                   "Mixture-of-experts models: predict each next layer's experts from the current layer's FFN input "
                   "(ffn_moe_pred_* ops; trace records, analyze's prediction recall)");
      add_kernel_isa_option(cmd, a->kernel_isa, "run.json records the one used");
      cmd.add_option("--llamacpp-build", a->llamacpp_build,
                     "Whose float order to reproduce where llama.cpp's builds differ by CPU kind: auto (this CPU's), "
                     "intel-avx512fp16, amd-avx512 (docs/engine.md)")
          ->check(CLI::IsMember({"auto", "intel-avx512fp16", "amd-avx512"}));
      return [a]() { return run(*a); };
    });

}  // namespace
}  // namespace tt::cli
