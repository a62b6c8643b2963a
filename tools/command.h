// Subcommands register themselves here (one file per subcommand under tools/), so main() stays small.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
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

// --kernel-isa auto|amx|avx512|avx2|scalar (run, bench): the value for limit_kernel_isa(), called before the model
// loads.
inline void add_kernel_isa_option(CLI::App& cmd, std::string& value, const std::string& what_records_it) {
  cmd.add_option("--kernel-isa", value,
                 "Kernels' instruction set: auto (the CPU's best up to avx512, with AMX-INT8 tiles for Q4_K, Q5_K "
                 "and Q6_K prompts where the CPU has them: the same results), amx (also AMX tiles for Q8_0 prompts, in "
                 "llama.cpp's AMX float order; an error without them), avx512 (no AMX), avx2, scalar (the reference "
                 "kernels); " +
                     what_records_it)
      ->check(CLI::IsMember({"auto", "amx", "avx512", "avx2", "scalar"}));
}

// Which ends of a range() belong to it.
enum class Ends { CLOSED, OPEN_LOW, OPEN_HIGH };

// Every numeric option's check: the value must parse as T and lie in [low, high] (or the open variant), else
// "must be an integer in [0, 65536], got '-1'". Not CLI::Range: it lets NaN through and prints its bounds with
// std::to_string (309 digits for NonNegativeNumber), and a negative value for an unsigned option wraps.
template <typename T>
CLI::Validator range(T low, T high, Ends ends = Ends::CLOSED) {
  static_assert(std::is_arithmetic_v<T>);
  // Integers are read signed, so "-1" stays -1 for unsigned options instead of wrapping to their maximum.
  using Read = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  const std::string what = std::is_integral_v<T> ? "an integer" : "a number";
  const std::string interval =
      fmt::format("{}{}, {}{}", ends == Ends::OPEN_LOW ? "(" : "[", low, high, ends == Ends::OPEN_HIGH ? ")" : "]");
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        Read v{};
        const bool read = CLI::detail::lexical_cast(input, v);
        const bool above = ends == Ends::OPEN_LOW ? v > static_cast<Read>(low) : v >= static_cast<Read>(low);
        const bool below = ends == Ends::OPEN_HIGH ? v < static_cast<Read>(high) : v <= static_cast<Read>(high);
        if (read && above && below) return {};  // NaN fails both comparisons
        return fmt::format("must be {} in {}, got '{}'", what, interval, input);
      },
      "in " + interval);
}

// --config FILE (run, bench): a TOML file whose top-level keys are the subcommand's long option names. Each value
// goes through that option's own conversion and check, for the options the command line did not give (it wins).
// Any error (the file, its syntax, an unknown key, a bad value) names the file and the key. on_read, when set,
// receives the file's absolute path and the values read (a JSON object keyed like the file).
using ConfigReadFn = std::function<void(const std::string& path, const nlohmann::json& values)>;
void add_config_option(CLI::App& cmd, ConfigReadFn on_read = {});

struct RegisterCommand {
  RegisterCommand(std::string name, std::string description, int order, SetupFn setup) {
    commands().push_back({std::move(name), std::move(description), std::move(setup), order});
  }
};

}  // namespace tt::cli
