#include "tracer/io_probe.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "graph/graph.h"

namespace tt {

size_t page_bytes() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

ThreadIoCounters read_thread_io(int& proc_fd) {
  ThreadIoCounters c;
  struct rusage ru {};
  if (getrusage(RUSAGE_THREAD, &ru) == 0) {
    c.major_faults = static_cast<uint64_t>(ru.ru_majflt);
    c.minor_faults = static_cast<uint64_t>(ru.ru_minflt);
  }
  if (proc_fd == -1) {
    proc_fd = ::open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC);
    if (proc_fd < 0) proc_fd = -2;
  }
  if (proc_fd >= 0) {
    char buf[512];
    const ssize_t n = ::pread(proc_fd, buf, sizeof(buf) - 1, 0);
    if (n > 0) {
      buf[n] = 0;
      if (const char* p = std::strstr(buf, "\nread_bytes:")) c.read_bytes = std::strtoull(p + 12, nullptr, 10);
    }
  }
  return c;
}

Residency residency(const uint8_t* base, uint64_t offset, uint64_t length, std::vector<unsigned char>& scratch) {
  Residency r;
  if (!length) return r;
  const uint64_t ps = page_bytes();
  const uint64_t first = offset / ps, last = (offset + length - 1) / ps;
  r.pages = static_cast<uint32_t>(last - first + 1);
  scratch.resize(r.pages);
  if (::mincore(const_cast<uint8_t*>(base) + first * ps, r.pages * ps, scratch.data()) != 0) return r;
  for (uint32_t i = 0; i < r.pages; ++i) r.nonresident += (scratch[i] & 1) ? 0 : 1;
  return r;
}

IoProbe::IoProbe(const uint8_t* file_base, int n_threads)
    : base_(file_base), slots_(static_cast<size_t>(n_threads)), workers_(static_cast<size_t>(n_threads)) {}

IoProbe::~IoProbe() {
  for (Slot& s : slots_)
    if (s.proc_fd >= 0) ::close(s.proc_fd);
}

void IoProbe::on_graph_ready(size_t n_nodes) {
  for (auto& w : workers_) w.assign(n_nodes, trace::IoWorker{});
  ranges_.resize(n_nodes);
  for (auto& r : ranges_) r.clear();
}

void IoProbe::on_node_begin(int node, const Node& n) {
  auto& ranges = ranges_[static_cast<size_t>(node)];
  for (const ByteRange& r : n.reads)
    if (r.pool == Pool::MODEL_FILE && r.length) {
      const Residency res = residency(base_, r.offset, r.length, mincore_buf_);
      ranges.push_back({r.offset, r.length, res.pages, res.nonresident});
    }
}

void IoProbe::on_worker_begin(int thread) {
  Slot& s = slots_[static_cast<size_t>(thread)];
  s.begin = read_thread_io(s.proc_fd);
}

void IoProbe::on_worker_end(int thread, int node) {
  Slot& s = slots_[static_cast<size_t>(thread)];
  const ThreadIoCounters e = read_thread_io(s.proc_fd);
  workers_[static_cast<size_t>(thread)][static_cast<size_t>(node)] = {
      static_cast<uint16_t>(thread), e.major_faults - s.begin.major_faults, e.minor_faults - s.begin.minor_faults,
      e.read_bytes - s.begin.read_bytes};
}

nlohmann::json EvictResult::to_json() const {
  nlohmann::json j = {{"pages", pages},
                      {"resident_before", resident_before},
                      {"resident_after", resident_after},
                      {"evicted", resident_after == 0 && error.empty()}};
  if (!error.empty()) j["error"] = error;
  return j;
}

EvictResult evict_from_page_cache(int fd, const uint8_t* base, uint64_t size) {
  EvictResult r;
  std::vector<unsigned char> scratch;
  const Residency before = residency(base, 0, size, scratch);
  r.pages = before.pages;
  r.resident_before = before.pages - before.nonresident;
  const uint64_t ps = page_bytes();
  const uint64_t mapped = (size + ps - 1) / ps * ps;
  if (::madvise(const_cast<uint8_t*>(base), mapped, MADV_DONTNEED) != 0)
    r.error = std::string("madvise(DONTNEED): ") + std::strerror(errno);
  if (fd < 0)
    r.error = "no file descriptor";
  else if (int e = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); e != 0)
    r.error = std::string("posix_fadvise(DONTNEED): ") + std::strerror(e);
  const Residency after = residency(base, 0, size, scratch);
  r.resident_after = after.pages - after.nonresident;
  return r;
}

