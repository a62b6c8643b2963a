// The JSON API of `tensortrace serve` (src/serve/api.cpp builds it; docs/viewer.md lists the routes and their
// parameters): this file is the one definition of the answers' shapes. Each shape is a schema (schema.ts); the
// client's types are derived from them, and the e2e test validates every answer of a live server against them.
import {
  array, bool, literal, nullable, num, object, openObject, optional, record, str, tagged, tuple, tupleWithOptionalTail,
  type Infer, type Schema,
} from './schema';

const range = tuple(num, num);  // [start, end) in bytes

// GET /api/runs: the runs served, in command-line order.
export const RunEntry = object({ index: num, dir: str, name: str, model: str, prompt: str, generated_text: str,
  steps: num, ops: num, complete: bool });
export const RunList = object({ runs: array(RunEntry) });

// GET /api/runs/{i}/run: `run` is run.json as written (docs/run-directory.md; {} when the run has none; the viewer
// reads only these parts), `derived` what the server worked out from the trace.
export const BufferInfo = object({ id: num, pool: str, name: str, size: num });
export const RunInfo = object({
  run: openObject({
    model: optional(openObject({ config: optional(openObject({ n_layer: optional(num) })) })),
    options: optional(openObject({ prompt: optional(str) })),
    generated_text: optional(str),
  }),
  derived: object({
    dir: str, steps: num, ops: num, spans: num, threads: num, t_end_ns: num, complete: bool,
    stop_reason: str,  // "" for a complete run
    graphs: num, buffers: array(BufferInfo),
    file_size: num,  // of the model file
    routed: bool,  // the trace has expert routing (a mixture-of-experts run): the Experts view and /routing apply
    weight_budget: bool,  // a `run --weight-budget` run: the Weight cache view and /weight-cache apply
    step_times: array(tuple(num, num, str)),  // per step: start_ns, end_ns, phase
    step_graph: array(num),  // per step: its graph's id (-1: none recorded); [] without graphs/index.json
  }),
});

// GET /api/runs/{i}/memory-map: memory-map.json (docs/memory-map.md). A run without one gets only `file_size` 0 and
// no tensors, hence the optional keys.
export const MapTensor = object({ name: str, type: str, shape: array(num), offset_start: num, offset_end: num,
  size_bytes: num, layer: nullable(num), category: str, component: str });
export const MemoryMap = object({
  format: optional(str), version: optional(num), file: optional(str), model_name: optional(str),
  architecture: optional(str), file_size: num, gguf_version: optional(num), alignment: optional(num),
  data_offset: optional(num), sections: optional(record(range)), tensors: array(MapTensor),
});

// GET /api/runs/{i}/steps: the steps.jsonl objects (docs/run-directory.md) without hidden_stats and logits_stats; a
// step without its line (a killed run) gets what its trace marker knows (step, phase, positions, times, token), or
// only `step`.
export const TopToken = object({ id: num, text: str, logit: num, prob: num });
export const StepRow = object({
  step: num, phase: optional(str), pos_begin: optional(num), pos_end: optional(num), input_tokens: optional(array(num)),
  token: optional(nullable(num)), token_text: optional(nullable(str)), end_of_generation: optional(bool),
  probability: optional(num), softmax_probability: optional(num), top_k: optional(array(TopToken)),
  top1_top2_gap: optional(nullable(num)), entropy: optional(nullable(num)), start_ns: optional(num),
  end_ns: optional(num), n_ops: optional(num), graph: optional(num),
  // `run --weight-budget` runs: the step's accesses that found their unit resident, that read it, the bytes read, the
  // time its nodes waited for reads, the prefetch reads and the demand hits on prefetched units
  weight_hits: optional(num), weight_misses: optional(num), weight_bytes_read: optional(num),
  weight_stall_ns: optional(num), weight_prefetches: optional(num), weight_prefetch_hits: optional(num),
});
export const StepsPage = object({ from: num, to: num, total: num, steps: array(StepRow) });

// GET /api/runs/{i}/ops: op records. A range is [pool, buffer id, offset, length] and, for KV cache positions,
// pos_begin, pos_end. Value statistics come with traces recorded with values (NaN and infinities arrive as null).
export const OpInput = object({ name: str, type: str, shape: array(num), pool: str,
  ranges: array(tupleWithOptionalTail([str, num, num, num], [num, num])) });
