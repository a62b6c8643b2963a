// --config FILE for run and bench: TOML read with toml++, each value fed through the subcommand's own CLI11 option.
// Not CLI11's set_config(): CLI11 reads config files for the top-level app only (App::_process_config_file runs
// from the top level's _process()), so set on a subcommand it is a plain option whose value nothing reads.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <filesystem>
#include <optional>
#include <sstream>
#include <string_view>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tools/command.h"

namespace tt::cli {
namespace {

// A value as CLI11 is given it (the text typed after the option) and as run.json records it.
struct Value {
  std::string text;
  nlohmann::json json;
};

// Throws tt::Error saying what the key holds instead of what its option takes.
Value read_value(const toml::node& node, const std::string& key, bool flag) {
  if (node.is_array()) fail("key '{}': expected a value, got an array", key);
  if (flag) {
    if (const auto* b = node.as_boolean()) return {b->get() ? "true" : "false", b->get()};
    std::ostringstream got;
    node.visit([&](const auto& v) { got << v; });
    fail("key '{}': expected true or false (it is a flag), got {}", key, got.str());
  }
  if (const auto* s = node.as_string()) return {s->get(), s->get()};
  if (const auto* i = node.as_integer()) return {std::to_string(i->get()), i->get()};
  if (const auto* f = node.as_floating_point()) return {fmt::format("{}", f->get()), f->get()};
  fail("key '{}': expected a number or a string, got {}", key, node.is_boolean() ? "a boolean" : "a date or time");
}

// Sets every option the file names that the command line did not give; returns the values read. Throws tt::Error.
nlohmann::json apply_config(CLI::App& cmd, const MappedFile& file) {
  toml::table table;
  try {
    table = toml::parse(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), file.path());
  } catch (const toml::parse_error& e) {
    fail("line {}, column {}: {}", e.source().begin.line, e.source().begin.column, e.description());
  }
  const CLI::Option* config_option = cmd.get_option_no_throw("--config");
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [toml_key, node] : table) {
    const std::string key(toml_key.str());
    // Before the lookup: a section ([run]) is the likelier mistake than an unknown option.
    if (node.is_table()) fail("key '{}': expected a value, got a table (keys are top-level)", key);
    CLI::Option* option = cmd.get_option_no_throw("--" + key);
    if (option == nullptr)
      fail("unknown key '{}' (keys are {}'s long option names: see tensortrace {} --help)", key, cmd.get_name(),
           cmd.get_name());
    if (option == config_option || option == cmd.get_help_ptr() || !option->get_configurable())
      fail("key '{}' cannot be set in a config file", key);
    const bool flag = option->get_expected_min() == 0;
    const Value value = read_value(node, key, flag);
    values[key] = value.json;
    if (option->count() > 0) continue;  // the command line gave it and wins
    try {
      option->add_result(flag ? option->get_flag_value(key, value.text) : value.text);
      option->run_callback();  // the option's own checks and conversion
    } catch (const CLI::ParseError& e) {
      // CLI11 names the option ("--top-k: must be ..."); here the key names it.
      std::string why = e.what();
      const std::string prefix = option->get_name() + ": ";
      if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
      fail("key '{}': {}", key, why);
    }
  }
  return values;
}

}  // namespace

void add_config_option(CLI::App& cmd, ConfigReadFn on_read) {
  // The callback runs while CLI11 processes the subcommand's options, after it has counted those on the command
  // line and before it checks the required ones (so the file can give -m).
  cmd.add_option_function<std::string>(
         "--config",
         [&cmd, on_read](const std::string& path) {
           const std::string where = fmt::format("{} --config", cmd.get_name());
           std::optional<MappedFile> file;
           try {
             file.emplace(path);
           } catch (const tt::Error& e) {  // names the path: missing, a directory, unreadable or empty
             throw CLI::ConfigError(fmt::format("{}: {}", where, e.what()));
           }
           nlohmann::json values;
           try {
             values = apply_config(cmd, *file);
           } catch (const tt::Error& e) {
             throw CLI::ConfigError(fmt::format("{} '{}': {}", where, path, e.what()));
           }
           if (on_read) on_read(std::filesystem::absolute(path).string(), values);
         },
         "TOML file of options (keys: the long option names); the command line overrides it")
      ->configurable(false);
}

}  // namespace tt::cli
