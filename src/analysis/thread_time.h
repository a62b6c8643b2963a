// Where each thread's time goes within a step's evaluation, from the trace's worker spans: time in its shares of
// nodes, time outside them (waiting at barriers, or idle while another thread runs a node alone), and how that
// outside time is cut up. Many short waits (e.g. 54 of 0.3 us a step) mean the thread's idle time is there but
// too fragmented to hold other work, such as the tracer's own (docs/performance.md).
#pragma once

#include <nlohmann/json.hpp>
#include <span>

#include "trace/trace_file.h"

namespace tt::analysis {

// Per phase (PROMPT, GENERATE) of the ended steps: the median step (STEP_BEGIN to STEP_END) and per thread the
// median step's time in node shares and outside them, the gaps in it (maximal stretches of [step begin, step end)
// outside the thread's shares), the gaps' median and 90th percentile over all steps, and the share of the outside
// time in gaps shorter than short_gap_ns (1 us); and the median time from a step's end to the next step's begin
// (`after_step_ns_median`: no node runs then; the caller samples, the observers end the step and begin the next,
// and the other threads wait or do the tracer's between-runs work). Steps without spans are left out.
nlohmann::json thread_time(std::span<const trace::StepMarker> steps, std::span<const trace::SpanRecord> spans);
inline nlohmann::json thread_time(const trace::TraceContents& t) { return thread_time(t.steps, t.spans); }

}  // namespace tt::analysis
