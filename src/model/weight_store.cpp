#include "model/weight_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "core/clock.h"
#include "core/error.h"

namespace tt {
namespace {

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

bool is_expert_tensor(const Tensor& t) {
  const std::string& n = t.name;
  return t.ne[2] > 1 && n.size() > 12 && n.compare(n.size() - 12, 12, "_exps.weight") == 0;
}

}  // namespace

WeightBudget WeightBudget::parse(const std::string& text) {
  if (text.empty()) fail("--weight-budget: empty (give bytes with K/M/G, e.g. 512M, or a percent, e.g. 50%)");
  WeightBudget b;
  if (text.back() == '%') {
    const std::string num = text.substr(0, text.size() - 1);
    size_t used = 0;
    try {
      b.percent = std::stod(num, &used);
    } catch (...) {
      used = 0;
    }
    if (num.empty() || used != num.size() || !(b.percent > 0) || b.percent > 100)
      fail("--weight-budget '{}': a percent must be a number in (0, 100]", text);
    return b;
  }
  try {
    b.bytes = cache::parse_size(text);
  } catch (const Error& e) {
    fail("--weight-budget: {}", e.what());
  }
  if (b.bytes == 0) fail("--weight-budget '{}' is 0 bytes", text);
  return b;
}

uint64_t WeightBudget::of(uint64_t all) const {
  return percent > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(all) * percent / 100.0)) : bytes;
}

WeightStore::WeightStore(Model& model, const WeightStoreOptions& options)
    : model_(model), options_(options), cache_(cache::Policy::LRU, 0) {
  page_ = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const int n_layer = model.config.n_layer;
  n_phases_ = static_cast<uint32_t>(n_layer) + 2;
  // Units in file order, each page-aligned in the region.
  std::vector<Tensor*> tensors;
  // rope_freqs reaches ROPE as a parameter, not a graph input the executor sees: it stays in the file mapping.
  for (Tensor& t : model.weights.views)
    if (&t != model.weights.rope_freqs) tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(), [](const Tensor* a, const Tensor* b) { return a->offset < b->offset; });
  for (Tensor* t : tensors) {
    const uint32_t phase = t->layer >= 0                   ? static_cast<uint32_t>(t->layer) + 1
                           : t == model.weights.token_embd ? 0
                                                           : static_cast<uint32_t>(n_layer) + 1;
    if (is_expert_tensor(*t)) {
      const uint64_t slab = t->row_size() * static_cast<uint64_t>(t->ne[1]);
      const uint64_t stride = round_up(slab, page_);
      for (int64_t e = 0; e < t->ne[2]; ++e)
        add_unit(t, static_cast<int32_t>(e), t->offset + static_cast<uint64_t>(e) * slab, slab,
                 region_size_ + static_cast<uint64_t>(e) * stride, stride, phase);
      region_size_ += stride * static_cast<uint64_t>(t->ne[2]);
    } else if (t == model.weights.token_embd && t->ne[2] <= 1 && t->ne[3] <= 1) {
      // Groups of the fewest whole rows that fill whole pages (contiguous in the region, as the kernels index rows),
      // so a GET_ROWS brings in its tokens' rows only.
      const uint64_t row = t->row_size(), rows = static_cast<uint64_t>(t->ne[1]);
      const uint64_t group = page_ / std::gcd(row, page_);
      for (uint64_t r = 0; r < rows; r += group) {
        const uint64_t bytes = std::min(group, rows - r) * row;
        add_unit(t, -1, t->offset + r * row, bytes, region_size_ + r * row, round_up(bytes, page_), phase);
      }
      region_size_ += round_up(row * rows, page_);
    } else {
      const uint64_t bytes = t->n_bytes();
      add_unit(t, -1, t->offset, bytes, region_size_, round_up(bytes, page_), phase);
      region_size_ += round_up(bytes, page_);
    }
  }
  budget_ = WeightBudget::parse(options.budget).of(region_size_);
  for (size_t i = 0; i < units_.size(); ++i) by_offset_.emplace_back(units_[i].file_offset, static_cast<uint32_t>(i));

  const std::string& path = model.file->path();
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (options.direct_io ? O_DIRECT : 0));
  if (fd_ < 0)
    fail("{}: cannot open for {}reads: {}", path, options.direct_io ? "--direct-io (O_DIRECT) " : "",
         std::strerror(errno));
  void* p = mmap(nullptr, std::max<uint64_t>(region_size_, page_), PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    ::close(fd_);
    fail("--weight-budget: cannot reserve {} bytes of address space for the weights: {}", region_size_,
         std::strerror(errno));
  }
  region_ = static_cast<uint8_t*>(p);
  for (const Unit& u : units_)
    if (u.expert <= 0 && u.file_offset == u.tensor->offset) {  // a tensor's first unit
      Tensor& t = *const_cast<Tensor*>(u.tensor);
      t.data = region_ + u.region_offset;
      if (u.expert == 0) t.expert_stride = u.region_bytes;
    }
  state_.assign(units_.size(), ABSENT);
  pins_.assign(units_.size(), 0);
  queued_.assign(units_.size(), 0);

  // OPT knows the future: the given stream's next uses.
  std::vector<size_t> next;
  if (options.policy == cache::Policy::OPT) {
    std::vector<cache::Access> stream;
    for (const auto& [tensor, expert, offset] : options.future) {
      const uint64_t key = recorded_unit(tensor, expert, offset, "--cache-policy opt-from");
      future_.push_back(key);
      stream.push_back({key, units_[key].region_bytes, units_[key].phase, false});
    }
    next = cache::next_use(stream);
  }
  cache_ = cache::PolicyCache(options.policy, budget_, n_phases_, std::move(next));

  if (options.prefetch == WeightStoreOptions::Prefetch::NONE) return;
  phase_units_.resize(n_phases_);
  layer_experts_.resize(static_cast<size_t>(n_layer));
  std::vector<size_t> per_layer(n_phases_);
  for (size_t i = 0; i < units_.size(); ++i) {
    const Unit& u = units_[i];
    ++per_layer[u.phase];
    if (u.expert < 0)
      phase_units_[u.phase].push_back(static_cast<uint32_t>(i));
    else if (u.expert == 0 && u.tensor->layer >= 0)
      layer_experts_[static_cast<size_t>(u.tensor->layer)].push_back(static_cast<uint32_t>(i));
  }
  for (uint32_t p = 1; p < n_phases_; ++p) ahead_ = std::max(ahead_, per_layer[p]);
  for (const auto& [tensor, expert, offset] : options.recorded)
    recorded_.push_back(recorded_unit(tensor, expert, offset, "--prefetch from"));
  thread_ = std::thread([this] { prefetch_loop(); });
}