export const OpRow = object({
  i: num, step: num, node: num, phase: str, op: str, layer: nullable(num), name: str, thread: num, n_threads: num,
  start_ns: num, end_ns: num, type: str, shape: array(num), pool: str, out_bytes: num, file_bytes: num,
  buffer_bytes: num, inputs: array(OpInput),
  stats: optional(object({ min: nullable(num), max: nullable(num), mean: nullable(num), nan: num, inf: num, hash: str })),
});
// `located`: with `locate`, the op's position in the filtered list (null: filtered out).
export const OpsPage = object({ total: num, offset: num, rows: array(OpRow), located: optional(nullable(num)) });

// GET /api/runs/{i}/spans: single spans, or per-pixel aggregates when more than `limit` fall in the window.
// Op kind ids index transforms.ts OP_KINDS; -1 layer: none, -1 op index: unknown.
const spansCommon = { t0: num, t1: num, threads: num, count: num };
export const Spans = tagged('mode', {
  spans: object({ ...spansCommon, mode: literal('spans'),
    columns: array(str),  // thread, start_ns, end_ns, step, node, op, layer, i
    spans: array(tuple(num, num, num, num, num, num, num, num)) }),
  buckets: object({ ...spansCommon, mode: literal('buckets'), px: num,
    columns: array(str),  // thread, bucket, busy (fraction), op, layer (the bucket's dominant op kind and layer)
    buckets: array(tuple(num, num, num, num, num)) }),
});

// GET /api/runs/{i}/graph: graphs/graph-NNNN.json (docs/run-directory.md) and the step's timing rows
// [node, start_ns, end_ns, thread, op index]; with timing_only=1 (GraphTiming) without the graph.
export const GraphNode = object({
  id: str, index: optional(num),  // node_<index> for executed nodes; leaves (op LEAF) are leaf_<n>, without index
  name: str, op: str, shape: nullable(array(num)),  // null: depends on the number of cache positions
  type: str, layer: nullable(num), category: str, pool: str, weight_tensor: optional(str),
});
export const GraphEdge = object({ source: str, target: str, slot: num, label: str });
export const Graph = object({ format: str, version: num, n_nodes: num, n_edges: num, note: str,
  nodes: array(GraphNode), edges: array(GraphEdge) });
const timingRows = { step: num, graph_id: num, timing_columns: array(str), timing: array(tuple(num, num, num, num, num)) };
export const GraphResp = object({ ...timingRows, graph: Graph });
export const GraphTiming = object(timingRows);

// GET /api/runs/{i}/buffers: live bytes per pool (`live_max`: the highest in each of `px` buckets), the run's peak,
// the buffers.json events in the window (when at most `max_events`) and its per-step peaks.
export const BufferEvent = tuple(num, num, str, str, num, num, num, str, bool);  // t_ns, step, kind (a/f), pool,
// buffer_id, offset, bytes, tensor, reuse
export const BufferStep = object({ step: num, activation_peak_bytes: num, activation_peak_node: str, arena_bytes: num,
  scratch_bytes: num, static_bytes: num, total_peak_bytes: num });
export const BuffersResp = object({
  t0: num, t1: num, px: num, pools: array(str), live_max: record(array(num)), peak: object({ bytes: num, t_ns: num }),
  event_count: num, events_columns: array(str), events: array(BufferEvent), steps: array(BufferStep),
});

// GET /api/runs/{i}/heatmap: reads of the model file per bin (mean times each byte was read), the tensors read
// ([memory-map index, times read, bytes read]), byte totals, the runtime buffers' tracks, and for a budgeted run the
// reads from storage.
export const Track = object({ name: str, size: num, bins: num, read: array(num), write: array(num),
  segments: array(object({ buffer_id: num, name: str, pool: str, start: num, end: num })) });
export const Heatmap = object({
  step: num, cumulative: bool, start: num, end: num, bins: num, file_size: num, file: array(num),
  tensor_columns: array(str), tensors: array(tuple(num, num, num)),
  bytes: object({ file: num, kv_read: num, kv_written: num, activation_read: num, activation_written: num }),
  tracks: array(Track),
  // `run --weight-budget` runs only: the file bytes the weight cache read from storage (its loads that were not
  // hits) in the same steps, and per bin the mean times each byte was read so.
  storage: optional(object({ bytes: num, bins: array(num) })),
});

// GET /api/runs/{i}/summary. thread_time is `analyze`'s (docs/analysis.md): per phase, where each thread is during
// the median step.
export const ThreadTimeRow = object({ thread: num, busy_ns_total: num, outside_ns_total: num, busy_ns_median_step: num,
  outside_ns_median_step: num, gaps_median_step: num, gap_median_ns: num, gap_p90_ns: num,
  outside_share_in_short_gaps: num });
