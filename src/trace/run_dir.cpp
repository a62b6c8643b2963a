#include "trace/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace tt {

namespace fs = std::filesystem;

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Renames without ever replacing `to`: false when `to` exists.
bool rename_noreplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno == EEXIST) return false;
  fail("cannot rename '{}' to '{}': {}", from, to, std::strerror(errno));
}

// The directory itself, not a symlink's target: -1 with errno set when `path` is none.
int open_dir(const std::string& path) { return ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); }

bool try_lock(int fd, const std::string& path) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  if (errno == EWOULDBLOCK) return false;
  fail("cannot lock '{}': {}", path, std::strerror(errno));
}

bool exists_nofollow(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 || errno != ENOENT;
}

// Whether `path` (not followed) is the directory open as `fd`.
bool names(int fd, const std::string& path) {
  struct stat a {
  }, b{};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// "process 1234" from a partial directory's writer file, for errors.
std::string writer_of(int dir_fd) {
  Fd f{::openat(dir_fd, RunDirWriter::kWriterFile, O_RDONLY | O_CLOEXEC)};
  char buf[32] = {};
  long pid = 0;
  if (f.fd >= 0 && ::read(f.fd, buf, sizeof(buf) - 1) > 0 && std::sscanf(buf, "%ld", &pid) == 1 && pid > 0)
    return fmt::format("process {}", pid);
  return "another process";
}

// A new empty directory next to `near` (same file system, so renames between them are atomic).
std::string make_temp_dir(const std::string& near, const char* what) {
  const fs::path parent = fs::path(near).parent_path();
  std::string name = ((parent.empty() ? fs::path(".") : parent) / fmt::format(".tensortrace-{}-XXXXXX", what)).string();
  if (!::mkdtemp(name.data())) fail("cannot create a directory next to '{}': {}", near, std::strerror(errno));
  return name;
}

// --overwrite replaces only what a run left: a directory (not a symlink) holding run.json.
void check_replaceable(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !fs::exists(fs::path(dir) / "run.json"))
    fail("'{}' exists and is not a run directory (no run.json): --overwrite replaces only run directories", dir);
}

}  // namespace

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

RunDirWriter::RunDirWriter(std::string final_path, ExistingRunDir existing)
    : existing_(existing), final_(std::move(final_path)) {
  while (final_.size() > 1 && final_.back() == '/') final_.pop_back();
  if (final_.empty()) fail("empty run directory name");
  const std::string base = final_;
  const fs::path parent = fs::path(base).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) fail("cannot create '{}': {}", parent.string(), ec.message());
  // Locked before it takes the name RUN_DIR.partial, so that name never names an unlocked directory of a live run.
  where_ = make_temp_dir(base, "new");
  fd_ = open_dir(where_);
  if (fd_ < 0 || ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    fs::remove_all(where_, ec);
    fail("cannot open and lock '{}': {}", where_, std::strerror(err));
  }
  try {
    write_file_atomic(path(kWriterFile), fmt::format("{}\n", ::getpid()));
    for (int n = 1; !claim(n == 1 ? base : fmt::format("{}-{}", base, n)); ++n) {
    }
  } catch (...) {
    if (names(fd_, where_)) fs::remove_all(where_, ec);
    ::close(fd_);
    throw;
  }
}

bool RunDirWriter::claim(const std::string& name) {
  const bool next_free = existing_ == ExistingRunDir::NEXT_FREE;
  final_ = name;
  partial_ = name + ".partial";
  auto final_taken = [&] {
    if (!exists_nofollow(final_)) return false;
    if (next_free) return true;
    if (existing_ == ExistingRunDir::REFUSE)
      fail("run directory '{}' already exists (choose another -o, or --overwrite to replace it)", final_);
    check_replaceable(final_);  // replaced at commit()
    return false;
  };
  if (final_taken()) return false;
  const std::string tmp = where_;
  while (!rename_noreplace(tmp, partial_)) {
    Fd other{open_dir(partial_)};
    if (other.fd < 0) {
      if (errno == ENOENT) continue;  // gone meanwhile: try again
      if (next_free) return false;
      fail("'{}' exists and is not a directory: move it away or choose another -o", partial_);
    }
    if (!try_lock(other.fd, partial_)) {
      if (next_free) return false;
      fail("run directory '{}' is being written by {}: choose another -o, or wait for that run to finish", partial_,
           writer_of(other.fd));
    }
    if (next_free) return false;  // a stale partial stays for the user to read
    if (existing_ == ExistingRunDir::REFUSE)
      fail(
          "'{}' is left from a run that did not finish (tensortrace dump reads it): move it away "
          "(mv '{}' NEW_NAME) or pass --overwrite to delete it",
          partial_, partial_);
    // Holding its lock, no other tensortrace process renames it: delete it if the name still names it.
    std::error_code ec;
    if (names(other.fd, partial_)) fs::remove_all(partial_, ec);
    if (ec) fail("cannot delete '{}': {}", partial_, ec.message());
  }
  where_ = partial_;
  // The partial's previous owner may have committed RUN_DIR just before the name came free; now that this one
  // holds RUN_DIR.partial, nobody else can create RUN_DIR.
  if (final_taken()) {
    if (!rename_noreplace(partial_, tmp)) fail("cannot rename '{}' back to '{}': it exists", partial_, tmp);
    where_ = tmp;
    return false;
  }
  return true;
}

RunDirWriter::~RunDirWriter() {
  if (fd_ < 0) return;
  if (!committed_ && names(fd_, where_)) {
    std::error_code ec;
    fs::remove_all(where_, ec);
  }
  ::close(fd_);
}

void RunDirWriter::write_file(const std::string& name, const std::string& contents) const {
  const fs::path p = fs::path(where_) / name;
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  write_file_atomic(p.string(), contents);
}

void RunDirWriter::write_json(const std::string& name, const nlohmann::json& j, int indent) const {
  write_file(name, j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::string RunDirWriter::move_existing_final_aside() {
  Fd old{open_dir(final_)};
  if (old.fd < 0) {
    if (errno == ENOENT) return {};
    fail("cannot open '{}': {}", final_, std::strerror(errno));
  }
  check_replaceable(final_);
  if (!try_lock(old.fd, final_)) fail("run directory '{}' is held by {}: not replacing it", final_, writer_of(old.fd));
  // Moved aside rather than deleted in place: a kill between the two renames leaves both runs whole.
  const std::string aside = make_temp_dir(final_, "replaced");
  if (::rename(final_.c_str(), aside.c_str()) != 0) {
    const int err = errno;
    std::error_code ec;
    fs::remove(aside, ec);
    fail("cannot move '{}' aside to replace it: {}", final_, std::strerror(err));
  }
  return aside;
}

void RunDirWriter::commit() {
  if (!names(fd_, where_))
    fail("'{}' is no longer the directory this run created (moved or replaced during the run): not committing", where_);
  ::unlinkat(fd_, kWriterFile, 0);
  const std::string replaced = existing_ == ExistingRunDir::OVERWRITE ? move_existing_final_aside() : std::string();
  if (!rename_noreplace(where_, final_))
    fail("cannot rename '{}' to '{}': '{}' was created during the run", where_, final_, final_);
  where_ = final_;
  committed_ = true;
  std::error_code ec;
  if (!replaced.empty()) fs::remove_all(replaced, ec);
}

}  // namespace tt