void WeightStore::add_unit(const Tensor* t, int32_t expert, uint64_t file_offset, uint64_t bytes,
                           uint64_t region_offset, uint64_t region_bytes, uint32_t phase) {
  units_.push_back({t, expert, file_offset, bytes, region_offset, region_bytes, phase});
}

uint32_t WeightStore::recorded_unit(const std::string& tensor, int32_t expert, uint64_t offset,
                                    const char* what) const {
  const Unit* u = unit_at(offset);
  if (!u || u->file_offset != offset || u->tensor->name != tensor || u->expert != expert)
    fail("{}: the recorded run loads '{}'{} at file offset {}, which this model has not", what, tensor,
         expert >= 0 ? fmt::format(" expert {}", expert) : "", offset);
  return static_cast<uint32_t>(u - units_.data());
}

WeightStore::~WeightStore() {
  stop_prefetcher();
  std::free(prefetch_bounce_);
  if (region_) munmap(region_, std::max<uint64_t>(region_size_, page_));
  if (fd_ >= 0) ::close(fd_);
  std::free(bounce_);
}

int64_t WeightStore::find_unit(const std::string& tensor, int32_t expert) const {
  for (size_t i = 0; i < units_.size(); ++i)
    if (units_[i].expert == expert && units_[i].tensor->name == tensor) return static_cast<int64_t>(i);
  return -1;
}

