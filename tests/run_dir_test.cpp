// The run directory is owned by one writer: RunDirWriter's refusals, --overwrite, default-name suffixes, and a stop
// request finishing the run directory (docs/run-directory.md).
#include "trace/run_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "support/paths.h"
#include "tracer/experiment.h"

namespace tt {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

TEST(RunDir, SecondWriterIsRefusedNamingTheFirst) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  RunDirWriter first(dir);
  first.write_file("a.txt", "first");
  for (ExistingRunDir mode : {ExistingRunDir::REFUSE, ExistingRunDir::OVERWRITE}) {
    const std::string e = error_of([&] { RunDirWriter second(dir, mode); });
    EXPECT_NE(e.find("run.partial' is being written by process " + std::to_string(::getpid())), std::string::npos) << e;
  }
  EXPECT_TRUE(fs::exists(dir + ".partial/a.txt"));
  first.commit();
  EXPECT_TRUE(fs::exists(dir + "/a.txt"));
  EXPECT_FALSE(fs::exists(dir + "/" + RunDirWriter::kWriterFile));
  for (const auto& e : fs::directory_iterator(tmp.path)) EXPECT_EQ(e.path().filename(), "run");
}

TEST(RunDir, StalePartialIsKeptUnlessOverwrite) {
  TempDir tmp;
  const std::string dir = (tmp.path / "user").string();
  fs::create_directories(dir + ".partial");
  write(dir + ".partial/keep.txt", "data");
  const std::string e = error_of([&] { RunDirWriter w(dir); });
  EXPECT_NE(e.find("user.partial' is left from a run that did not finish"), std::string::npos) << e;
  EXPECT_NE(e.find("--overwrite"), std::string::npos) << e;
  EXPECT_TRUE(fs::exists(dir + ".partial/keep.txt"));
  {
    RunDirWriter w(dir, ExistingRunDir::OVERWRITE);
    EXPECT_FALSE(fs::exists(dir + ".partial/keep.txt"));
    w.commit();
  }
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_FALSE(fs::exists(dir + ".partial"));
}

TEST(RunDir, OverwriteReplacesOnlyARunDirectoryAtCommit) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  fs::create_directories(dir);
  write(dir + "/run.json", "old");
  EXPECT_NE(error_of([&] { RunDirWriter w(dir); }).find("already exists"), std::string::npos);
  {
    RunDirWriter w(dir, ExistingRunDir::OVERWRITE);
    w.write_file("run.json", "new");
    EXPECT_TRUE(fs::exists(dir + "/run.json")) << "the old run stays until the new one is complete";
    w.commit();
  }
  std::ifstream f(dir + "/run.json");
  std::string text;
  f >> text;
  EXPECT_EQ(text, "new");
  for (const auto& e : fs::directory_iterator(tmp.path)) EXPECT_EQ(e.path().filename(), "run");
  // Not a run directory: never replaced.
  const std::string other = (tmp.path / "notes").string();
  fs::create_directories(other);
  write(other + "/file.txt", "mine");
  EXPECT_NE(error_of([&] { RunDirWriter w(other, ExistingRunDir::OVERWRITE); }).find("not a run directory"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(other + "/file.txt"));
  EXPECT_FALSE(fs::exists(other + ".partial"));
}

TEST(RunDir, NextFreeTakesSuffixesAndLeavesOthersAlone) {
  TempDir tmp;
  const std::string base = (tmp.path / "runs" / "20260101-000000-model").string();
  RunDirWriter a(base, ExistingRunDir::NEXT_FREE);
  RunDirWriter b(base, ExistingRunDir::NEXT_FREE);  // a holds base.partial
  fs::create_directories(base + "-3.partial");      // stale
  RunDirWriter c(base, ExistingRunDir::NEXT_FREE);
  EXPECT_EQ(a.final_path(), base);
  EXPECT_EQ(b.final_path(), base + "-2");
  EXPECT_EQ(c.final_path(), base + "-4");
  a.commit();
  RunDirWriter d(base, ExistingRunDir::NEXT_FREE);  // base is a finished run now, -2 and -4 are held, -3 stale
  EXPECT_EQ(d.final_path(), base + "-5");
  EXPECT_TRUE(fs::exists(base + "-3.partial"));
}

TEST(RunDir, ErrorRemovesOnlyTheDirectoryItCreated) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  {
    RunDirWriter w(dir);
    fs::rename(dir + ".partial", dir + ".moved");  // someone else's now
    fs::create_directories(dir + ".partial");
    write(dir + ".partial/theirs.txt", "x");
    EXPECT_NE(error_of([&] { w.commit(); }).find("no longer the directory this run created"), std::string::npos);
  }
  EXPECT_TRUE(fs::exists(dir + ".partial/theirs.txt"));
  EXPECT_FALSE(fs::exists(dir));
}

TEST(RunDir, StopRequestFinishesTheRunDirectory) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  ExperimentOptions o;
  o.model_path = test::repo_path("models/stories260K.gguf");
  o.prompt = "Once upon a time";
  o.n_predict = 50;
  o.n_threads = 2;
  o.sampling.temperature = 0;
  o.run_dir = dir;
  o.progress = false;
  std::atomic<bool> stop{false};
  o.stop = &stop;
  int pieces = 0;
  const ExperimentResult r = run_experiment(o, [&](std::string_view) {
    if (++pieces == 3) stop = true;  // after step 2 chose the third token
  });
  EXPECT_TRUE(r.generation.interrupted);
  EXPECT_EQ(r.generation.steps, 3);
  EXPECT_EQ(r.generation.tokens.size(), 3u);
  const nlohmann::json run = nlohmann::json::parse(std::ifstream(dir + "/run.json"));
  EXPECT_EQ(run["interrupted"], true);
  EXPECT_EQ(run["steps_done"], 3);
  EXPECT_EQ(run["trace"]["steps"], 3);
  // The last step's line, written in the background on the pool's second thread, is in the file whole.
  EXPECT_GT(run["trace"]["line_ns"].get<uint64_t>(), 0u);
  std::ifstream steps(dir + "/steps.jsonl");
  int lines = 0;
  for (std::string line; std::getline(steps, line); ++lines) EXPECT_EQ(nlohmann::json::parse(line)["step"], lines);
  EXPECT_EQ(lines, 3);
}

TEST(RunDir, StopBeforeTheFirstStepFinishesAnEmptyRun) {
  TempDir tmp;
  const std::string dir = (tmp.path / "run").string();
  ExperimentOptions o;
  o.model_path = test::repo_path("models/stories260K.gguf");
  o.prompt = "Hi";
  o.n_predict = 5;
  o.n_threads = 1;
  o.run_dir = dir;
  o.progress = false;
  std::atomic<bool> stop{true};
  o.stop = &stop;
  const ExperimentResult r = run_experiment(o, nullptr);
  EXPECT_TRUE(r.generation.interrupted);
  EXPECT_EQ(r.generation.steps, 0);
  const nlohmann::json run = nlohmann::json::parse(std::ifstream(dir + "/run.json"));
  EXPECT_EQ(run["steps_done"], 0);
  EXPECT_EQ(run["trace"]["steps"], 0);
}

}  // namespace
}  // namespace tt