export const ThreadTime = object({ short_gap_ns: num,
  phases: record(object({ steps: num, step_ns_total: num, step_ns_median: num, after_step_ns_median: num,
    threads: array(ThreadTimeRow) })) });
// Per step from the trace; phase, times and token only for steps with a marker, token_text, entropy and gap only
// for steps with a steps.jsonl line.
export const SummaryStep = object({ step: num, ops: num, op_ns: num, file_bytes: num, buffer_bytes: num,
  phase: optional(str), start_ns: optional(num), end_ns: optional(num), token: optional(num),
  token_text: optional(nullable(str)), entropy: optional(nullable(num)), top1_top2_gap: optional(nullable(num)) });
export const Summary = object({
  steps: array(SummaryStep), layers: array(object({ layer: nullable(num), ns: num })),
  op_kinds: array(object({ op: str, count: num, ns: num })),
  hottest_tensors: array(object({ name: str, reads: num, bytes: num })),  // top 25 by bytes read
  peak_buffer_bytes: num, thread_time: ThreadTime,
});

// Every error: a 4xx (or 500) status with this body.
// GET /api/runs/{i}/routing (mixture-of-experts runs; 404 otherwise): every routed token (step, position) in
// execution order, and per token, routed layer (`layers` gives each one's model layer) and slot the chosen expert and
// its weight, flattened [token][layer][slot]; -1 and 0 where a layer did not route the token (a prompt's last layer
// routes only its last token).
export const Routing = object({ n_expert: num, top_k: num, layers: array(num), tokens: array(tuple(num, num)),
  experts: array(num), weights: array(num) });

// GET /api/runs/{i}/expert-cache?sizes=..&policies=..&scope=global|per-layer&prefetch=none|predicted|previous-token
// (&read_gbps=X) (mixture-of-experts runs; 404 otherwise, 400 for a bad parameter): `analyze --expert-cache`'s table
// (docs/analysis.md), a row per (size, policy) in that order; sizes default to 1, 2, 4, ... experts per layer up to
// all, policies to all six. `expert_bytes`: every routed layer's experts (a capacity's share of the model's experts).
export const ExpertCacheRow = object({ size: str, policy: str, capacity_bytes: num, accesses: num, hits: num,
  misses: num, cold_misses: num, hit_rate: num, bytes_loaded: num, bytes_loaded_per_token: num,
  load_seconds_per_token: nullable(num), prefetches: num, prefetch_bytes: num, useful_prefetches: num });
export const ExpertCache = object({ scope: str, prefetch: str, read_bytes_per_s: nullable(num), read_rate_source: str,
  results: array(ExpertCacheRow), tokens: num, n_expert: num, expert_bytes: num });

// GET /api/runs/{i}/weight-cache?t0=..&t1=..&px=..&step=..&offset=..&limit=.. (`run --weight-budget` runs; 404
// otherwise, 400 for a bad parameter): the budget (as given, in bytes) and policy; run totals and per-step totals
// (steps.jsonl's weight_* counts: a miss reads its bytes and its node waits for it); `occupancy`: per `px` bucket of
// [t0, t1] the cache's highest resident bytes (analyze's replay of the run's loads; page-rounded units, as the budget
// counts them), never above budget_bytes; `loads`: one page (`offset`, `limit`) of the `total` loads of `step` (or
// every step) whose read overlaps [t0, t1], in access order.
export const WeightLoad = tuple(num, num, num, str, num, num, num, num, num, num, bool, bool, num);  // i, step, node,
// tensor, expert (-1: the whole tensor), offset, bytes, start_ns, end_ns, wait_ns, hit, prefetch, resident_bytes
export const WeightCacheStep = object({ step: num, hits: num, misses: num, prefetches: num, bytes_read: num,
  stall_ns: num });
export const WeightCache = object({
  budget: str, budget_bytes: num, policy: str, direct_io: bool,
  totals: object({ accesses: num, hits: num, misses: num, prefetches: num, bytes_read: num, stall_ns: num,
    read_bytes_per_s: num, peak_resident_bytes: num }),
  t0: num, t1: num, px: num, occupancy: array(num), total: num, offset: num, loads_columns: array(str),
  loads: array(WeightLoad), steps: array(WeightCacheStep),
});

export const ApiErrorBody = object({ error: str });

