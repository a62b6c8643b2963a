// llama-bench's pp and tg measurements, timed the way llama-bench times them (tools/llama-bench: one warm-up, a
// threadpool polling at 50, llama_decode + llama_synchronize per batch or token, random tokens), run through
// node-llama-cpp's prebuilt llama.cpp libraries so that llama.cpp's generation can be set beside `tensortrace
// bench` in one sitting (node-llama-cpp's own calls cost ~12 ms a token). Built by build-bench.sh against the
// headers of the same llama.cpp release; prints rows like `tensortrace bench`'s:
//   llamacpp-bench MODEL.gguf [-p 128] [-n 64] [-d 0] [-t 2] [-r 5]
// -d fills the cache with that many tokens before each pass, untimed (llama-bench's -d, n_depth).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

bool decode(llama_context* ctx, std::vector<llama_token>& tokens) {
  if (llama_decode(ctx, llama_batch_get_one(tokens.data(), static_cast<int32_t>(tokens.size()))) != 0) {
    std::fprintf(stderr, "llamacpp-bench: llama_decode failed\n");
    return false;
  }
  llama_synchronize(ctx);
  return true;
}

// One pass: n_prompt tokens as one batch, or n_gen single-token steps, after n_depth tokens in batches of n_batch
// (untimed); tokens/s.
double run(llama_context* ctx, const llama_vocab* vocab, int n_prompt, int n_gen, int n_depth, int n_batch) {
  llama_memory_clear(llama_get_memory(ctx), false);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  const llama_token first = llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : std::rand() % n_vocab;
  for (int done = 0; done < n_depth;) {
    std::vector<llama_token> tokens(std::min(n_batch, n_depth - done));
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = done + i == 0 ? first : std::rand() % n_vocab;
    if (!decode(ctx, tokens)) std::exit(1);
    done += static_cast<int>(tokens.size());
  }
  const double t0 = now_s();
  if (n_prompt > 0) {
    std::vector<llama_token> tokens(n_prompt);
    tokens[0] = n_depth == 0 ? first : std::rand() % n_vocab;
    for (int i = 1; i < n_prompt; ++i) tokens[i] = std::rand() % n_vocab;
    if (!decode(ctx, tokens)) std::exit(1);
    return n_prompt / (now_s() - t0);
  }
  std::vector<llama_token> token{n_depth == 0 ? first : std::rand() % n_vocab};
  for (int i = 0; i < n_gen; ++i) {
    if (!decode(ctx, token)) std::exit(1);
    token[0] = std::rand() % n_vocab;
  }
  return n_gen / (now_s() - t0);
}

void quiet(ggml_log_level, const char*, void*) {}

}  // namespace

int main(int argc, char** argv) {
  int n_prompt = 128, n_gen = 64, n_depth = 0, threads = 2, reps = 5;
  const char* model_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    int* target = a == "-p"   ? &n_prompt
                  : a == "-n" ? &n_gen
                  : a == "-d" ? &n_depth
                  : a == "-t" ? &threads
                  : a == "-r" ? &reps
                              : nullptr;
    if (target && i + 1 < argc) {
      *target = std::atoi(argv[++i]);
    } else if (!target && !model_path && a[0] != '-') {
      model_path = argv[i];
    } else {
      model_path = nullptr;
      break;
    }
  }
  if (!model_path || n_prompt < 0 || n_gen < 0 || n_depth < 0 || threads < 1 || reps < 1) {
    std::fprintf(stderr, "usage: llamacpp-bench MODEL.gguf [-p 128] [-n 64] [-d 0] [-t 2] [-r 5]\n");
    return 2;
  }
  llama_log_set(quiet, nullptr);
  ggml_backend_load_all_from_path(LLAMACPP_BINS);
  ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (!cpu) {
    std::fprintf(stderr, "llamacpp-bench: no CPU backend in %s\n", LLAMACPP_BINS);
    return 1;
  }
  auto* threadpool_new = reinterpret_cast<decltype(ggml_threadpool_new)*>(
      ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(cpu), "ggml_threadpool_new"));
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(model_path, llama_model_default_params());
  if (!model) {
    std::fprintf(stderr, "llamacpp-bench: cannot load '%s'\n", model_path);
    return 1;
  }
  llama_context_params cparams = llama_context_default_params();
  cparams.n_ctx = static_cast<uint32_t>(n_depth + n_prompt + n_gen + 8);
  cparams.n_batch = cparams.n_ubatch = static_cast<uint32_t>(n_prompt > 512 ? n_prompt : 512);
  cparams.n_threads = cparams.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cparams);
  if (!ctx) {
    std::fprintf(stderr, "llamacpp-bench: cannot make a context for '%s'\n", model_path);
    return 1;
  }
  ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
  tpp.poll = 50;
  ggml_threadpool* pool = threadpool_new(&tpp);
  llama_attach_threadpool(ctx, pool, nullptr);

  std::string name = model_path;
  name = name.substr(name.find_last_of('/') + 1);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf") name.resize(name.size() - 5);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  for (const auto& [p, n] : {std::pair{n_prompt, 0}, std::pair{0, n_gen}}) {
    if (p == 0 && n == 0) continue;
    const int n_batch = static_cast<int>(cparams.n_batch);
    run(ctx, vocab, p, n > 0 ? 1 : 0, n_depth, n_batch);  // warm-up, as llama-bench's
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) v.push_back(run(ctx, vocab, p, n, n_depth, n_batch));
    double mean = 0, sd = 0;
    for (double x : v) mean += x / v.size();
    for (double x : v) sd += (x - mean) * (x - mean);
    sd = std::sqrt(sd / (v.size() > 1 ? v.size() - 1 : 1));
    const std::string depth = n_depth > 0 ? " @ d" + std::to_string(n_depth) : "";
    std::printf("| %s | llama.cpp | %d | %s%d%s | %.2f ± %.2f |\n", name.c_str(), threads, p > 0 ? "pp" : "tg",
                p > 0 ? p : n, depth.c_str(), mean, sd);
  }
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
