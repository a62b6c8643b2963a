#include "model/weight_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

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
        units_.push_back({t, static_cast<int32_t>(e), t->offset + static_cast<uint64_t>(e) * slab, slab,
                          region_size_ + static_cast<uint64_t>(e) * stride, stride, phase});
      region_size_ += stride * static_cast<uint64_t>(t->ne[2]);
    } else {
      const uint64_t bytes = t->n_bytes();
      units_.push_back({t, -1, t->offset, bytes, region_size_, round_up(bytes, page_), phase});
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
    if (u.expert <= 0) {
      Tensor& t = *const_cast<Tensor*>(u.tensor);
      t.data = region_ + u.region_offset;
      if (u.expert == 0) t.expert_stride = u.region_bytes;
    }

  // OPT knows the future: the given stream's next uses.
  std::vector<size_t> next;
  if (options.policy == cache::Policy::OPT) {
    std::unordered_map<std::string, uint32_t> first;  // each tensor's first unit (expert e: + e)
    for (size_t i = units_.size(); i-- > 0;) first[units_[i].tensor->name] = static_cast<uint32_t>(i);
    std::vector<cache::Access> stream;
    for (const auto& [tensor, expert] : options.future) {
      auto it = first.find(tensor);
      const uint64_t key = it == first.end() ? UINT64_MAX : it->second + static_cast<uint64_t>(std::max(expert, 0));
      if (it == first.end() || key >= units_.size() || units_[key].tensor->name != tensor ||
          units_[key].expert != expert)
        fail("--cache-policy opt-from: the recorded run loads '{}'{}, which this model has not", tensor,
             expert >= 0 ? fmt::format(" expert {}", expert) : "");
      future_.push_back(key);
      stream.push_back({key, units_[key].region_bytes, units_[key].phase, false});
    }
    next = cache::next_use(stream);
  }
  cache_ = cache::PolicyCache(options.policy, budget_, n_phases_, std::move(next));
}

WeightStore::~WeightStore() {
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
  for (const Unit& u : units_) {
    if (u.expert > 0) continue;
    const int64_t n =
        u.expert < 0 ? 1 : std::min<int64_t>(u.tensor->ne[2], batch_tokens * std::max(1, model_.config.n_expert_used));
    const uint64_t need = u.region_bytes * static_cast<uint64_t>(n);
    if (need > worst) worst = need, worst_unit = &u;
  }
  if (worst > budget_)
    fail("--weight-budget {} ({} bytes) is below the {} bytes '{}' needs resident at once; give at least {}",
         options_.budget, budget_, worst, worst_unit->tensor->name, worst);
}

void WeightStore::check(const Graph& g) {
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

void WeightStore::load(const Unit& u) {
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
  if (!bounce_) {
    bounce_bytes_ = 1u << 22;  // a window, not a limit: larger units take several
    bounce_ = static_cast<uint8_t*>(std::aligned_alloc(kBlock, bounce_bytes_));
    if (!bounce_) throw std::bad_alloc();
  }
  for (uint64_t done = 0; done < u.bytes;) {
    const uint64_t at = u.file_offset + done, base = at / kBlock * kBlock, skip = at - base;
    const ssize_t got = pread(fd_, bounce_, bounce_bytes_, static_cast<off_t>(base));
    if (got < 0 && errno == EINTR) continue;
    if (got <= static_cast<ssize_t>(skip)) failed(at, got < 0 ? got : 0);
    const uint64_t n = std::min(static_cast<uint64_t>(got) - skip, u.bytes - done);
    std::memcpy(dst + done, bounce_ + skip, n);
    done += n;
  }
}

void WeightStore::drop(const Unit& u) {
  uint8_t* p = region_ + u.region_offset;
  if (madvise(p, u.region_bytes, MADV_DONTNEED) != 0 || mprotect(p, u.region_bytes, PROT_NONE) != 0)
    fail("--weight-budget: cannot evict '{}': {}", u.tensor->name, std::strerror(errno));
}

void WeightStore::acquire(int node, const Node& n) {
  units_of(n, scratch_);
  for (uint32_t key : scratch_) {
    const Unit& u = units_[key];
    if (options_.policy == cache::Policy::OPT) {
      const size_t t = cache_.accesses_so_far();
      if (t >= future_.size() || future_[t] != key)
        fail("--cache-policy opt-from: access {} is to '{}'{}, but the recorded run's {} (the access streams differ)",
             t, u.tensor->name, u.expert >= 0 ? fmt::format(" expert {}", u.expert) : "",
             t < future_.size()
                 ? fmt::format(
                       "was to '{}'{}", units_[future_[t]].tensor->name,
                       units_[future_[t]].expert >= 0 ? fmt::format(" expert {}", units_[future_[t]].expert) : "")
                 : "had ended");
    }
    const cache::Outcome& o = cache_.access({key, u.region_bytes, u.phase, false});
    for (uint64_t e : o.evicted) drop(units_[e]);
    totals_.evictions += o.evicted.size();
    WeightAccess a{key, static_cast<uint32_t>(node), now_ns(), 0, o.hit};
    if (!o.hit) {
      load(u);
      ++totals_.misses;
      totals_.bytes_read += u.bytes;
    } else {
      ++totals_.hits;
    }
    a.end_ns = o.hit ? a.start_ns : now_ns();
    totals_.read_ns += a.end_ns - a.start_ns;
    ++totals_.accesses;
    cache_.pin(key);
    pinned_.push_back(key);
    if (keep_) accesses_.push_back(a);
  }
  totals_.peak_resident_bytes = std::max(totals_.peak_resident_bytes, cache_.used_bytes());
}

void WeightStore::release(int, const Node&) {
  for (uint32_t key : pinned_) cache_.unpin(key);
  pinned_.clear();
}

void WeightStore::take_accesses(std::vector<WeightAccess>& out) {
  out.clear();
  std::swap(out, accesses_);
}

uint64_t WeightStore::measured_resident_bytes() const {
  const uint64_t pages = (std::max<uint64_t>(region_size_, page_) + page_ - 1) / page_;
  std::vector<unsigned char> v(pages);
  if (mincore(region_, pages * page_, v.data()) != 0) fail("mincore of the weight region: {}", std::strerror(errno));
  uint64_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n * page_;
}

void WeightStore::finish() const {
  if (options_.policy == cache::Policy::OPT && cache_.accesses_so_far() != future_.size())
    fail("--cache-policy opt-from: this run made {} weight accesses, the recorded run {} (the access streams differ)",
         cache_.accesses_so_far(), future_.size());
}

}  // namespace tt
