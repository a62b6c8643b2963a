// Includes its library (analysis) may see: its own headers, the trace format's and core's.
#include "analysis/analysis.h"
#include "core/ops.h"
#include "trace/trace_file.h"