Prefetcher::Prefetcher(int fd, uint64_t file_size, Mode mode, Plan plan, int lookahead_ops)
    : fd_(fd), file_size_(file_size), mode_(mode), plan_(std::move(plan)), lookahead_(lookahead_ops) {
  requested_.assign((file_size + page_bytes() - 1) / page_bytes(), 0);
  thread_ = std::thread([this] { worker(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Prefetcher::on_graph_ready(const Graph& g, int32_t step) {
  const auto& nodes = g.nodes();
  triggers_.assign(nodes.size(), {});
  auto reads_of = [&](size_t i) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    if (mode_ == Mode::RECORDED) {
      if (plan_.empty()) return out;
      const auto& rec = plan_[std::min<size_t>(static_cast<size_t>(step), plan_.size() - 1)];
      if (i < rec.size()) out = rec[i];
      return out;
    }
    for (const ByteRange& r : nodes[i].reads)
      if (r.pool == Pool::MODEL_FILE && r.length) out.push_back({r.offset, r.length});
    return out;
  };
  if (mode_ == Mode::NEXT_LAYER) {
    // Segments of consecutive nodes with the same layer; at the start of one, request the next one's weights (and,
    // at node 0, the first segment's own).
    std::vector<size_t> starts;
    for (size_t i = 0; i < nodes.size(); ++i)
      if (i == 0 || nodes[i].layer != nodes[i - 1].layer) starts.push_back(i);
    starts.push_back(nodes.size());
    for (size_t s = 0; s + 1 < starts.size(); ++s) {
      auto& t = triggers_[starts[s]];
      if (s == 0)
        for (size_t i = starts[0]; i < starts[1]; ++i)
          for (auto r : reads_of(i)) t.push_back(r);
      if (s + 2 < starts.size())
        for (size_t i = starts[s + 1]; i < starts[s + 2]; ++i)
          for (auto r : reads_of(i)) t.push_back(r);
    }
  } else {
    // At node i, request the reads of the next `lookahead_` reading nodes not requested yet.
    size_t next = 0;  // first node not yet requested
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (next <= i) next = i;
      int found = 0;
      size_t j = next;
      for (; j < nodes.size() && found < lookahead_; ++j) {
        auto rs = reads_of(j);
        if (rs.empty()) continue;
        ++found;
        for (auto r : rs) triggers_[i].push_back(r);
      }
      next = j;
    }
  }
  move_triggers_off_views(g);
}

void Prefetcher::move_triggers_off_views(const Graph& g) {
  // The executor does not announce views: a trigger on one moves to the next computed node.
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!op_is_view(nodes[i].op) || triggers_[i].empty()) continue;
    size_t j = i + 1;
    while (j < nodes.size() && op_is_view(nodes[j].op)) ++j;
    if (j < nodes.size()) triggers_[j].insert(triggers_[j].begin(), triggers_[i].begin(), triggers_[i].end());
    triggers_[i].clear();
  }
}

void Prefetcher::on_node_begin(int node) {
  if (node < 0 || static_cast<size_t>(node) >= triggers_.size() || triggers_[node].empty()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto [off, len] : triggers_[node]) enqueue(off, len);
  }
  cv_.notify_one();
}

void Prefetcher::enqueue(uint64_t offset, uint64_t length) {
  // Only pages never requested before; split into runs of such pages.
  const uint64_t ps = page_bytes();
  uint64_t p = offset / ps;
  const uint64_t last = std::min<uint64_t>((offset + length - 1) / ps, requested_.size() - 1);
  while (p <= last) {
    while (p <= last && requested_[p]) ++p;
    const uint64_t b = p;
    while (p <= last && !requested_[p]) requested_[p++] = 1;
    if (p > b) queue_.push_back({b * ps, (p - b) * ps});
  }
}

void Prefetcher::worker() {
  std::vector<uint8_t> buf(1 << 20);
  for (;;) {
    std::pair<uint64_t, uint64_t> job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = queue_.front();
      queue_.pop_front();
    }
    ++requests_;
    uint64_t off = job.first, left = std::min(job.second, file_size_ > off ? file_size_ - off : 0);
    while (left > 0) {
      const ssize_t n = ::pread(fd_, buf.data(), std::min<uint64_t>(left, buf.size()), static_cast<off_t>(off));
      if (n <= 0) break;
      bytes_read_ += static_cast<uint64_t>(n);
      off += n;
      left -= n;
    }
  }
}

nlohmann::json Prefetcher::stats() const {
  return {{"mode", mode_ == Mode::NEXT_LAYER ? "next-layer" : "recorded"},
          {"requests", requests_.load()},
          {"bytes_read", bytes_read_.load()},
          {"lookahead_ops", lookahead_}};
}

}  // namespace tt
