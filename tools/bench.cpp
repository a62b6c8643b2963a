// tensortrace bench -m MODEL [-p 128] [-n 64] [-t THREADS] [-r REPS] [--trace] [--kernel-isa avx2]: prompt processing
// and generation speed as mean ± standard deviation over repetitions after a warm-up, in llama-bench's table layout,
// and generation's weight-read rate beside the machine's read bandwidth. tensortrace bench --bandwidth [-t THREADS]:
// that bandwidth alone. tensortrace bench --io -m MODEL [--json]: the model file's sequential and 4 KiB-random read
// rates from storage (O_DIRECT, or after posix_fadvise(DONTNEED) where the filesystem refuses it).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <thread>

#include "analysis/bandwidth.h"
#include "analysis/sample_stats.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/work_split.h"
#include "model/generate.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"
#include "tools/command.h"
#include "tracer/tracer.h"

namespace tt::cli {
namespace {

struct BenchArgs {
  std::string model;
  int n_prompt = 128;
  int n_gen = 64;
  int depth = 0;  // tokens in the cache before each test (llama-bench's -d)
  int threads = 0;
  int reps = 5;
  bool trace = false;
  bool trace_overhead = false;  // alternate untraced and traced repetitions in one process
  bool bandwidth = false;       // only the machine's read bandwidth
  bool mmap = false;            // map the model file in place (run --mmap)
  bool io = false;              // only the model file's storage read rates
  bool json = false;            // --io: print JSON
  std::string kernel_isa = "auto";
  std::string probe = "auto";  // generation's bandwidth probe: each (after every repetition), once, auto
};

using analysis::SampleSummary;
using analysis::summarize;

// What the issue asks of tracing (docs/performance.md): generation with the default tracing within 3% of untraced
// where an untraced step takes at least 1 ms, else at most 15 us added a step; read from the median's interval at
// this confidence.
constexpr double kTracingTarget = 0.97, kLongStepUs = 1000, kMaxAddedUs = 15, kConfidence = 0.95;

// One measured run: tokens/s of the prompt pass (n_prompt > 0) or of n_gen decode steps, the time spent in the
// tracer's callbacks a token (0 untraced) and, for generation, in its steps.jsonl lines on the pool's second thread
// (in the background, beside the next step's preparation), and the engine's threads' round trip just before
// (ThreadPool::round_trip_ns: on a VM, which host cores the run met).
struct Measured {
  double tokens_per_s = 0, tracer_us_per_token = 0, line_us_per_token = 0, round_trip_ns = 0;
};
constexpr int kRoundTrips = 2000;
Measured measure(const Model& model, const BenchArgs& a, bool prompt_test, bool trace, int rep) {
  Engine engine(model, {a.depth + std::max(a.n_prompt, a.n_gen + 1) + 8, a.threads, GgmlType::F16});
  const int32_t bos = std::max(model.tokenizer->bos(), 0);
  auto token = [&](int64_t i) { return i == 0 ? bos : static_cast<int32_t>(i * 7919 % model.config.n_vocab); };
  // The cache filled first, untimed and untraced, as llama-bench's -d; in batches of its n_ubatch, 512, which bound
  // the activations' memory.
  constexpr int kFillBatch = 512;
  for (int done = 0; done < a.depth;) {
    GenerateOptions fill;
    for (; done < a.depth && static_cast<int>(fill.prompt_tokens.size()) < kFillBatch; ++done)
      fill.prompt_tokens.push_back(token(done));
    fill.n_predict = 0;
    generate(engine, fill, nullptr, nullptr);
  }
  GenerateOptions go;
  go.sampling.temperature = 0;
  if (prompt_test) {
    for (int i = 0; i < a.n_prompt; ++i) go.prompt_tokens.push_back(token(a.depth + i));
    go.n_predict = 0;
  } else {
    go.prompt_tokens = {token(a.depth)};
    go.n_predict = a.n_gen + 1;  // n_gen decode steps after the one-token prompt
  }
  std::unique_ptr<RunDirWriter> dir;
  std::unique_ptr<Tracer> tracer;
  if (trace) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              fmt::format("tt-bench-{}-{}-{}", ::getpid(), prompt_test ? "pp" : "tg", rep))
                                 .string();
    std::filesystem::remove_all(path);
    dir = std::make_unique<RunDirWriter>(path);  // removed again when it goes out of scope (never committed)
    tracer = std::make_unique<Tracer>(*dir, model, TraceOptions{}, engine.pool(), now_ns());
  }
  const double round_trip = engine.pool().round_trip_ns(kRoundTrips);
  GenerateResult r = generate(engine, go, tracer.get(), nullptr);
  // The tracer's callbacks in the measured steps only (tg: not the one-token prompt's step, whose new graph the
  // tracer describes once).
  if (prompt_test)
    return {a.n_prompt / (r.prompt_ns / 1e9), tracer ? tracer->self_ns() / 1e3 / a.n_prompt : 0.0, 0.0, round_trip};
  const double ns = std::accumulate(r.step_ns.begin(), r.step_ns.end(), 0.0), steps = r.step_ns.size();
  return {steps / (ns / 1e9), tracer ? tracer->generate_self_ns() / 1e3 / steps : 0.0,
          tracer ? tracer->generate_line_ns() / 1e3 / steps : 0.0, round_trip};
}

