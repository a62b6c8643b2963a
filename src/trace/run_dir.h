// A run directory is written under a temporary name (RUN_DIR.partial) and renamed when complete, so a finished
// RUN_DIR is always whole. One process owns RUN_DIR.partial: it holds an flock on the directory from before the
// name appears until the process ends (through the final rename), and every tensortrace process changes what
// RUN_DIR.partial names only while holding the lock of the directory it names. On an error the partial directory
// is removed; after a kill it stays (stale: its lock died with the process), and its trace.bin is readable up to
// the last complete record.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tt {

// What to do when RUN_DIR or RUN_DIR.partial already exists.
enum class ExistingRunDir {
  REFUSE,     // an error naming it (and the process writing it, if one is)
  OVERWRITE,  // delete a stale RUN_DIR.partial; replace a finished RUN_DIR (one holding run.json) at commit()
  NEXT_FREE,  // take RUN_DIR-2, RUN_DIR-3, ... (the first name whose RUN_DIR and RUN_DIR.partial are both free)
};

class RunDirWriter {
 public:
  // Never touches a directory another live process holds.
  explicit RunDirWriter(std::string final_path, ExistingRunDir existing = ExistingRunDir::REFUSE);
  ~RunDirWriter();  // removes the partial directory unless commit() succeeded (only if it is still this one's)
  RunDirWriter(const RunDirWriter&) = delete;
  RunDirWriter& operator=(const RunDirWriter&) = delete;

  const std::string& dir() const { return where_; }  // where files go while the run is in progress
  const std::string& final_path() const { return final_; }
  std::string path(const std::string& name) const { return where_ + "/" + name; }
  // Writes a file atomically inside the directory (temporary name, then rename).
  void write_file(const std::string& name, const std::string& contents) const;
  void write_json(const std::string& name, const nlohmann::json& j, int indent = 1) const;
  void commit();  // renames RUN_DIR.partial to RUN_DIR (never over an existing RUN_DIR unless OVERWRITE)

  // The file in a partial directory naming the process writing it (removed at commit).
  static constexpr const char* kWriterFile = "writer.pid";

 private:
  bool claim(const std::string& name);      // false: taken (NEXT_FREE only)
  std::string move_existing_final_aside();  // OVERWRITE: where the old RUN_DIR went ("" when none)

  ExistingRunDir existing_;
  std::string final_, partial_;
  std::string where_;  // the directory's current path: a temporary name, then partial_, then final_
  int fd_ = -1;        // the directory, open and flock'ed for the writer's lifetime
  bool committed_ = false;
};

// Writes `contents` to `path` via a temporary file and rename (nothing half-written appears under `path`).
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace tt
