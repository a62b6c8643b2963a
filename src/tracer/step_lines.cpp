#include "tracer/step_lines.h"

#include <xxhash.h>

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

namespace {

// "routing": [{"layer": L, "pos_begin": P, "experts": [[ids of token P], [ids of P + 1], ...]}, ...]: a layer's
// tokens are the step's last n (the last layer of a prompt routes only its last token).
void write_routing_field(JsonLine& j, const StepOutcome& o) {
  j.begin_array("routing");
  for (const LayerRouting& l : o.routing) {
    const int64_t n = l.n_tokens(), k = l.n_used();
    if (n == 0) continue;
    j.begin_object()
        .field("layer", static_cast<uint32_t>(l.layer))
        .field("pos_begin", o.pos_end - static_cast<int32_t>(n));
    j.begin_array("experts");
    for (int64_t t = 0; t < n; ++t) {
      j.begin_array();
      for (int64_t s = 0; s < k; ++s) j.value(l.expert(t, s));
      j.end_array();
    }
    j.end_array().end_object();
  }
  j.end_array();
}

}  // namespace

StepLines::StepLines(RunDirWriter& dir, const Tokenizer& tokenizer, int top_k, uint64_t run_start_ns)
    : dir_(dir), tokenizer_(tokenizer), top_k_(top_k), t0_(run_start_ns) {
  if (top_k < 1) fail("--logit-top-k must be at least 1, got {}", top_k);
  stream_ = std::make_unique<std::ofstream>(dir.path("steps.jsonl"), std::ios::trunc);
  if (!*stream_) fail("cannot create '{}'", dir.path("steps.jsonl"));
  // Flushed before it passes kFlushBytes, so it never grows inside a step.
  reserve_touched(pending_, 2 * FlushSchedule::kFlushBytes);
}

void StepLines::on_step_end(const StepOutcome& o, int graph, uint64_t n_ops, uint64_t now_ns,
                            const WeightStepTotals* weights) {
  const std::span<const float> logits = o.logits;
  if (logits.empty()) fail("internal error: step {} has no logits to trace", o.step);
  const int k = std::min<int>(top_k_, static_cast<int>(logits.size()));
  const LogitLandscape land = logit_landscape(logits, std::max(k, 2));  // the top-1/top-2 gap needs two
  ReadoutStats logits_stats;
  logits_stats.min = land.min_logit, logits_stats.max = land.max_logit;
  logits_stats.mean = land.mean_logit, logits_stats.std = land.std_logit;
  logits_stats.hash = readout_hash(logits);
  auto text_of = [&](int32_t id) {
    return id >= 0 && id < tokenizer_.n_vocab() ? tokenizer_.piece_view(id, true) : std::string_view();
  };
  const int32_t chosen = o.sampled.token;
  JsonLine& j = line_;
  j.clear();
  j.begin_object()
      .field("step", o.step)
      .field("phase", phase_name(o.phase))
      .field("pos_begin", o.pos_begin)
      .field("pos_end", o.pos_end);
  j.begin_array("input_tokens");
  for (int32_t t : o.input_tokens) j.value(t);
  j.end_array();
  if (chosen >= 0) {
    const float chosen_logit = static_cast<size_t>(chosen) < logits.size() ? logits[chosen] : 0.0f;
    j.field("token", chosen)
        .field("token_text", text_of(chosen))
        .field("probability", o.sampled.probability)
        .field("softmax_probability", land.prob(chosen_logit));
  } else {
    j.key("token").null().key("token_text").null().key("probability").null().key("softmax_probability").null();
  }
  j.field("end_of_generation", o.end_of_generation);
  j.begin_array("top_k");
  for (int i = 0; i < k; ++i) {
    const int32_t id = land.top[i];
    const float logit = logits[id];
    j.begin_object()
        .field("id", id)
        .field("text", text_of(id))
        .field("logit", logit)
        .field("prob", land.prob(logit))
        .end_object();
  }
  j.end_array();
  j.field("top1_top2_gap", land.top.size() > 1 ? logits[land.top[0]] - logits[land.top[1]] : 0.0f)
      .field("entropy", land.entropy);
  if (std::any_of(o.routing.begin(), o.routing.end(), [](const LayerRouting& l) { return l.n_tokens() > 0; }))
    write_routing_field(j, o);
  if (weights) weights->write(j);
  j.key("hidden_stats");
  readout_stats(o.hidden).write(j);
  j.key("logits_stats");
  logits_stats.write(j);
  j.field("start_ns", o.start_ns - t0_)
      .field("end_ns", o.end_ns - t0_)
      .field("n_ops", n_ops)
      .field("graph", graph)
      .end_object();
  pending_ += j.str();
  pending_ += '\n';
  if (flush_.due(now_ns, pending_.size())) flush();
}

void StepLines::flush() {
  stream_->write(pending_.data(), static_cast<std::streamsize>(pending_.size()));
  stream_->flush();
  pending_.clear();
}

void StepLines::finish() {
  flush();
  if (!*stream_) fail("error writing '{}'", dir_.path("steps.jsonl"));
}

}  // namespace tt
