// The step lines (steps.jsonl): per step its tokens, the chosen token, the logit landscape (top-k, entropy), the
// logits' and last hidden state's statistics and hash, from the step's capture, on the tracer's writer thread.
#pragma once

#include <cstdint>
#include <fstream>
#include <span>
#include <string>

#include "trace/json_line.h"
#include "tracer/step_capture.h"

namespace tt {

class Tokenizer;

// Statistics of a float vector: min, max, mean, std, XXH3-64 of the bytes.
struct ReadoutStats {
  float min = 0, max = 0;
  double mean = 0, std = 0;
  uint64_t hash = 0;
  void write(JsonLine& j) const;  // {"min", "max", "mean", "std", "hash" (16 hex digits)}
};
ReadoutStats readout_stats(std::span<const float> v);
uint64_t readout_hash(std::span<const float> v);  // XXH3-64 of the bytes

class StepLineWriter {
 public:
  StepLineWriter(const std::string& path, const Tokenizer& tokenizer, int top_k);
  void write(const StepCapture& c);
  bool wants_flush() const { return pending_.size() >= kFlushBytes; }
  void flush();  // throws tt::Error

 private:
  static constexpr size_t kFlushBytes = 256 << 10;
  std::string path_;
  std::ofstream file_;
  const Tokenizer& tokenizer_;
  int top_k_;
  JsonLine line_;
  std::string pending_;  // lines not yet written
};

}  // namespace tt
