// A run directory is written under a temporary name (RUN_DIR.partial) and renamed when complete, so a finished
// RUN_DIR is always whole. On an error the partial directory is removed; after a kill it stays, and its
// trace.bin is readable up to the last complete record.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tt {

class RunDirWriter {
 public:
  // Fails when `final_path` exists (never overwrites a run).
  explicit RunDirWriter(std::string final_path);
  ~RunDirWriter();  // removes the partial directory unless commit() succeeded

  const std::string& dir() const { return partial_; }  // where files go while the run is in progress
  const std::string& final_path() const { return final_; }
  std::string path(const std::string& name) const { return partial_ + "/" + name; }
  // Writes a file atomically inside the directory (temporary name, then rename).
  void write_file(const std::string& name, const std::string& contents) const;
  void write_json(const std::string& name, const nlohmann::json& j, int indent = 1) const;
  void commit();  // renames RUN_DIR.partial to RUN_DIR

 private:
  std::string final_, partial_;
  bool committed_ = false;
};

// Writes `contents` to `path` via a temporary file and rename (nothing half-written appears under `path`).
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace tt