// The pairs grouped by where they ran: a pair whose two runs' round trips are within kSamePlace of each other ran
// in one placement, and such pairs group with their neighbours in round trip up to a jump of kSamePlace (on this
// kind of VM: ~30 ns two hardware threads of one core, ~50-80 ns one core complex, ~330 ns two). Per group: pairs,
// round trips, median ratio and median added us a token; then the pairs whose runs met different placements.
std::string overhead_by_round_trip(const std::string& test, const std::vector<double>& ratios,
                                   const std::vector<double>& added_us,
                                   const std::vector<std::vector<double>>& round_trips) {
  constexpr double kSamePlace = 1.5;
  struct Pair {
    double trip, ratio, added;
  };
  std::vector<Pair> same;
  size_t mixed = 0;
  for (size_t r = 0; r < ratios.size(); ++r) {
    const auto [lo, hi] = std::minmax(round_trips[0][r], round_trips[1][r]);
    if (hi > kSamePlace * lo)
      ++mixed;
    else
      same.push_back({hi, ratios[r], added_us[r]});
  }
  std::sort(same.begin(), same.end(), [](const Pair& a, const Pair& b) { return a.trip < b.trip; });
  std::string out = fmt::format("{} by the threads' round trip:", test);
  for (size_t begin = 0; begin < same.size();) {
    size_t end = begin + 1;
    while (end < same.size() && same[end].trip <= kSamePlace * same[end - 1].trip) ++end;
    std::vector<double> ratio, added;
    for (size_t i = begin; i < end; ++i) ratio.push_back(same[i].ratio), added.push_back(same[i].added);
    // Each placement's own interval: the overhead differs between them by more than the target's margin.
    const analysis::MedianInterval interval = analysis::median_interval(ratio, kConfidence);
    out += fmt::format(
        " {} pairs at {:.0f}-{:.0f} ns, median ratio {:.3f} ({:.1f}% interval {:.3f}-{:.3f}), median "
        "{:.1f} us a token;",
        end - begin, same[begin].trip, same[end - 1].trip, summarize(ratio).median, 100 * interval.coverage,
        interval.low, interval.high, summarize(added).median);
    begin = end;
  }
  return out + fmt::format(" {} pairs whose two runs met different round trips", mixed);
}

// The roof of generation: a read of an array far beyond the caches (analysis::ReadProbe), with 1 thread and with
// the benchmark's threads.
constexpr uint64_t kBandwidthArrayBytes = 2ull << 30;

// Generation's weight-read rate against the roof: with `roofs` (--probe each, or auto where the weights stream from
// memory), each repetition against the probe read right after it (analysis::roof_share); without, the probe read
// once after the runs, since a probe between repetitions slows a cached model's next one (docs/performance.md
// "Method").
void print_roof(const std::string& test, int threads, uint64_t read_per_token, const std::vector<double>& tps,
                const std::vector<double>& roofs) {
  const std::string with = fmt::format("with {} thread{}", threads, threads > 1 ? "s" : "");
  if (roofs.empty()) {
    const double reads = summarize(tps).median * read_per_token,
                 roof = analysis::measured_bandwidth(threads, kBandwidthArrayBytes).multi_thread_bytes_per_s;
    fmt::print(stderr,
               "{}: weight reads {:.2f} GB/s ({:.1f} MiB per token, median), {:.0f}% of the machine's read bandwidth "
               "{:.2f} GB/s {} (read once after the runs)\n",
               test, reads / 1e9, read_per_token / 1048576.0, 100 * reads / roof, roof / 1e9, with);
    return;
  }
  const analysis::RoofShare r = analysis::roof_share(tps, roofs, read_per_token);
  fmt::print(stderr,
             "{}: weight reads {:.2f} GB/s ({:.1f} MiB per token, median), {:.0f}% of the machine's read bandwidth "
             "(median over the repetitions of each against the probe read after it: {:.0f}-{:.0f}%; the probe "
             "{:.2f} GB/s, {:.2f}-{:.2f}, {})\n",
             test, r.reads_median / 1e9, read_per_token / 1048576.0, 100 * r.share_median, 100 * r.share_low,
             100 * r.share_high, r.roof_median / 1e9, r.roof_low / 1e9, r.roof_high / 1e9, with);
}

