// Where tests find the repo's bundled models and the shared reference material.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace tt::test {

inline std::string repo_path(const std::string& rel) { return std::string(TT_REPO_DIR) + "/" + rel; }
inline std::string shared_path(const std::string& rel) { return std::string(TT_SHARED_DIR) + "/" + rel; }
inline bool shared_available() { return std::filesystem::exists(shared_path("models/README.md")); }

// A fresh directory of this test's own under the system's temporary directory, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("tt-test-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace tt::test

// Skip (not fail) a test that needs ../shared when it is absent.
#define TT_REQUIRE_SHARED()                                                                     \
  do {                                                                                          \
    if (!::tt::test::shared_available()) GTEST_SKIP() << "../shared is absent: " TT_SHARED_DIR; \
  } while (0)
