// tensortrace analyze RUN_DIR [RUN_DIR...] [--json] [-o REPORT_DIR] [--cache-sim SIZES] [--policy P,...]
//                            [--granularity page|tensor] [--expert-cache SIZES [--scope global|per-layer]
//                            [--prefetch none|predicted|previous-token] [--read-gbps X]] [--compare RUN_B]
//                            [--io-rates BENCH_JSON]
// Access order, hot/cold bytes, file versus buffers, predictability, memory pressure, speed, I/O and cache
// simulation of one run (docs/analysis.md); with --compare, a side-by-side of two runs; with several runs and
// --expert-cache, the expert-cache replay of their routing pooled as one workload.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/analysis.h"
#include "core/error.h"
#include "tools/command.h"

namespace tt::cli {
namespace {

struct AnalyzeArgs {
  std::vector<std::string> run_dirs;
  std::string report_dir, cache_sim, policy, granularity = "page", compare, expert_cache, scope = "global",
                                             prefetch = "none", io_rates;
  bool json = false;
  uint64_t page_bytes = 4096;
  double read_gbps = 0;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  if (!f || !(f << text)) fail("cannot write '{}'", path);
}

int run(const AnalyzeArgs& a) {
  using namespace analysis;
  AnalyzeOptions opt;
  for (const std::string& s : split(a.cache_sim)) opt.cache_sizes.push_back(parse_size(s));
  // Each simulation's own default set of policies unless --policy names them.
  if (!a.policy.empty()) opt.policies = opt.experts.policies = policies_from_list(a.policy);
  if (!a.expert_cache.empty()) opt.experts.sizes = expert_cache_sizes_from_list(a.expert_cache);
  opt.experts.scope = scope_from_name(a.scope);
  opt.experts.prefetch = prefetch_from_name(a.prefetch);
  if (a.run_dirs.size() > 1 && opt.experts.sizes.empty())
    fail("several runs are pooled for the expert-cache replay only: give --expert-cache SIZES");
  opt.experts.read_bytes_per_s = a.read_gbps * 1e9;
  if (a.granularity == "page")
    opt.granularity = Granularity::PAGE;
  else if (a.granularity == "tensor")
    opt.granularity = Granularity::TENSOR;
  else
    fail("--granularity must be page or tensor, got '{}'", a.granularity);
  opt.page_bytes = a.page_bytes;
  if (!a.io_rates.empty()) opt.storage = read_storage_rates(a.io_rates);

  const RunData run = load_run(a.run_dirs.front());
  if (!opt.experts.sizes.empty() && run.trace.routing.empty())
    fail("--expert-cache: '{}' has no routing records (not a mixture-of-experts run)", a.run_dirs.front());
  Report rep = analyze(run, opt);
  if (a.run_dirs.size() > 1) {
    std::vector<RunData> others;
    others.reserve(a.run_dirs.size() - 1);
    for (size_t i = 1; i < a.run_dirs.size(); ++i) others.push_back(load_run(a.run_dirs[i]));
    std::vector<const RunData*> all = {&run};
    for (const RunData& o : others) all.push_back(&o);
    rep.pooled = pooled_expert_cache(all, opt.experts);
  }
  nlohmann::json report = to_json(rep);
  std::string text = render_text(rep);
  if (!a.compare.empty()) {
    const RunData other = load_run(a.compare);
    nlohmann::json cmp = compare_runs(run, other);
    report["comparison"] = cmp;
    text += "\n== Comparison ==\n" + render_comparison_text(cmp);
  }
  if (!a.report_dir.empty()) {
    std::filesystem::create_directories(a.report_dir);
    write_file(a.report_dir + "/analysis.json", report.dump(1) + "\n");
    write_file(a.report_dir + "/analysis.txt", text);
    std::vector<std::string> figs = write_figures(rep, a.report_dir);
    fmt::print(stderr, "wrote {}/analysis.json, analysis.txt and {} figures\n", a.report_dir, figs.size());
  }
  if (a.json)
    fmt::print("{}\n", report.dump(1));
  else
    fmt::print("{}", text);
  return 0;
}

RegisterCommand reg(
    "analyze", "Analyse a run: access order, hot/cold bytes, I/O, speed, cache simulation", 40, [](CLI::App& cmd) {
      auto a = std::make_shared<AnalyzeArgs>();
      cmd.add_option("run_dir", a->run_dirs,
                     "Run directory; several (with --expert-cache): their routing replayed as one workload (the "
                     "pooled table), every other section of the first run only")
          ->required();
      cmd.add_flag("--json", a->json, "Print the report as JSON");
      cmd.add_option("-o,--output", a->report_dir, "Also write analysis.json, analysis.txt and SVG figures here");
      cmd.add_option("--cache-sim", a->cache_sim, "Simulate caches of these capacities (e.g. 256K,1M,64M)");
      cmd.add_option("--policy", a->policy,
                     "Cache policies: lru, lfu, fifo, lru-2, least-stale, opt (comma-separated; default: lru, lfu, "
                     "fifo, opt for --cache-sim, all for --expert-cache)");
      cmd.add_option("--granularity", a->granularity, "Cache unit: page or tensor");
      cmd.add_option("--io-rates", a->io_rates,
                     "A budgeted run: show its read rate beside the storage's (the JSON of bench --io --json)");
      cmd.add_option("--page-size", a->page_bytes, "Page size in bytes for page granularity and reuse distances")
          ->check(range<uint64_t>(1, analysis::kMaxPageBytes));
      cmd.add_option(
          "--expert-cache", a->expert_cache,
          "MoE runs: replay the routing through expert caches of these sizes: experts per layer (8), experts "
          "in all (96slots), percent of the expert bytes (25%) or bytes (256M)");
      cmd.add_option("--scope", a->scope,
                     "Expert cache: one cache for all layers (global) or one per layer (per-layer)");
      cmd.add_option("--prefetch", a->prefetch,
                     "Expert cache: before each layer's loads, prefetch the experts predicted for it (predicted: "
                     "needs run --moe-predict), those of the previous token (previous-token), or none")
          ->check(CLI::IsMember({"none", "predicted", "previous-token"}));
      cmd.add_option("--read-gbps", a->read_gbps,
                     "Expert cache: storage read rate in GB/s for the load time per token (default: the rate the run "
                     "measured with run --io-trace; without it, no load time)")
          ->check(range<double>(0.001, 1e6));
      cmd.add_option("--compare", a->compare, "Compare with a second run (e.g. cold without vs with --prefetch)");
      return [a]() { return run(*a); };
    });

}  // namespace
}  // namespace tt::cli