int bench_bandwidth(const BenchArgs& a) {
  const analysis::Bandwidth& bw = analysis::measured_bandwidth(a.threads, kBandwidthArrayBytes);
  fmt::print("read bandwidth ({} MiB array, best of 3 passes): {:.2f} GB/s with 1 thread", bw.array_bytes >> 20,
             bw.single_thread_bytes_per_s / 1e9);
  if (a.threads > 1) fmt::print(", {:.2f} GB/s with {} threads", bw.multi_thread_bytes_per_s / 1e9, a.threads);
  fmt::print("\n");
  return 0;
}

// The storage read rates of a file: sequential (4 MiB reads from the start, up to kIoSequentialBytes) and random
// (4 KiB reads at 4 KiB-aligned offsets, up to kIoRandomReads or kIoRandomNs), past the page cache.
constexpr uint64_t kIoChunk = 4 << 20, kIoBlock = 4096, kIoSequentialBytes = 1ull << 30, kIoRandomReads = 20000,
                   kIoRandomNs = 2'000'000'000;

struct IoRates {
  double sequential = 0, random_4k = 0;  // bytes/s
  uint64_t sequential_bytes = 0, random_reads = 0;
  std::string method;  // "O_DIRECT", or "fadvise(DONTNEED)" with why O_DIRECT was not used
  std::string note;
};