const WeightStore::Unit* WeightStore::unit_at(uint64_t offset) const {
  auto it = std::upper_bound(by_offset_.begin(), by_offset_.end(), std::make_pair(offset, UINT32_MAX));
  if (it == by_offset_.begin()) return nullptr;
  const Unit& u = units_[std::prev(it)->second];
  return offset < u.file_offset + u.bytes ? &u : nullptr;
}

void WeightStore::units_of(const Node& n, std::vector<uint32_t>& out, int skip_input) const {
  out.clear();
  for (const ByteRange& r : n.reads) {
    if (r.pool != Pool::MODEL_FILE || r.length == 0 || r.input == skip_input) continue;
    // Every unit the range overlaps (a range never leaves its tensor; a GET_ROWS reads rows of the embedding).
    for (uint64_t at = r.offset; at < r.offset + r.length;) {
      const Unit* u = unit_at(at);
      TT_CHECK(u != nullptr, "node '{}' reads model-file byte {}, which no weight holds", n.out->name, at);
      out.push_back(static_cast<uint32_t>(u - units_.data()));
      at = u->file_offset + u->bytes;
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

void WeightStore::require(int64_t batch_tokens) const {
  uint64_t worst = 0;
  const Unit* worst_unit = nullptr;
  for (size_t i = 0; i < units_.size(); ++i) {
    const Unit& u = units_[i];
    if (u.file_offset != u.tensor->offset) continue;  // a tensor's first unit stands for its others
    int64_t n = 1;
    if (u.expert == 0) {
      n = std::min<int64_t>(u.tensor->ne[2], batch_tokens * std::max(1, model_.config.n_expert_used));
    } else if (u.bytes < u.tensor->n_bytes()) {  // the embedding's row groups: one per token, or all when tied
      int64_t groups = 0;
      for (size_t j = i; j < units_.size() && units_[j].tensor == u.tensor; ++j) ++groups;
      n = model_.weights.output_tied ? groups : std::min(groups, batch_tokens);
    }
    const uint64_t need = u.region_bytes * static_cast<uint64_t>(n);
    if (need > worst) worst = need, worst_unit = &u;
  }
  if (worst > budget_)
    fail("--weight-budget {} ({} bytes) is below the {} bytes '{}' needs resident at once; give at least {}",
         options_.budget, budget_, worst, worst_unit->tensor->name, worst);
}

void WeightStore::check(const Graph& g) {
  graph_ = &g;
  next_prediction_ = 0;
  if (options_.prefetch == WeightStoreOptions::Prefetch::NEXT_LAYER) {
    // The graph's predictions of a next routed layer's experts (ffn_moe_pred_topk, RunState::moe_predict).
    predictions_.clear();
    const auto& nodes = g.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Tensor& t = *nodes[i].out;
      if (t.layer < 0 || t.name.rfind("ffn_moe_pred_topk", 0) != 0) continue;
      size_t next = static_cast<size_t>(t.layer) + 1;
      while (next < layer_experts_.size() && layer_experts_[next].empty()) ++next;
      if (next < layer_experts_.size()) predictions_.emplace_back(static_cast<uint32_t>(i), static_cast<int>(next));
    }
  }
  if (g.structure_id != 0 && g.structure_id == checked_structure_) return;
  // What each node may need at once: its weights' units; a MUL_MAT_ID as many experts as its ids may name.
  uint64_t worst = 0;
  const Node* worst_node = nullptr;
  std::vector<uint32_t> units;
  for (const Node& n : g.nodes()) {
    if (op_is_view(n.op)) continue;
    // A MUL_MAT_ID's weight reads are the last step's experts: counted as the most its ids may name instead.
    units_of(n, units, n.op == OpKind::MUL_MAT_ID ? 0 : -1);
    uint64_t need = 0;
    for (uint32_t u : units) need += units_[u].region_bytes;
    if (n.op == OpKind::MUL_MAT_ID) {
      const Tensor& w = *n.src[0];
      const int64_t experts = std::min<int64_t>(w.ne[2], n.src[2]->n_elements());
      need += units_[static_cast<size_t>(find_unit(w.storage().name, 0))].region_bytes * static_cast<uint64_t>(experts);
    }
    if (need > worst) worst = need, worst_node = &n;
  }
  if (worst > budget_)
    fail("--weight-budget {} ({} bytes) is below the {} bytes node '{}' needs resident at once; give at least {}",
         options_.budget, budget_, worst, worst_node->out->name, worst);
  checked_structure_ = g.structure_id;
}

void WeightStore::load(const Unit& u, uint8_t*& bounce) {
  uint8_t* dst = region_ + u.region_offset;
  if (mprotect(dst, u.region_bytes, PROT_READ | PROT_WRITE) != 0)
    fail("--weight-budget: cannot make '{}' writable: {}", u.tensor->name, std::strerror(errno));
  const std::string& path = model_.file->path();
  auto failed = [&](uint64_t at, ssize_t got) {
    if (got == 0)
      fail("{}: reading '{}'{} at file offset {}: the file ends there (truncated under the run?)", path, u.tensor->name,
           u.expert >= 0 ? fmt::format(" expert {}", u.expert) : "", at);
    fail("{}: reading '{}'{} at file offset {}: {}", path, u.tensor->name,
         u.expert >= 0 ? fmt::format(" expert {}", u.expert) : "", at, std::strerror(errno));
  };
  if (!options_.direct_io) {
    for (uint64_t done = 0; done < u.bytes;) {
      const ssize_t got = pread(fd_, dst + done, u.bytes - done, static_cast<off_t>(u.file_offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) failed(u.file_offset + done, got);
      done += static_cast<uint64_t>(got);
    }
    return;
  }
  // O_DIRECT reads whole aligned blocks into aligned memory: in place when the unit starts on a block (its pages
  // hold the rounded-up tail), else through the bounce buffer, a block-aligned window at a time.
  constexpr uint64_t kBlock = 4096;
  if (u.file_offset % kBlock == 0) {
    const uint64_t want = round_up(u.bytes, kBlock);
    for (uint64_t done = 0; done < u.bytes;) {
      const ssize_t got = pread(fd_, dst + done, want - done, static_cast<off_t>(u.file_offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) failed(u.file_offset + done, got);
      done += static_cast<uint64_t>(got);
    }
    return;
  }
  constexpr uint64_t kBounce = 1u << 22;  // a window, not a limit: larger units take several
  if (!bounce) {
    bounce = static_cast<uint8_t*>(std::aligned_alloc(kBlock, kBounce));
    if (!bounce) throw std::bad_alloc();
  }
  for (uint64_t done = 0; done < u.bytes;) {
    const uint64_t at = u.file_offset + done, base = at / kBlock * kBlock, skip = at - base;
    const ssize_t got = pread(fd_, bounce, kBounce, static_cast<off_t>(base));
    if (got < 0 && errno == EINTR) continue;
    if (got <= static_cast<ssize_t>(skip)) failed(at, got < 0 ? got : 0);
    const uint64_t n = std::min(static_cast<uint64_t>(got) - skip, u.bytes - done);
    std::memcpy(dst + done, bounce + skip, n);
    done += n;
  }
}

void WeightStore::drop(const Unit& u) {
  uint8_t* p = region_ + u.region_offset;
  if (madvise(p, u.region_bytes, MADV_DONTNEED) != 0 || mprotect(p, u.region_bytes, PROT_NONE) != 0)
    fail("--weight-budget: cannot evict '{}': {}", u.tensor->name, std::strerror(errno));
}

void WeightStore::pin(uint32_t key) {
  if (pins_[key]++ == 0) cache_.pin(key), pinned_bytes_ += units_[key].region_bytes;
}

void WeightStore::unpin(uint32_t key) {
  if (--pins_[key] == 0) cache_.unpin(key), pinned_bytes_ -= units_[key].region_bytes;
}

const cache::Outcome& WeightStore::cache_access(uint32_t key, bool prefetch) {
  const Unit& u = units_[key];
  const cache::Outcome& o = cache_.access({key, u.region_bytes, u.phase, prefetch});
  for (uint64_t e : o.evicted) drop(units_[e]), state_[e] = ABSENT;
  totals_.evictions += o.evicted.size();
  if (o.loaded) state_[key] = LOADING, pin(key), ++loading_;
  return o;
}

void WeightStore::acquire(int node, const Node& n) {
  units_of(n, scratch_);
  std::unique_lock lock(mu_);
  running_node_ = static_cast<uint32_t>(node);
  if (options_.prefetch != WeightStoreOptions::Prefetch::NONE) on_node(node);
  for (uint32_t key : scratch_) {
    const Unit& u = units_[key];
    if (options_.policy == cache::Policy::OPT) {
      const size_t t = demand_accesses_;
      if (t >= future_.size() || future_[t] != key)
        fail("--cache-policy opt-from: access {} is to '{}'{}, but the recorded run's {} (the access streams differ)",
             t, u.tensor->name, u.expert >= 0 ? fmt::format(" expert {}", u.expert) : "",
             t < future_.size()
                 ? fmt::format(
                       "was to '{}'{}", units_[future_[t]].tensor->name,
                       units_[future_[t]].expert >= 0 ? fmt::format(" expert {}", units_[future_[t]].expert) : "")
                 : "had ended");
    }
    const uint64_t start = now_ns();
    // Room for it beside the units pinned now: prefetch reads in flight release theirs as they end (check() made
    // sure the node's own units fit).
    while (state_[key] == ABSENT && pinned_bytes_ + u.region_bytes > budget_ && loading_ > 0) loaded_.wait(lock);
    // (copied: the prefetcher's accesses overwrite the outcome while this thread reads)
    const cache::Outcome& o = cache_access(key, false);
    const bool hit = o.hit, loaded = o.loaded, useful = o.useful;
    ++demand_accesses_;
    // Recorded in the cache's order: before the prefetcher's next access, which may come while this one reads.
    if (keep_) accesses_.push_back({});
    const size_t at = taken_ + accesses_.size() - 1;
    WeightAccess a{key, static_cast<uint32_t>(node), start, start, 0, hit, false, useful, true};
    if (useful) ++totals_.prefetch_hits;
    if (!hit) {
      lock.unlock();
      const uint64_t t0 = now_ns();
      load(u, bounce_);
      const uint64_t t1 = now_ns();
      lock.lock();
      if (loaded) {  // (else it never fits: check() refuses such a budget)
        state_[key] = RESIDENT;
        unpin(key);
        --loading_;
        loaded_.notify_all();
      }
      ++totals_.misses;
      totals_.bytes_read += u.bytes;
      totals_.read_ns += t1 - t0;
      a.end_ns = now_ns();
    } else {
      if (state_[key] == LOADING) {  // a prefetch is reading it: wait for that read
        while (state_[key] == LOADING) loaded_.wait(lock);
        a.end_ns = now_ns();
      }
      if (prefetch_error_) std::rethrow_exception(prefetch_error_);
      ++totals_.hits;
    }
    a.wait_ns = a.end_ns - a.start_ns;
    totals_.stall_ns += a.wait_ns;
    ++totals_.accesses;
    pin(key);
    pinned_.push_back(key);
    if (keep_) accesses_[at - taken_] = a;  // (only this thread takes accesses: `at` is still there)
  }
  totals_.peak_resident_bytes = std::max(totals_.peak_resident_bytes, cache_.used_bytes());
}

void WeightStore::release(int, const Node&) {
  std::lock_guard lock(mu_);
  for (uint32_t key : pinned_) unpin(key);
  pinned_.clear();
}

void WeightStore::enqueue(uint32_t key) {
  if (queued_[key] || state_[key] != ABSENT) return;
  queued_[key] = 1;
  queue_.push_back(key);
}

void WeightStore::on_node(int node) {
  if (options_.prefetch == WeightStoreOptions::Prefetch::RECORDED) {
    // The recorded accesses up to one layer's units past this node's last.
    const size_t until = std::min(recorded_.size(), demand_accesses_ + scratch_.size() + ahead_);
    for (; recorded_queued_ < until; ++recorded_queued_) enqueue(recorded_[recorded_queued_]);
    if (!queue_.empty()) work_.notify_one();
    return;
  }
  if (!scratch_.empty()) {
    const uint32_t phase = units_[scratch_.front()].phase;
    if (phase != current_phase_) {
      // A layer starts: the queue's units not yet read are this layer's (left to demand); the next layer's go in.
      current_phase_ = phase;
      for (uint32_t k : queue_) queued_[k] = 0;
      queue_.clear();
      const uint32_t next = phase + 1 < n_phases_ ? phase + 1 : 1;
      for (uint32_t k : phase_units_[next]) enqueue(k);
    }
  }
  // Predictions computed since the last node: their layer's experts.
  for (; next_prediction_ < predictions_.size() && predictions_[next_prediction_].first < static_cast<uint32_t>(node);
       ++next_prediction_) {
    const auto [pred_node, layer] = predictions_[next_prediction_];
    const Tensor& ids = *graph_->nodes()[pred_node].out;
    const int32_t* e = ids.as<const int32_t>();
    for (uint32_t first : layer_experts_[static_cast<size_t>(layer)]) {
      const int64_t n_experts = units_[first].tensor->ne[2];
      for (int64_t i = 0; i < ids.n_elements(); ++i)
        if (e[i] >= 0 && e[i] < n_experts) enqueue(first + static_cast<uint32_t>(e[i]));
    }
  }
  if (!queue_.empty()) work_.notify_one();
}

void WeightStore::prefetch_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const uint32_t key = queue_.front();
    queue_.pop_front();
    queued_[key] = 0;
    const Unit& u = units_[key];
    // Resident or being read already; or no room without evicting a pinned unit: left to demand.
    if (state_[key] != ABSENT || pinned_bytes_ + u.region_bytes > budget_ || prefetch_error_) continue;
    cache_access(key, true);
    WeightAccess a{key, running_node_, now_ns(), 0, 0, false, true, false, false};
    const size_t at = taken_ + accesses_.size();
    if (keep_) accesses_.push_back(a);
    lock.unlock();
    std::exception_ptr error;
    try {
      load(u, prefetch_bounce_);
    } catch (...) {
      error = std::current_exception();
    }
    const uint64_t end = now_ns();
    lock.lock();
    if (error) prefetch_error_ = error;
    state_[key] = RESIDENT;
    unpin(key);
    --loading_;
    ++totals_.prefetches;
    totals_.prefetch_bytes += u.bytes;
    totals_.bytes_read += u.bytes;
    totals_.read_ns += end - a.start_ns;
    totals_.peak_resident_bytes = std::max(totals_.peak_resident_bytes, cache_.used_bytes());
    if (keep_ && at >= taken_) {
      WeightAccess& r = accesses_[at - taken_];
      r.end_ns = end;
      r.done = true;
    }
    loaded_.notify_all();
  }
}

void WeightStore::take_accesses(std::vector<WeightAccess>& out) {
  out.clear();
  std::lock_guard lock(mu_);
  while (!accesses_.empty() && accesses_.front().done) {
    out.push_back(accesses_.front());
    accesses_.pop_front();
    ++taken_;
  }
}

WeightStore::Totals WeightStore::totals() const {
  std::lock_guard lock(mu_);
  return totals_;
}

uint64_t WeightStore::resident_bytes() const {
  std::lock_guard lock(mu_);
  return cache_.used_bytes();
}

uint64_t WeightStore::measured_resident_bytes() const {
  const uint64_t pages = (std::max<uint64_t>(region_size_, page_) + page_ - 1) / page_;
  std::vector<unsigned char> v(pages);
  if (mincore(region_, pages * page_, v.data()) != 0) fail("mincore of the weight region: {}", std::strerror(errno));
  uint64_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n * page_;
}

void WeightStore::stop_prefetcher() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void WeightStore::finish() {
  stop_prefetcher();
  if (prefetch_error_) std::rethrow_exception(prefetch_error_);
  if (options_.policy == cache::Policy::OPT && demand_accesses_ != future_.size())
    fail("--cache-policy opt-from: this run made {} weight accesses, the recorded run {} (the access streams differ)",
         demand_accesses_, future_.size());
}

}  // namespace tt
