// Page-cache and storage measurements for `run --io-trace`, `run --cold` and `run --prefetch`: residency of mapped
// file ranges (mincore), per-thread fault and storage-read counters, evicting a file from the page cache, and a
// reader thread that pulls file ranges into the page cache ahead of compute.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "trace/records.h"

namespace tt {

class Graph;
struct Node;

struct ThreadIoCounters {
  uint64_t major_faults = 0, minor_faults = 0;
  uint64_t read_bytes = 0;  // /proc/thread-self/io read_bytes (0 where not accounted)
};
// The calling thread's counters. proc_fd caches /proc/thread-self/io for this thread (-1: open it; -2: unavailable).
ThreadIoCounters read_thread_io(int& proc_fd);

size_t page_bytes();

// Pages of [offset, offset + length) of a mapping starting at base, and how many are not resident.
struct Residency {
  uint32_t pages = 0, nonresident = 0;
};
Residency residency(const uint8_t* base, uint64_t offset, uint64_t length, std::vector<unsigned char>& scratch);

// Drops the file's pages from the page cache (our mapping's page-table entries first, then
// posix_fadvise(DONTNEED) on fd), then checks with mincore how many pages remain resident.
struct EvictResult {
  uint64_t pages = 0, resident_before = 0, resident_after = 0;
  std::string error;  // non-empty when a call failed
  nlohmann::json to_json() const;
};
EvictResult evict_from_page_cache(int fd, const uint8_t* base, uint64_t size);

// `run --io-trace`: per op, the page-cache residency of the model-file ranges it reads (measured on thread 0 just
// before it starts) and each worker's faults and storage reads during its share (trace.bin IO records).
class IoProbe {
 public:
  IoProbe(const uint8_t* file_base, int n_threads);
  ~IoProbe();
  IoProbe(const IoProbe&) = delete;
  IoProbe& operator=(const IoProbe&) = delete;
  void on_graph_ready(size_t n_nodes);
  void on_node_begin(int node, const Node& n);  // thread 0, before any worker starts the node
  void on_worker_begin(int thread);
  void on_worker_end(int thread, int node);
  // Node `node`'s record for step `step`, whose workers are the threads `worked(thread)` says had a share; nullptr
  // when it read no model-file bytes.
  template <typename Worked>
  const trace::IoRecord* record(uint32_t step, uint32_t node, Worked&& worked) {
    if (ranges_[node].empty()) return nullptr;
    record_.step = step;
    record_.node = node;
    record_.page_bytes = static_cast<uint32_t>(page_bytes());
    record_.ranges = ranges_[node];
    record_.workers.clear();
    for (size_t t = 0; t < slots_.size(); ++t)
      if (worked(static_cast<int>(t))) record_.workers.push_back(workers_[t][node]);
    return &record_;
  }

 private:
  struct Slot {
    int proc_fd = -1;
    ThreadIoCounters begin;
  };
  const uint8_t* base_;
  std::vector<Slot> slots_;                            // [thread]
  std::vector<std::vector<trace::IoWorker>> workers_;  // [thread][node]
  std::vector<std::vector<trace::IoRange>> ranges_;    // [node], measured on thread 0
  std::vector<unsigned char> mincore_buf_;
  trace::IoRecord record_;  // reused between ops
};

// Reads file ranges into the page cache on its own thread (pread into a scratch buffer), each page at most once per
// run; requests are queued by the compute's thread 0 and never block it.
class Prefetcher {
 public:
  enum class Mode { NEXT_LAYER, RECORDED };
  // RECORDED: per recorded step, per node index, the MODEL_FILE ranges that node read (offset, length).
  using Plan = std::vector<std::vector<std::vector<std::pair<uint64_t, uint64_t>>>>;
  Prefetcher(int fd, uint64_t file_size, Mode mode, Plan plan = {}, int lookahead_ops = 8);
  ~Prefetcher();

  void on_graph_ready(const Graph& g, int32_t step);  // run's thread, before the step
  void on_node_begin(int node);                       // thread 0

  nlohmann::json stats() const;  // requests, bytes read, pages skipped

 private:
  void enqueue(uint64_t offset, uint64_t length);
  void move_triggers_off_views(const Graph& g);
  void worker();

  int fd_;
  uint64_t file_size_;
  Mode mode_;
  Plan plan_;
  int lookahead_;
  // Per node of the current graph: ranges to request when it begins.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> triggers_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, uint64_t>> queue_;
  bool stop_ = false;
  std::vector<uint8_t> requested_;  // per page: already queued once
  std::atomic<uint64_t> bytes_read_{0}, requests_{0};
  std::thread thread_;
};

}  // namespace tt