IoRates measure_io(const std::string& path) {
  const int plain = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (plain < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  const off_t end = lseek(plain, 0, SEEK_END);
  if (end < static_cast<off_t>(kIoBlock)) {
    ::close(plain);
    fail("{}: {} bytes, smaller than one {}-byte block to read", path, end < 0 ? 0 : end, kIoBlock);
  }
  const uint64_t size = static_cast<uint64_t>(end);
  void* mem = std::aligned_alloc(kIoBlock, kIoChunk);
  if (!mem) throw std::bad_alloc();
  std::unique_ptr<void, decltype(&std::free)> buf(mem, &std::free);
  IoRates r;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  std::string refused = fd < 0 ? std::strerror(errno) : "";
  if (fd >= 0 && pread(fd, buf.get(), kIoBlock, 0) < 0) {  // some filesystems open with O_DIRECT, then refuse reads
    refused = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  if (fd >= 0) {
    r.method = "O_DIRECT";
  } else {
    r.method = "fadvise(DONTNEED)";
    r.note = fmt::format("the filesystem refuses O_DIRECT ({}): measured after posix_fadvise(DONTNEED)", refused);
    fd = plain;
  }
  auto drop_cache = [&] {
    if (fd == plain) posix_fadvise(plain, 0, 0, POSIX_FADV_DONTNEED);
  };
  auto read_at = [&](uint64_t offset, uint64_t n) {
    const ssize_t got = pread(fd, buf.get(), n, static_cast<off_t>(offset));
    if (got < 0) fail("{}: read at offset {}: {}", path, offset, std::strerror(errno));
    return static_cast<uint64_t>(got);
  };
  drop_cache();
  const uint64_t want = std::min(size / kIoBlock * kIoBlock, kIoSequentialBytes);
  uint64_t t0 = now_ns();
  for (uint64_t at = 0; at < want;) {
    const uint64_t got = read_at(at, std::min(kIoChunk, want - at));
    if (got == 0) break;
    at += got, r.sequential_bytes += got;
  }
  r.sequential =
      static_cast<double>(r.sequential_bytes) * 1e9 / static_cast<double>(std::max<uint64_t>(1, now_ns() - t0));
  drop_cache();
  if (fd == plain) posix_fadvise(plain, 0, 0, POSIX_FADV_RANDOM);
  std::mt19937_64 rng(42);
  const uint64_t blocks = size / kIoBlock;
  t0 = now_ns();
  while (r.random_reads < kIoRandomReads && now_ns() - t0 < kIoRandomNs) {
    read_at(rng() % blocks * kIoBlock, kIoBlock);
    ++r.random_reads;
  }
  r.random_4k =
      static_cast<double>(r.random_reads * kIoBlock) * 1e9 / static_cast<double>(std::max<uint64_t>(1, now_ns() - t0));
  if (fd != plain) ::close(fd);
  ::close(plain);
  return r;
}

int bench_io(const BenchArgs& a) {
  if (a.model.empty()) fail("bench --io: -m MODEL is required (the file whose storage is measured)");
  const IoRates r = measure_io(a.model);
  if (a.json) {
    nlohmann::json j = {{"model", a.model},
                        {"io",
                         {{"method", r.method},
                          {"sequential_bytes_per_s", r.sequential},
                          {"sequential_bytes", r.sequential_bytes},
                          {"random_4k_bytes_per_s", r.random_4k},
                          {"random_4k_reads", r.random_reads},
                          {"note", r.note}}}};
    fmt::print("{}\n", j.dump(1));
  } else {
    if (!r.note.empty()) fmt::print("note: {}\n", r.note);
    fmt::print(
        "storage read rates of {} ({}): sequential {:.1f} MB/s ({:.1f} MiB in 4 MiB reads), 4 KiB random "
        "{:.1f} MB/s ({} reads, {:.0f} IOPS)\n",
        a.model, r.method, r.sequential / 1e6, r.sequential_bytes / 1048576.0, r.random_4k / 1e6, r.random_reads,
        r.random_4k / kIoBlock);
  }
  return 0;
}

int bench(BenchArgs a) {
  if (a.threads <= 0) a.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (a.bandwidth) return bench_bandwidth(a);
  if (a.io) return bench_io(a);
  if (a.json) fail("bench: --json is for --io");
  if (a.model.empty()) fail("bench: -m MODEL is required (unless --bandwidth)");
  limit_kernel_isa(a.kernel_isa);  // before the model's tensors meet the kernel table
  if (a.n_prompt <= 0 && a.n_gen <= 0) fail("nothing to measure: -p and -n are both 0");
  std::string why;
  const FileResidency residency = a.mmap ? FileResidency::MAPPED : default_residency(a.model, &why);
  if (!why.empty()) fmt::print(stderr, "note: {}\n", why);
  std::unique_ptr<Model> model = load_model(a.model, residency);
  uint64_t weight_bytes = 0;
  for (const GgufTensorInfo& t : model->file->tensors()) weight_bytes += t.size_bytes;
  // Generation reads every weight once per token except the embedding table (only one row) and, of each expert
  // tensor, all but the n_expert_used experts the token is routed to.
  const GgufTensorInfo* embd = model->file->find_tensor("token_embd.weight");
  const uint64_t read_set = weight_bytes - (model->weights.output_tied ? 0 : embd->size_bytes);  // over the tokens
  uint64_t read_per_token = read_set;
  for (const LayerWeights& l : model->weights.layers)
    for (const Tensor* t : {l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps})
      if (t) read_per_token -= t->row_size() * t->ne[1] * (t->ne[2] - model->config.n_expert_used);  // unused slabs

  fmt::print("| model | size | params | backend | threads | trace | test | t/s |\n");
  fmt::print("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |\n");
  uint64_t params = 0;
  for (const GgufTensorInfo& t : model->file->tensors()) params += t.n_elements();
  const std::string name = std::filesystem::path(a.model).stem().string();
  auto row = [&](const std::string& test, bool trace, const SampleSummary& s) {
    fmt::print("| {} | {:.2f} MiB | {:.2f} M | CPU {} | {} | {} | {} | {:.2f} ± {:.2f} |\n", name,
               model->file->file_size() / 1048576.0, params / 1e6, kernel_isa(), a.threads, trace ? "on" : "off", test,
               s.mean, s.std);
    std::fflush(stdout);
  };
  // --trace-overhead: each repetition is a pair, untraced and traced, in alternating order so that the machine's
  // drift (large on a shared VM) falls on both alike; the overhead is the mean of the pairs' ratios.
  std::vector<bool> modes = a.trace_overhead ? std::vector<bool>{false, true} : std::vector<bool>{a.trace};
  std::vector<std::string> overhead_lines;
  // Generation from memory (--probe auto: the weights the tokens read, whichever experts they take, beyond the
  // last-level cache): the probe is read after each repetition, since the VM's spells move both by 10-30% (its
  // 2 GiB are held meanwhile).
  const bool probe_each = a.probe == "each" || (a.probe == "auto" && analysis::streams_from_memory(
                                                                         read_set, analysis::last_level_cache_bytes()));
  for (bool prompt_test : {true, false}) {
    if ((prompt_test ? a.n_prompt : a.n_gen) <= 0) continue;
    const std::string test = (prompt_test ? fmt::format("pp{}", a.n_prompt) : fmt::format("tg{}", a.n_gen)) +
                             (a.depth > 0 ? fmt::format(" @ d{}", a.depth) : "");
    std::unique_ptr<analysis::ReadProbe> probe;
    if (!prompt_test && probe_each) probe = std::make_unique<analysis::ReadProbe>(kBandwidthArrayBytes);
    std::vector<double> roofs;
    for (bool trace : modes) measure(*model, a, prompt_test, trace, -1);  // warm-up
    std::vector<std::vector<double>> tps(modes.size()), round_trips(modes.size());
    std::vector<double> tracer_us, line_us;  // of the traced repetitions
    for (int r = 0; r < a.reps; ++r) {
      for (size_t k = 0; k < modes.size(); ++k) {
        const size_t m = r % 2 ? modes.size() - 1 - k : k;
        const Measured result = measure(*model, a, prompt_test, modes[m], r);
        tps[m].push_back(result.tokens_per_s);
        round_trips[m].push_back(result.round_trip_ns);
        if (modes[m]) tracer_us.push_back(result.tracer_us_per_token), line_us.push_back(result.line_us_per_token);
      }
      if (probe) roofs.push_back(probe->bytes_per_s(a.threads));
    }
    for (size_t m = 0; m < modes.size(); ++m) row(test, modes[m], summarize(tps[m]));
    if (!prompt_test) print_roof(test, a.threads, read_per_token, tps[0], roofs);
    if (a.threads > 1) {
      std::vector<double> all_round_trips;
      for (const auto& v : round_trips) all_round_trips.insert(all_round_trips.end(), v.begin(), v.end());
      const auto [fastest, slowest] = std::minmax_element(all_round_trips.begin(), all_round_trips.end());
      fmt::print(stderr, "{}: threads 0 and 1's round trip before each run: median {:.0f} ns ({:.0f}-{:.0f})\n", test,
                 summarize(all_round_trips).median, *fastest, *slowest);
    }
    if (a.trace_overhead) {
      // The ratio, and the time tracing adds to a token (a step for tg): steadier than the ratio when the machine's
      // speed drifts, since the tracer's fixed work does not scale with the step. Medians too: on a shared VM a few
      // pairs that met a slow spell of one mode move the mean by more than tracing does.
      std::vector<double> ratios, added_us;
      for (int r = 0; r < a.reps; ++r) {
        ratios.push_back(tps[1][r] / tps[0][r]);
        added_us.push_back(1e6 / tps[1][r] - 1e6 / tps[0][r]);
      }
      // The tracer's callbacks are the part of the added time on the run thread between the engine's ops; the rest
      // is the ops' timing, what the tracer's work does to the caches and the other threads, and a line that outlasts
      // the next step's preparation.
      const SampleSummary s = summarize(ratios), added = summarize(added_us), callbacks = summarize(tracer_us),
                          lines = summarize(line_us);
      overhead_lines.push_back(fmt::format(
          "{}: traced/untraced {:.3f} ± {:.3f} (median {:.3f}) over {} pairs (overhead {:.1f}%, {:.1f} ± {:.1f} us a "
          "token (median {:.1f}), of which {:.1f} ± {:.1f} us in the tracer's callbacks{})",
          test, s.mean, s.std, s.median, a.reps, 100 * (1 - s.mean), added.mean, added.std, added.median,
          callbacks.mean, callbacks.std,
          prompt_test ? ""
                      : fmt::format("; its steps.jsonl line took {:.1f} ± {:.1f} us on thread 1, beside the next "
                                    "step's preparation",
                                    lines.mean, lines.std)));
      // The median ratio's interval, and for generation what it says of the target: single runs of 20 pairs have
      // moved by ±3% on this VM, so a median alone does not tell 0.97 from 0.95.
      const analysis::MedianInterval interval = analysis::median_interval(ratios, kConfidence);
      const analysis::MedianInterval added_interval = analysis::median_interval(added_us, kConfidence);
      std::vector<double> untraced_us;
      for (int r = 0; r < a.reps; ++r) untraced_us.push_back(1e6 / tps[0][r]);
      const bool long_steps = summarize(untraced_us).median >= kLongStepUs;
      std::string verdict;
      if (interval.coverage < kConfidence)
        verdict = fmt::format("undecided ({} pairs are too few for a {:.0f}% interval)", a.reps, 100 * kConfidence);
      else if (long_steps)
        verdict = analysis::verdict_name(analysis::compare_median(interval, kTracingTarget));
      else  // fewer added microseconds is better
        verdict = analysis::verdict_name(analysis::compare_median(added_interval, kMaxAddedUs), true);
      const std::string rule =
          prompt_test  ? ""
          : long_steps ? fmt::format("; an untraced step takes {:.0f} us or more: within {:.0f}% of untraced: {}",
                                     kLongStepUs, 100 * (1 - kTracingTarget), verdict)
                       : fmt::format(
                             "; an untraced step takes under {:.0f} us: at most {:.0f} us added a step (median {:.1f}, "
                             "interval {:.1f}-{:.1f}): {}",
                             kLongStepUs, kMaxAddedUs, added.median, added_interval.low, added_interval.high, verdict);
      overhead_lines.push_back(
          fmt::format("{}: median ratio {:.3f}, {:.1f}% interval {:.3f}-{:.3f} (order statistics of the {} pairs){}",
                      test, s.median, 100 * interval.coverage, interval.low, interval.high, a.reps, rule));
      // The same split by where the pair ran: on a VM the two threads sometimes land on cores that pass a cache
      // line 5x slower (another core complex), and tracing's work on data the other thread wrote costs more there.
      if (a.threads > 1) overhead_lines.push_back(overhead_by_round_trip(test, ratios, added_us, round_trips));
    }
  }
  if (!overhead_lines.empty()) fmt::print("\ntracing overhead ({} threads)\n", a.threads);
  for (const std::string& line : overhead_lines) fmt::print("- {}\n", line);
  return 0;
}

RegisterCommand reg("bench", "Measure prompt and generation speed (llama-bench's table)", 60, [](CLI::App& cmd) {
  auto a = std::make_shared<BenchArgs>();
  add_config_option(cmd);
  cmd.add_option("-m,--model", a->model, "GGUF model file (required unless --bandwidth)");
  cmd.add_option("-p,--n-prompt", a->n_prompt, "Prompt tokens (0: skip)")->check(range(0, 1 << 16));
  cmd.add_option("-n,--n-gen", a->n_gen, "Generated tokens (0: skip)")->check(range(0, 1 << 16));
  cmd.add_option("-d,--depth", a->depth,
                 "Tokens in the KV cache before each test (filled untimed, as llama-bench's -d): generation and "
                 "prompts at that context length")
      ->check(range(0, 1 << 20));
  cmd.add_option("-t,--threads", a->threads, "Threads (default: all cores)")->check(range(1, kMaxThreads));
  cmd.add_option("-r,--repetitions", a->reps, "Repetitions after the warm-up")->check(range(1, 1000));
  cmd.add_flag("--trace", a->trace, "Trace (default contents) while measuring");
  cmd.add_flag("--mmap", a->mmap, "Map the model file in place instead of reading it into memory at load (as run's)");
  cmd.add_flag("--trace-overhead", a->trace_overhead,
               "Alternate untraced and traced repetitions and report the traced/untraced ratio and the time tracing "
               "adds to a token");
  cmd.add_flag("--bandwidth", a->bandwidth,
               "Only measure the machine's memory read bandwidth (the roof of generation) with 1 and -t threads");
  cmd.add_flag("--io", a->io,
               "Only measure the model file's storage read rates, sequential and 4 KiB random (O_DIRECT, past the "
               "page cache)");
  cmd.add_flag("--json", a->json, "With --io: print the rates as JSON (analyze --io-rates reads it)");
  cmd.add_option("--probe", a->probe,
                 "Generation's bandwidth probe: read after each repetition and each taken against its own (each), "
                 "once after the runs (once), or each where the weights exceed the last-level cache the CPU reports "
                 "(auto; a VM may report another size than the host's)")
      ->check(CLI::IsMember({"auto", "each", "once"}));
  add_kernel_isa_option(cmd, a->kernel_isa, "the table's backend column names the one used");
  return [a]() { return bench(*a); };
});

}  // namespace
}  // namespace tt::cli
