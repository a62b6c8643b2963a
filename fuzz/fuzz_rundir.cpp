// libFuzzer target for what users open: a whole run directory (trace.bin, steps.jsonl, buffers.json, run.json,
// memory-map.json) through the loaders, the analysis, every exporter and the viewer's API handlers. Any input must
// load and go through, or give a tt::Error; never crash, hang, read out of bounds or allocate without bound.
//
// An input is the files' bytes in that order, separated by kSeparator (fuzz/pack_rundir.py packs a real run; a
// missing part is an absent file). trace.bin goes through trace_as_written first: the place where a trace format
// with integrity checks has them recomputed, so mutations reach the records behind them.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "core/error.h"
#include "export/export.h"
#include "serve/api.h"
#include "trace/run_data.h"
#include "trace_seal.h"

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSeparator = "\n--tensortrace-file--\n";
constexpr const char* kFiles[] = {"trace.bin", "steps.jsonl", "buffers.json", "run.json", "memory-map.json"};

template <typename F>
void ignore_error(F&& f) {
  try {
    f();
  } catch (const tt::Error&) {
    // rejected with a message: the expected outcome for most inputs
  }
}

// This process's scratch directory (one per fuzzing process, removed by fuzz/run.sh's scratch cleanup).
const fs::path& scratch() {
  static const fs::path dir = [] {
    std::string templ = (fs::temp_directory_path() / "tt-fuzz-rundir.XXXXXX").string();
    if (!mkdtemp(templ.data())) std::abort();
    return fs::path(templ);
  }();
  return dir;
}

// trace.bin's bytes as the tracer would have written them: its blocks' checksums recomputed (most inputs).
std::string trace_as_written(std::string bytes) {
  seal_most(std::span(reinterpret_cast<uint8_t*>(bytes.data()), bytes.size()));
  return bytes;
}

void write(const fs::path& p, std::string_view bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const fs::path dir = scratch() / "run";
  fs::remove_all(dir);
  fs::create_directories(dir);
  size_t pos = 0;
  for (const char* name : kFiles) {
    if (pos > input.size()) break;
    const size_t end = std::min(input.find(kSeparator, pos), input.size());
    std::string bytes(input.substr(pos, end - pos));
    pos = end + kSeparator.size();
    if (bytes.empty()) continue;
    if (std::string_view(name) == "trace.bin") bytes = trace_as_written(std::move(bytes));
    write(dir / name, bytes);
  }
  const fs::path out = scratch() / "out";
  fs::remove_all(out);
  fs::create_directories(out);

  ignore_error([&] {
    const tt::RunData run = tt::load_run(dir.string());
    ignore_error([&] {
      tt::analysis::AnalyzeOptions opt;
      opt.measure_bandwidth = false;
      opt.cache_sizes = {64 << 10, 1 << 20};
      const tt::analysis::Report report = tt::analysis::analyze(run, opt);
      const nlohmann::json j = tt::analysis::to_json(report);
      const std::string text = tt::analysis::render_text(report);
      tt::analysis::write_figures(report, out.string());
    });
    ignore_error([&] { tt::exporter::export_perfetto(run, (out / "run.perfetto.json").string()); });
    ignore_error([&] { tt::exporter::export_sqlite(run, (out / "run.sqlite").string()); });
    ignore_error([&] { tt::exporter::export_tokens_json(run, (out / "tokens").string()); });
    ignore_error([&] {
      const tt::exporter::RoutingTable table = tt::exporter::routing_table(run);
      tt::exporter::export_routing_npy(table, (out / "routing-npy").string());
      tt::exporter::export_routing_csv(table, (out / "routing.csv").string());
    });
  });
  ignore_error([&] {
    const tt::serve::Api api({dir.string()});
    // Handlers answer every request, errors as 4xx JSON; a 500 is an exception the handler did not expect (a bug).
    auto get = [&](const char* path, const tt::serve::Params& params) {
      const tt::serve::Response r = api.handle(path, params);
      if (r.status >= 500) {
        std::fprintf(stderr, "%s: %d %s\n", path, r.status, r.body.c_str());
        std::abort();
      }
    };
    for (const char* path :
         {"/api/runs", "/api/runs/0", "/api/runs/0/memory-map", "/api/runs/0/steps", "/api/runs/0/ops",
          "/api/runs/0/spans", "/api/runs/0/graph", "/api/runs/0/buffers", "/api/runs/0/heatmap", "/api/runs/0/summary",
          "/api/runs/0/routing", "/api/runs/0/expert-cache", "/api/runs/0/weight-cache"})
      get(path, {});
    get("/api/runs/0/expert-cache", {{"scope", "per-layer"}, {"prefetch", "previous-token"}, {"sizes", "3slots,1%"}});
    get("/api/runs/0/heatmap", {{"cumulative", "0"}, {"step", "1"}});
    get("/api/runs/0/ops", {{"step", "1"}});
    get("/api/runs/0/weight-cache", {{"step", "1"}, {"t0", "5"}, {"t1", "9e9"}, {"offset", "1"}, {"px", "3"}});
  });
  return 0;
}
