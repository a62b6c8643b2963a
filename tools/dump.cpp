// tensortrace dump RUN_DIR [--step N] [--limit K]: print the trace's records.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/shape.h"
#include "tools/command.h"
#include "trace/run_data.h"

namespace tt::cli {
namespace {

std::string range_string(const trace::RangeRecord& r) {
  std::string s = fmt::format("{}", pool_name(r.pool));
  if (r.pool == Pool::MODEL_FILE)
    s += fmt::format("@{}+{}", r.offset, r.length);
  else
    s += fmt::format("#{}@{}+{}", r.buffer_id, r.offset, r.length);
  if (r.pos_begin >= 0) s += fmt::format(" pos[{},{})", r.pos_begin, r.pos_end);
  return s;
}

RegisterCommand reg("dump", "Print a run's trace records", 30, [](CLI::App& cmd) {
  auto dir = std::make_shared<std::string>();
  auto step = std::make_shared<int64_t>(-1);
  auto limit = std::make_shared<int64_t>(-1);
  cmd.add_option("run_dir", *dir, "Run directory")->required();
  cmd.add_option("--step", *step, "Only this step")->check(range<int64_t>(0, UINT32_MAX));
  cmd.add_option("--limit", *limit, "At most this many op records")->check(range<int64_t>(0, INT64_MAX));
  return [=]() {
    const RunData run = load_run(*dir, {.graphs = false});
    const trace::TraceContents& t = run.trace;
    if (*step >= 0 && std::none_of(t.steps.begin(), t.steps.end(), [&](const auto& s) { return s.step == *step; }))
      fail("step {} is not in the trace (it has {} steps{})", *step, t.steps.size(),
           t.steps.empty() ? "" : fmt::format(": {} to {}", t.steps.front().step, t.steps.back().step));
    fmt::print("trace v{}: {} steps, {} ops, {} worker spans\n", t.version, t.steps.size(), t.ops.size(),
               t.spans.size());
    // thr: the first worker with a share of the op, "+N" when N more shared it (a split node).
    fmt::print("{:>4} {:>4} {:<8} {:>5} {:>5} {:<14} {:<28} {:>10} {:>9}  inputs\n", "step", "node", "phase", "layer",
               "thr", "op", "name", "start_us", "dur_us");
    int64_t shown = 0;
    for (const trace::OpRecord& o : t.ops) {
      if (*step >= 0 && o.step != *step) continue;
      if (*limit >= 0 && shown >= *limit) break;
      ++shown;
      std::string inputs;
      for (const trace::TensorRecord& in : o.inputs) {
        inputs += fmt::format("{}{} {}", inputs.empty() ? "" : "; ", in.name, shape_text(in.ne, ","));
        for (const trace::RangeRecord& r : in.ranges) inputs += fmt::format(" {}", range_string(r));
      }
      const std::string workers =
          o.n_threads > 1 ? fmt::format("{}+{}", o.thread, o.n_threads - 1) : std::to_string(o.thread);
      fmt::print(
          "{:>4} {:>4} {:<8} {:>5} {:>5} {:<14} {:<28} {:>10.1f} {:>9.1f}  {} -> {} {}{}\n", o.step, o.node,
          phase_name(o.phase), o.layer >= 0 ? std::to_string(o.layer) : "-", workers, op_name(o.op), o.name,
          o.start_ns / 1e3, (o.end_ns - o.start_ns) / 1e3, inputs, type_name(o.out.type), shape_text(o.out.ne, ","),
          o.has_stats ? fmt::format(" [min {:.4g} max {:.4g} mean {:.4g} nan {} inf {} hash {:016x}]", o.stats.min,
                                    o.stats.max, o.stats.mean, o.stats.nan_count, o.stats.inf_count, o.stats.hash)
                      : "");
    }
    if (!t.complete)
      fmt::print("trace ends early at byte {}: {}; every record before it was read\n", t.stopped_at, t.stop_reason);
    return 0;
  };
});

}  // namespace
}  // namespace tt::cli