export type RunEntry = Infer<typeof RunEntry>;
export type RunInfo = Infer<typeof RunInfo>;
export type MapTensor = Infer<typeof MapTensor>;
export type MemoryMap = Infer<typeof MemoryMap>;
export type StepRow = Infer<typeof StepRow>;
export type OpRow = Infer<typeof OpRow>;
export type OpsPage = Infer<typeof OpsPage>;
export type Spans = Infer<typeof Spans>;
export type GraphNode = Infer<typeof GraphNode>;
export type GraphEdge = Infer<typeof GraphEdge>;
export type GraphResp = Infer<typeof GraphResp>;
export type GraphTiming = Infer<typeof GraphTiming>;
export type BuffersResp = Infer<typeof BuffersResp>;
export type Heatmap = Infer<typeof Heatmap>;
export type ThreadTime = Infer<typeof ThreadTime>;
export type SummaryStep = Infer<typeof SummaryStep>;
export type Summary = Infer<typeof Summary>;
export type Routing = Infer<typeof Routing>;
export type ExpertCacheRow = Infer<typeof ExpertCacheRow>;
export type ExpertCache = Infer<typeof ExpertCache>;
export type WeightLoad = Infer<typeof WeightLoad>;
export type WeightCache = Infer<typeof WeightCache>;

// The answer's schema of each route (the last path segment; `graph` with timing_only=1 is GraphTiming), for the
// e2e test's validation of live answers.
export function answerSchema(path: string, params: URLSearchParams): Schema<unknown> | null {
  const parts = path.split('/').filter(Boolean);
  if (parts.length === 2) return RunList;
  const route = parts[3] ?? 'run';
  if (route === 'graph' && ['1', 'true'].includes(params.get('timing_only') ?? '')) return GraphTiming;
  const byRoute: Record<string, Schema<unknown>> = { run: RunInfo, 'memory-map': MemoryMap, steps: StepsPage,
    ops: OpsPage, spans: Spans, graph: GraphResp, buffers: BuffersResp, heatmap: Heatmap, summary: Summary, routing: Routing,
    'expert-cache': ExpertCache, 'weight-cache': WeightCache };
  return byRoute[route] ?? null;
}

export async function getJSON<T>(url: string, signal?: AbortSignal): Promise<T> {
  const r = await fetch(url, { signal });
  const body: unknown = await r.json();
  if (!r.ok) {
    const message = (body as { error?: unknown } | null)?.error;
    throw new Error(typeof message === 'string' ? message : `HTTP ${r.status}`);
  }
  return body as T;
}

export type Query = Record<string, string | number | boolean | undefined | null>;

function qs(p: Query): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(p)) {
    if (v === undefined || v === null || v === '') continue;
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(typeof v === 'boolean' ? (v ? 1 : 0) : String(v))}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

// One run's routes. `lifetime` ends every request of the run at once (a run switch aborts the old run's).
export class RunApi {
  constructor(public readonly index: number, private readonly lifetime?: AbortSignal) {}
  private get<T>(what: string, p: Query = {}, signal?: AbortSignal): Promise<T> {
    const signals = [this.lifetime, signal].filter((s): s is AbortSignal => s !== undefined);
    return getJSON<T>(`api/runs/${this.index}/${what}${qs(p)}`, signals.length > 1 ? AbortSignal.any(signals) : signals[0]);
  }
  run() { return this.get<RunInfo>('run'); }
  memoryMap() { return this.get<MemoryMap>('memory-map'); }
  steps(from?: number, to?: number) { return this.get<Infer<typeof StepsPage>>('steps', { from, to }); }
  ops(p: Query, signal?: AbortSignal) { return this.get<OpsPage>('ops', p, signal); }
  spans(p: Query, signal?: AbortSignal) { return this.get<Spans>('spans', p, signal); }
  graph(step: number) { return this.get<GraphResp>('graph', { step }); }
  graphTiming(step: number) { return this.get<GraphTiming>('graph', { step, timing_only: true }); }
  buffers(p: Query, signal?: AbortSignal) { return this.get<BuffersResp>('buffers', p, signal); }
  heatmap(p: Query, signal?: AbortSignal) { return this.get<Heatmap>('heatmap', p, signal); }
  summary() { return this.get<Summary>('summary'); }
  routing() { return this.get<Routing>('routing'); }
  expertCache(p: Query, signal?: AbortSignal) { return this.get<ExpertCache>('expert-cache', p, signal); }
  weightCache(p: Query, signal?: AbortSignal) { return this.get<WeightCache>('weight-cache', p, signal); }
}

export function listRuns() { return getJSON<Infer<typeof RunList>>('api/runs'); }
