// A whole file's bytes, read-only: mapped in place (page by page from the page cache, as the file's pages are
// touched) or read into anonymous memory at open on transparent huge pages (docs/performance.md: streaming 1 GB of
// weights a token from 4 KiB file pages costs a third of generation's speed in TLB misses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace tt {

enum class FileResidency {
  MAPPED,     // mmap of the file: pages come from the page cache when touched, shared with other readers
  IN_MEMORY,  // read whole into private anonymous memory (2 MiB pages where the kernel gives them) at open
};

// Anonymous read-write memory on transparent huge pages where the kernel allows them (MADV_HUGEPAGE), zeroed.
class HugePageMemory {
 public:
  explicit HugePageMemory(size_t bytes);  // throws tt::Error when the memory cannot be had
  ~HugePageMemory();
  HugePageMemory(const HugePageMemory&) = delete;
  HugePageMemory& operator=(const HugePageMemory&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  void make_read_only();
  void make_writable();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class MappedFile {
 public:
  // Throws tt::Error naming the path when the file is missing, a directory, unreadable, empty or not mappable.
  explicit MappedFile(const std::string& path, FileResidency residency = FileResidency::MAPPED);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  FileResidency residency() const { return residency_; }
  // IN_MEMORY: `edit` may rewrite the copy (the loader stores weight rows the way its kernels read them), which is
  // read-only again after. An Error for a mapped file.
  void rewrite(const std::function<void(uint8_t* data)>& edit);

 private:
  void read_into_memory();

  std::string path_;
  FileResidency residency_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<HugePageMemory> memory_;  // IN_MEMORY's copy
};

}  // namespace tt
