// Client of the JSON API of `tensortrace serve` (docs/viewer.md).
import type { MapTensor, StepRow } from './transforms';

export interface RunEntry { index: number; dir: string; name: string; model: string; prompt: string;
  generated_text: string; steps: number; ops: number; complete: boolean }
export interface BufferInfo { id: number; pool: string; name: string; size: number }
export interface RunInfo { run: any; derived: { dir: string; steps: number; ops: number; spans: number; threads: number;
  t_end_ns: number; complete: boolean; stop_reason: string; graphs: number; buffers: BufferInfo[]; file_size: number } }
export interface MemoryMap { file: string; file_size: number; data_offset: number; tensors: MapTensor[];
  sections: Record<string, [number, number]> }
export interface OpRow { i: number; step: number; node: number; phase: string; op: string; layer: number | null;
  name: string; thread: number; n_threads: number; start_ns: number; end_ns: number; type: string; shape: number[];
  pool: string; out_bytes: number; file_bytes: number; buffer_bytes: number;
  inputs: { name: string; type: string; shape: number[]; pool: string; ranges: (string | number)[][] }[];
  fused?: string[]; stats?: { min: number; max: number; mean: number; nan: number; inf: number; hash: string } }
export interface OpsPage { total: number; offset: number; rows: OpRow[]; located?: number | null }
export interface Track { name: string; size: number; bins: number; read: number[]; write: number[];
  segments: { buffer_id: number; name: string; pool: string; start: number; end: number }[] }
export interface Heatmap { step: number; cumulative: boolean; start: number; end: number; bins: number; file_size: number;
  file: number[]; tensors: [number, number, number][]; tracks: Track[];
  bytes: { file: number; kv_read: number; kv_written: number; activation_read: number; activation_written: number } }
export interface Spans { t0: number; t1: number; threads: number; count: number; mode: 'spans' | 'buckets'; px?: number;
  spans?: number[][]; buckets?: number[][] }
export interface GraphResp { step: number; graph_id: number; graph: { nodes: any[]; edges: any[] }; timing: number[][] }
export interface BuffersResp { t0: number; t1: number; px: number; pools: string[]; live_max: Record<string, number[]>;
  peak: { bytes: number; t_ns: number }; event_count: number; events: any[][]; steps: any[] }
// Per phase, where each thread is during the median step (the server's analysis::thread_time).
export interface ThreadTimeRow { thread: number; busy_ns_median_step: number; outside_ns_median_step: number;
  gaps_median_step: number; gap_median_ns: number; gap_p90_ns: number; outside_share_in_short_gaps: number }
export interface ThreadTime { short_gap_ns: number;
  phases: Record<string, { steps: number; step_ns_median: number; after_step_ns_median: number; threads: ThreadTimeRow[] }> }
export interface Summary { steps: StepRow[]; layers: { layer: number | null; ns: number }[];
  op_kinds: { op: string; count: number; ns: number }[]; hottest_tensors: { name: string; reads: number; bytes: number }[];
  peak_buffer_bytes: number; thread_time?: ThreadTime }

export async function getJSON<T>(url: string, signal?: AbortSignal): Promise<T> {
  const r = await fetch(url, { signal });
  const body = await r.json();
  if (!r.ok) throw new Error(body?.error ?? `HTTP ${r.status}`);
  return body as T;
}

function qs(p: Record<string, string | number | boolean | undefined | null>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(p)) {
    if (v === undefined || v === null || v === '') continue;
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(typeof v === 'boolean' ? (v ? 1 : 0) : String(v))}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

export class RunApi {
  constructor(public readonly index: number) {}
  private u(what: string, p: Record<string, any> = {}) { return `api/runs/${this.index}/${what}${qs(p)}`; }
  run() { return getJSON<RunInfo>(this.u('run')); }
  memoryMap() { return getJSON<MemoryMap>(this.u('memory-map')); }
  steps(from?: number, to?: number) { return getJSON<{ steps: StepRow[]; total: number }>(this.u('steps', { from, to })); }
  ops(p: Record<string, any>, signal?: AbortSignal) { return getJSON<OpsPage>(this.u('ops', p), signal); }
  spans(p: Record<string, any>, signal?: AbortSignal) { return getJSON<Spans>(this.u('spans', p), signal); }
  graph(step: number, timingOnly = false) { return getJSON<GraphResp>(this.u('graph', { step, timing_only: timingOnly || undefined })); }
  buffers(p: Record<string, any>, signal?: AbortSignal) { return getJSON<BuffersResp>(this.u('buffers', p), signal); }
  heatmap(p: Record<string, any>, signal?: AbortSignal) { return getJSON<Heatmap>(this.u('heatmap', p), signal); }
  summary() { return getJSON<Summary>(this.u('summary')); }
}

export function listRuns() { return getJSON<{ runs: RunEntry[] }>('api/runs'); }
