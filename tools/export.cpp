// tensortrace export RUN_DIR --format perfetto|sqlite|tokens-json [-o OUT]: write a run in another tool's format
// (docs/export.md).
#include "export/export.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "tools/command.h"

namespace tt::cli {
namespace {

namespace fs = std::filesystem;

RegisterCommand reg("export", "Export a run as Perfetto JSON, SQLite or per-token JSON", 40, [](CLI::App& cmd) {
  auto dir = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  cmd.add_option("run_dir", *dir, "Run directory")->required();
  cmd.add_option("-f,--format", *format, "perfetto, sqlite or tokens-json")->required();
  cmd.add_option("-o,--output", *out,
                 "Output (default RUN_DIR/export/trace.perfetto.json, trace.sqlite or tokens-json/)");
  cmd.add_flag("-q,--quiet", *quiet, "No progress on stderr");
  return [=]() {
    if (*format != "perfetto" && *format != "sqlite" && *format != "tokens-json")
      fail("unknown format '{}' (choose perfetto, sqlite or tokens-json)", *format);
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    auto last = t0;
    // Progress at most twice a second, and only once the export has taken a second.
    exporter::Progress progress = [&](std::string_view line) {
      const auto now = clock::now();
      if (*quiet || now - t0 < std::chrono::seconds(1) || now - last < std::chrono::milliseconds(500)) return;
      last = now;
      fmt::print(stderr, "{}\n", line);
    };

    RunData run = load_run(*dir);
    std::string target = *out;
    if (target.empty()) {
      const std::string base = run.dir + "/export/";
      target = base + (*format == "perfetto" ? "trace.perfetto.json"
                       : *format == "sqlite" ? "trace.sqlite"
                                             : "tokens-json");
    }
    if (*format != "tokens-json") {
      const fs::path parent = fs::path(target).parent_path();
      if (!parent.empty()) {
        std::error_code ec;
        fs::create_directories(parent, ec);
        if (ec) fail("cannot create '{}': {}", parent.string(), ec.message());
      }
      if (fs::is_directory(target)) fail("'{}' is a directory (give a file name with -o)", target);
    }
    if (*format == "perfetto")
      exporter::export_perfetto(run, target, progress);
    else if (*format == "sqlite")
      exporter::export_sqlite(run, target, progress);
    else
      exporter::export_tokens_json(run, target, progress);

    // Absent optional files (an unfinished run) and a truncated trace: what was exported is said on stderr.
    for (const std::string& w : run.warnings) fmt::print(stderr, "tensortrace export: warning: {}\n", w);
    fmt::print("{}: {} steps, {} ops, {} spans -> {}\n", *format, run.trace.steps.size(), run.trace.ops.size(),
               run.trace.spans.size(), target);
    return 0;
  };
});

}  // namespace
}  // namespace tt::cli
