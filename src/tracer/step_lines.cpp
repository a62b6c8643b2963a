#include "tracer/step_lines.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/vocab_clones.h"
#include "tokenizer/tokenizer.h"
#include "trace/hash.h"
#include "tracer/landscape.h"

namespace tt {
namespace {

// Sum, sum of squares (in double), min and max of v: vectors of the GCC/Clang extension with four independent
// chains per sum (the add latency, not the loads, bounded the two-chain loop), cloned for AVX-512 and AVX2 with FMA
// so the vocabulary-sized logits take a few microseconds a step.
TT_VOCAB_CLONES void moments(const float* v, size_t n, double& sum, double& sum2, float& mn, float& mx) {
  typedef float Float8 __attribute__((vector_size(32)));
  typedef double Double4 __attribute__((vector_size(32)));
  Double4 s[4] = {}, q[4] = {};
  Float8 lo = Float8{} + v[0], hi = lo;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int h = 0; h < 2; ++h) {
      Float8 x;
      std::memcpy(&x, v + i + 8 * h, sizeof(x));
      const Double4 a = {x[0], x[1], x[2], x[3]}, b = {x[4], x[5], x[6], x[7]};
      s[2 * h] += a, s[2 * h + 1] += b;
      q[2 * h] += a * a, q[2 * h + 1] += b * b;
      lo = x < lo ? x : lo;
      hi = x > hi ? x : hi;
    }
  }
  const Double4 st = (s[0] + s[1]) + (s[2] + s[3]), qt = (q[0] + q[1]) + (q[2] + q[3]);
  sum = (st[0] + st[1]) + (st[2] + st[3]);
  sum2 = (qt[0] + qt[1]) + (qt[2] + qt[3]);
  mn = lo[0], mx = hi[0];
  for (int k = 1; k < 8; ++k) mn = std::min(mn, lo[k]), mx = std::max(mx, hi[k]);
  for (; i < n; ++i) {
    sum += v[i], sum2 += static_cast<double>(v[i]) * v[i];
    mn = std::min(mn, v[i]), mx = std::max(mx, v[i]);
  }
}

// All but the hash.
ReadoutStats readout_moments(std::span<const float> v) {
  ReadoutStats r;
  if (v.empty()) return r;
  double s = 0, s2 = 0;
  moments(v.data(), v.size(), s, s2, r.min, r.max);
  r.mean = s / v.size();
  r.std = std::sqrt(std::max(0.0, s2 / v.size() - r.mean * r.mean));
  return r;
}

}  // namespace

uint64_t readout_hash(std::span<const float> v) { return xxh3_64(v.data(), v.size_bytes()); }

ReadoutStats readout_stats(std::span<const float> v) {
  ReadoutStats r = readout_moments(v);
  r.hash = readout_hash(v);
  return r;
}

namespace {

// 16 lowercase hex digits (as fmt's {:016x}, without its heap string: the line is written every step).
struct Hex64 {
  char digits[16];
  operator std::string_view() const { return {digits, sizeof(digits)}; }
};
Hex64 hex64(uint64_t v) {
  Hex64 h;
  for (int i = 15; i >= 0; --i, v >>= 4) h.digits[i] = "0123456789abcdef"[v & 15];
  return h;
}

}  // namespace

void ReadoutStats::write(JsonLine& j) const {
  j.begin_object()
      .field("min", min)
      .field("max", max)
      .field("mean", mean)
      .field("std", std)
      .field("hash", hex64(hash))
      .end_object();
}

StepLineWriter::StepLineWriter(const std::string& path, const Tokenizer& tokenizer, int top_k)
    : path_(path), file_(path, std::ios::trunc), tokenizer_(tokenizer), top_k_(top_k) {
  if (!file_) fail("cannot create '{}'", path);
}

void StepLineWriter::write(const StepCapture& c) {
  const std::span<const float> logits = c.logits;
  const int k = std::min<int>(top_k_, static_cast<int>(logits.size()));
  const LogitLandscape land = logit_landscape(logits, std::max(k, 2));  // the top-1/top-2 gap needs two
  auto text_of = [&](int32_t id) {
    return id >= 0 && id < tokenizer_.n_vocab() ? tokenizer_.piece_view(id, true) : std::string_view();
  };
  const trace::StepMarker& m = c.marker;
  JsonLine& j = line_;
  j.clear();
  j.begin_object()
      .field("step", m.step)
      .field("phase", phase_name(m.phase))
      .field("pos_begin", m.pos_begin)
      .field("pos_end", m.pos_end);
  j.begin_array("input_tokens");
  for (int32_t t : c.input_tokens) j.value(t);
  j.end_array();
  const int32_t chosen = c.sampled.token;
  if (chosen >= 0) {
    const float logit = static_cast<size_t>(chosen) < logits.size() ? logits[chosen] : 0.0f;
    j.field("token", chosen)
        .field("token_text", text_of(chosen))
        .field("probability", c.sampled.probability)
        .field("softmax_probability", land.prob(logit));
  } else {
    j.key("token").null().key("token_text").null().key("probability").null().key("softmax_probability").null();
  }
  j.field("end_of_generation", c.end_of_generation);
  j.begin_array("top_k");
  for (int r = 0; r < k; ++r) {
    const int32_t id = land.top[r];
    const float logit = logits[static_cast<size_t>(id)];
    j.begin_object().field("id", id).field("text", text_of(id)).field("logit", logit).field("prob", land.prob(logit));
    j.end_object();
  }
  j.end_array();
  j.field("top1_top2_gap", land.top.size() > 1 ? logits[land.top[0]] - logits[land.top[1]] : 0.0f)
      .field("entropy", land.entropy);
  j.key("hidden_stats");
  readout_stats(c.hidden).write(j);
  ReadoutStats ls;
  ls.min = land.min_logit, ls.max = land.max_logit, ls.mean = land.mean_logit, ls.std = land.std_logit;
  ls.hash = readout_hash(logits);
  j.key("logits_stats");
  ls.write(j);
  j.field("start_ns", m.start_ns)
      .field("end_ns", m.end_ns)
      .field("n_ops", static_cast<uint64_t>(c.graph->records.size()))
      .field("graph", c.graph->id)
      .end_object();
  pending_ += j.str();
  pending_ += '\n';
}

void StepLineWriter::flush() {
  file_.write(pending_.data(), static_cast<std::streamsize>(pending_.size()));
  file_.flush();
  if (!file_) fail("error writing '{}'", path_);
  pending_.clear();
}

}  // namespace tt
