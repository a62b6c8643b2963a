// steps.jsonl: one line a step with its input and chosen tokens, the logit landscape (top-k, softmax probability,
// entropy), the statistics and hash of the logits and of the final hidden state, MoE routing and the step's times.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <span>
#include <string>

#include "model/generate.h"
#include "trace/json_line.h"
#include "trace/run_dir.h"
#include "tracer/flush.h"
#include "tracer/weight_loads.h"

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

class StepLines {
 public:
  // top_k: tokens in each line's landscape (at least 1). Times in the line are relative to run_start_ns.
  StepLines(RunDirWriter& dir, const Tokenizer& tokenizer, int top_k, uint64_t run_start_ns);
  // The step's line, from its outcome (read here: the engine overwrites its logits in the next step).
  // weights: the step's weight-cache totals under --weight-budget (else null).
  void on_step_end(const StepOutcome& o, int graph, uint64_t n_ops, uint64_t now_ns, const WeightStepTotals* weights);
  // Writes what is left to the file.
  void finish();

 private:
  void flush();

  RunDirWriter& dir_;
  const Tokenizer& tokenizer_;
  int top_k_;
  uint64_t t0_;
  std::unique_ptr<std::ofstream> stream_;
  std::string pending_;  // lines not yet written
  JsonLine line_;        // reused between steps
  FlushSchedule flush_;
};

}  // namespace tt
