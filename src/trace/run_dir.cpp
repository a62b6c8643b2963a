#include "trace/run_dir.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace tt {

namespace fs = std::filesystem;

void write_file_atomic(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail("cannot create '{}': {}", tmp, std::strerror(errno));
    f.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      fail("error writing '{}'", tmp);
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    fail("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  }
}

RunDirWriter::RunDirWriter(std::string final_path) : final_(std::move(final_path)) {
  while (final_.size() > 1 && final_.back() == '/') final_.pop_back();
  if (final_.empty()) fail("empty run directory name");
  if (fs::exists(final_)) fail("run directory '{}' already exists (choose another -o)", final_);
  partial_ = final_ + ".partial";
  std::error_code ec;
  if (fs::exists(partial_)) fs::remove_all(partial_, ec);
  if (fs::path(final_).has_parent_path()) fs::create_directories(fs::path(final_).parent_path(), ec);
  if (!fs::create_directory(partial_, ec) || ec)
    fail("cannot create run directory '{}': {}", partial_, ec ? ec.message() : "exists");
}

RunDirWriter::~RunDirWriter() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(partial_, ec);
  }
}

void RunDirWriter::write_file(const std::string& name, const std::string& contents) const {
  const fs::path p = fs::path(partial_) / name;
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  write_file_atomic(p.string(), contents);
}

void RunDirWriter::write_json(const std::string& name, const nlohmann::json& j, int indent) const {
  write_file(name, j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void RunDirWriter::commit() {
  std::error_code ec;
  fs::rename(partial_, final_, ec);
  if (ec) fail("cannot rename '{}' to '{}': {}", partial_, final_, ec.message());
  committed_ = true;
}

}  // namespace tt
