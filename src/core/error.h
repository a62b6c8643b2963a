// Errors for bad input (files, shapes, options). They carry a message that names the problem; user-facing code
// prints it on one line and exits non-zero. Internal invariants use TT_CHECK, which is always on.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tt

// Always-on invariant check: a violated invariant is a bug, reported with where it happened.
#define TT_CHECK(cond, ...)                                                                          \
  do {                                                                                               \
    if (!(cond)) [[unlikely]]                                                                        \
      ::tt::fail("internal check failed at {}:{}: {} ({})", __FILE__, __LINE__, #cond,              \
                 ::fmt::format(__VA_ARGS__));                                                        \
  } while (0)
