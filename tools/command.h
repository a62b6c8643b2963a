// Subcommands register themselves here (one file per subcommand under tools/), so main() stays small.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace tt::cli {

// setup() adds the subcommand's options to `cmd` and returns the function that runs it (exit code).
using RunFn = std::function<int()>;
using SetupFn = std::function<RunFn(CLI::App& cmd)>;

struct Command {
  std::string name;
  std::string description;
  SetupFn setup;
  int order;  // position in --help
};

std::vector<Command>& commands();

// --kernel-isa auto|avx2|scalar (run, bench): the value for limit_kernel_isa(), called before the model loads.
inline void add_kernel_isa_option(CLI::App& cmd, std::string& value, const std::string& what_records_it) {
  cmd.add_option(
         "--kernel-isa", value,
         "Kernels' instruction set: auto (the CPU's best), avx2, scalar (the reference kernels); " + what_records_it)
      ->check(CLI::IsMember({"auto", "avx2", "scalar"}));
}

struct RegisterCommand {
  RegisterCommand(std::string name, std::string description, int order, SetupFn setup) {
    commands().push_back({std::move(name), std::move(description), std::move(setup), order});
  }
};

}  // namespace tt::cli
