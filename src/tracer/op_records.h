// trace.bin's step records: per step STEP_BEGIN, the op records with their workers' shares, the IO records
// (`run --io-trace`), the MoE layers' ROUTING records, STEP_END. On a step of the same graph as the previous one,
// without value statistics, a node whose layout (input and range counts) is unchanged goes into an OPS record (runs of
// consecutive nodes): its previous record moved by its stride, or by the changed fields, which become its stride; any
// other node is a whole OP record. The choice compares placement fields exactly, so the reader restores every record
// whole.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "exec/executor.h"
#include "model/generate.h"
#include "trace/records.h"
#include "trace/trace_file.h"
#include "tracer/flush.h"
#include "tracer/graph_catalog.h"
#include "tracer/io_probe.h"
#include "tracer/value_check.h"

namespace tt {

// Nanoseconds a counter tick, as a 32.32 fixed-point number, over an interval of `ticks` and `ns`.
unsigned __int128 tick_scale(uint64_t ticks, uint64_t ns);

class OpRecords {
 public:
  OpRecords(trace::TraceWriter& writer, int n_threads, uint64_t run_start_ns);
  // start_ns: relative to the run's start.
  void on_step_begin(uint32_t step, Phase phase, int32_t pos_begin, int32_t pos_end, uint64_t start_ns);
  // Before the step runs g, whose catalog entry is `graph` (same_as_previous: the previous step ran it too); on a
  // step of OPS records it compares the graph's compared nodes here. With values, each record carries its op's
  // statistics (then every record is whole).
  void on_graph_ready(const Graph& g, const GraphEntry& graph, bool same_as_previous, bool values);
  // Where thread `thread` stores its span of every node (ExecObserver::span_slots).
  WorkerSpan* span_slots(int thread) { return spans_[static_cast<size_t>(thread)].data(); }
  // Writes the step's records; io: each op's IO record follows it.
  void on_step_end(const StepOutcome& o, const ValueCheck& values, IoProbe* io, uint64_t now_ns);
  // The last step's span of every node on thread 0, in absolute nanoseconds ({0, 0}: not run there).
  std::span<const WorkerSpan> thread0_ns() const { return spans_[0]; }
  void finish() { writer_.flush(); }

 private:
  // How a node's record goes out: in an OPS record moved by its stride, or by changes; or a whole OP record.
  enum class Choice { ADVANCE, MOVE, FULL };
  // The reader's view of node i's placement fields after its latest record: the record's layout and fields, and its
  // stride (the changes of its last move; after OP or a move of no changes, none) as the (field, difference) pairs of
  // its nonzero fields (a cache view moves in two or three of its dozens).
  struct NodeFields {
    std::vector<uint32_t> layout;
    std::vector<uint64_t> last;
    std::vector<std::pair<uint32_t, uint64_t>> stride;
  };
  // Node i's placement into a record (placed_[its input count]), the one definition the records and the choice share.
  trace::OpRecord& place(size_t i);
  // Updates fields_[i] for ADVANCE and MOVE, and appends a MOVE's changes to changes_.
  Choice choose(size_t i);
  void choose_node(uint32_t i);  // choose(i) into choices_[i], its MOVE's changes into change_spans_[i]
  void spans_to_ns();
  // Node i's workers' (start, end) pairs in run-relative ns (kNoShareNs: none) at out; how many are shares.
  int put_times(size_t i, uint64_t* out) const;
  void write_op(size_t i, const ValueCheck& values);
  void write_ops_run(size_t first, size_t end);  // nodes [first, end) as one OPS record
  void write_routing(const StepOutcome& o);

  trace::TraceWriter& writer_;
  int n_threads_;
  uint64_t t0_;
  // The running step.
  trace::StepMarker marker_;
  const Graph* graph_ = nullptr;
  const GraphEntry* entry_ = nullptr;
  bool ops_step_ = false;  // OPS records this step
  // [thread][node]: the executor's ticks, nanoseconds after spans_to_ns(). Reset for a new graph only: each step of a
  // graph writes every slot it uses (see ExecObserver::span_slots).
  std::vector<std::vector<WorkerSpan>> spans_;
  // tick_count() and now_ns() read together before the graph runs and again after: ticks in between map linearly.
  uint64_t ticks_before_ = 0, ns_before_ = 0;
  std::vector<NodeFields> fields_;  // [node]
  // [inputs]: the record place() fills for a node of that many inputs. One per count rather than one per node: the
  // few records stay in the caches, and their vectors keep their capacity (no allocation).
  std::vector<trace::OpRecord> placed_;
  std::vector<Choice> choices_;
  std::vector<std::pair<uint32_t, uint32_t>> change_spans_;  // [node]: its MOVE's changes in changes_
  std::vector<std::pair<uint32_t, uint64_t>> changes_;
  std::vector<uint32_t> layout_scratch_;
  std::vector<uint64_t> fields_scratch_;
  std::vector<uint64_t> run_times_;               // write_op's and write_ops_run's scratch
  std::vector<trace::TraceWriter::Moved> moved_;  // write_ops_run's
  std::vector<int32_t> predicted_scratch_;        // write_routing's
  FlushSchedule flush_;
};

}  // namespace tt
