#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tt {

HugePageMemory::HugePageMemory(size_t bytes) : size_(bytes) {
  void* p = ::mmap(nullptr, std::max<size_t>(bytes, 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("cannot allocate {} bytes of memory: {}", bytes, std::strerror(errno));
  data_ = static_cast<uint8_t*>(p);
  // Only a hint: without transparent huge pages the memory works the same on 4 KiB pages.
  ::madvise(p, std::max<size_t>(bytes, 1), MADV_HUGEPAGE);
}

HugePageMemory::~HugePageMemory() { ::munmap(data_, std::max<size_t>(size_, 1)); }

void HugePageMemory::make_read_only() {
  if (::mprotect(data_, std::max<size_t>(size_, 1), PROT_READ) != 0)
    fail("cannot make {} bytes read-only: {}", size_, std::strerror(errno));
}

void HugePageMemory::make_writable() {
  if (::mprotect(data_, std::max<size_t>(size_, 1), PROT_READ | PROT_WRITE) != 0)
    fail("cannot make {} bytes writable: {}", size_, std::strerror(errno));
}

MappedFile::MappedFile(const std::string& path, FileResidency residency) : path_(path), residency_(residency) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    int err = errno;
    ::close(fd_);
    fail("cannot stat '{}': {}", path, std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd_);
    fail("'{}' is a directory, not a file", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fail("'{}' is not a regular file", path);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) {
    ::close(fd_);
    fail("'{}' is empty", path);
  }
  if (residency == FileResidency::IN_MEMORY) {
    try {
      read_into_memory();
    } catch (...) {
      ::close(fd_);
      throw;
    }
    return;
  }
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(fd_);
    fail("cannot map '{}': {}", path, std::strerror(err));
  }
  data_ = static_cast<const uint8_t*>(p);
}

void MappedFile::read_into_memory() {
  memory_ = std::make_unique<HugePageMemory>(size_);
  for (size_t done = 0; done < size_;) {
    const ssize_t n = ::pread(fd_, memory_->data() + done, size_ - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read '{}' at byte {}: {}", path_, done, std::strerror(errno));
    if (n == 0) fail("'{}' ended at byte {} while being read ({} bytes when opened)", path_, done, size_);
    done += static_cast<size_t>(n);
  }
  memory_->make_read_only();
  data_ = memory_->data();
}

void MappedFile::rewrite(const std::function<void(uint8_t* data)>& edit) {
  if (!memory_) fail("'{}' is mapped in place: its bytes cannot be rewritten", path_);
  memory_->make_writable();
  edit(memory_->data());
  memory_->make_read_only();
}

MappedFile::~MappedFile() {
  if (data_ && !memory_) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tt
