// Where tests find the repo's bundled models and the shared reference material.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace tt::test {

inline std::string repo_path(const std::string& rel) { return std::string(TT_REPO_DIR) + "/" + rel; }
inline std::string shared_path(const std::string& rel) { return std::string(TT_SHARED_DIR) + "/" + rel; }
inline bool shared_available() { return std::filesystem::exists(shared_path("models/README.md")); }

}  // namespace tt::test

// Skip (not fail) a test that needs ../shared when it is absent.
#define TT_REQUIRE_SHARED()                                                                     \
  do {                                                                                          \
    if (!::tt::test::shared_available()) GTEST_SKIP() << "../shared is absent: " TT_SHARED_DIR; \
  } while (0)
