// tensortrace: an LLM inference engine for GGUF models whose every tensor operation can be seen.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/error.h"
#include "core/version.h"
#include "tools/command.h"

namespace tt::cli {
std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}
}  // namespace tt::cli

int main(int argc, char** argv) {
  using namespace tt::cli;
  CLI::App app{"tensortrace: run GGUF models on the CPU and see every tensor operation"};
  app.set_version_flag("--version", std::string(TT_VERSION) + " (" + tt::git_revision() + ")");
  app.require_subcommand(1);
  std::vector<Command> all = commands();
  std::sort(all.begin(), all.end(), [](const Command& a, const Command& b) { return a.order < b.order; });
  std::map<CLI::App*, RunFn> runners;
  for (const Command& c : all) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    runners[sub] = c.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // The top level takes only flags, so a first argument that is not one names the subcommand. (CLI11 would say
    // "A subcommand is required" or "argument was not expected".)
    if (argc > 1 && argv[1][0] != '-' &&
        std::none_of(all.begin(), all.end(), [&](const Command& c) { return c.name == argv[1]; })) {
      fmt::print(stderr, "tensortrace: error: unknown command '{}' (see tensortrace --help)\n", argv[1]);
      return 2;
    }
    std::string what = e.what();
    if (what.empty()) what = e.get_name();
    fmt::print(stderr, "tensortrace: error: {}\n", what);
    return 2;
  }
  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const tt::Error& e) {
      fmt::print(stderr, "tensortrace {}: error: {}\n", sub->get_name(), e.what());
      return 1;
    } catch (const std::exception& e) {
      fmt::print(stderr, "tensortrace {}: error: {}\n", sub->get_name(), e.what());
      return 1;
    }
  }
  return 2;
}
