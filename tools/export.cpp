// tensortrace export RUN_DIR --format perfetto|sqlite|tokens-json|routing-npy|routing-csv [-o OUT]: write a run in
// another tool's format (docs/export.md).
#include "export/export.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>

#include "core/error.h"
#include "tools/command.h"

namespace tt::cli {
namespace {

namespace fs = std::filesystem;

RegisterCommand reg(
    "export", "Export a run as Perfetto JSON, SQLite, per-token JSON or its expert routing (NumPy, CSV)", 40,
    [](CLI::App& cmd) {
      auto dir = std::make_shared<std::string>();
      auto format = std::make_shared<std::string>();
      auto out = std::make_shared<std::string>();
      auto quiet = std::make_shared<bool>(false);
      cmd.add_option("run_dir", *dir, "Run directory")->required();
      cmd.add_option("-f,--format", *format, "perfetto, sqlite, tokens-json, routing-npy or routing-csv")->required();
      cmd.add_option("-o,--output", *out,
                     "Output (default RUN_DIR/export/trace.perfetto.json, trace.sqlite, tokens-json/, routing-npy/ or "
                     "routing.csv)");
      cmd.add_flag("-q,--quiet", *quiet, "No progress on stderr");
      return [=]() {
        // Format -> default output under RUN_DIR/export/, and whether it is a directory.
        static const std::map<std::string, std::pair<std::string, bool>> formats = {
            {"perfetto", {"trace.perfetto.json", false}},
            {"sqlite", {"trace.sqlite", false}},
            {"tokens-json", {"tokens-json", true}},
            {"routing-npy", {"routing-npy", true}},
            {"routing-csv", {"routing.csv", false}}};
        const auto chosen = formats.find(*format);
        if (chosen == formats.end())
          fail("unknown format '{}' (choose perfetto, sqlite, tokens-json, routing-npy or routing-csv)", *format);
        const bool is_dir = chosen->second.second;
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
        // The routing formats check there is routing before anything is created.
        std::optional<exporter::RoutingTable> table;
        if (format->starts_with("routing-")) table = exporter::routing_table(run);
        std::string target = *out;
        if (target.empty()) target = run.dir + "/export/" + chosen->second.first;
        if (!is_dir) {
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
        else if (*format == "tokens-json")
          exporter::export_tokens_json(run, target, progress);
        else {
          if (*format == "routing-npy")
            exporter::export_routing_npy(*table, target);
          else
            exporter::export_routing_csv(*table, target);
          fmt::print("{}: {} tokens x {} routed layers x top {}", *format, table->tokens.size(), table->layers.size(),
                     table->top_k);
          if (table->absent)
            fmt::print(
                "; {} (token, layer) entries without routing{} (a prompt's last layer routes only its last token)",
                table->absent, *format == "routing-npy" ? " are expert -1, weight 0" : " have no rows");
          fmt::print("\n");
        }

        // Absent optional files (an unfinished run) and a truncated trace: what was exported is said on stderr.
        for (const std::string& w : run.warnings) fmt::print(stderr, "tensortrace export: warning: {}\n", w);
        fmt::print("{}: {} steps, {} ops, {} spans -> {}\n", *format, run.trace.steps.size(), run.trace.ops.size(),
                   run.trace.spans.size(), target);
        return 0;
      };
    });

}  // namespace
}  // namespace tt::cli
