// Pure data transforms of the viewer (unit-tested in tests/transforms.test.ts): no DOM here.

import type { ExpertCache, GraphEdge as ApiGraphEdge, GraphNode as ApiGraphNode, MapTensor } from './api';

export type { MapTensor };

export const OP_KINDS = [
  'GET_ROWS', 'RMS_NORM', 'MUL', 'ADD', 'MUL_MAT', 'ROPE', 'SET_ROWS', 'FLASH_ATTN_EXT', 'SWIGLU', 'RESHAPE', 'VIEW',
  'PERMUTE', 'SOFT_MAX', 'SIGMOID', 'TOP_K', 'SUM_ROWS', 'CLAMP', 'DIV', 'SCALE', 'MUL_MAT_ID',
] as const;

// Distinct, readable op-kind colors (views are grey: they compute nothing).
export const OP_COLORS: Record<string, string> = {
  GET_ROWS: '#e6a23c', RMS_NORM: '#8e7cc3', MUL: '#b07aa1', ADD: '#76b7b2', MUL_MAT: '#4e79a7', ROPE: '#f28e2b',
  SET_ROWS: '#e15759', FLASH_ATTN_EXT: '#59a14f', SWIGLU: '#edc948', RESHAPE: '#9c9c9c', VIEW: '#9c9c9c',
  PERMUTE: '#9c9c9c', SOFT_MAX: '#d37295', SIGMOID: '#d37295', TOP_K: '#ff9da7', SUM_ROWS: '#b6992d', CLAMP: '#b6992d',
  DIV: '#b07aa1', SCALE: '#b07aa1', MUL_MAT_ID: '#2f5d8a',
};

export const CATEGORY_LIGHTNESS: Record<string, number> = {
  embedding: 62, norm: 78, attention: 52, ffn: 40, output: 66, residual: 70,
};

export function layerHue(layer: number | null, nLayers: number): number {
  if (layer === null || layer < 0) return -1;
  return Math.round((layer / Math.max(1, nLayers)) * 300);
}

// Color of a tensor region: hue by layer, lightness by category; global tensors are neutral.
export function tensorColor(layer: number | null, category: string, nLayers: number): string {
  const h = layerHue(layer, nLayers);
  const l = CATEGORY_LIGHTNESS[category] ?? 60;
  if (h < 0) return `hsl(30, 10%, ${l}%)`;
  return `hsl(${h}, 55%, ${l}%)`;
}

export function layerColor(layer: number | null, nLayers: number): string {
  const h = layerHue(layer, nLayers);
  return h < 0 ? '#8a8a8a' : `hsl(${h}, 60%, 50%)`;
}

// Intensity (mean times each byte was touched) → color on a perceptual-ish dark→yellow ramp; 0 → transparent.
export function heatColor(v: number, max: number): string | null {
  const c = heatRGB(v, max);
  return c ? `rgb(${c[0]},${c[1]},${c[2]})` : null;
}

const HEAT_STOPS: [number, number, number][] = [[40, 20, 90], [180, 30, 110], [245, 110, 40], [252, 230, 80]];

// The same ramp as [r, g, b] (for filling pixel rows directly), null for 0.
export function heatRGB(v: number, max: number): [number, number, number] | null {
  if (!(v > 0) || !(max > 0)) return null;
  const t = Math.min(1, Math.log1p(v) / Math.log1p(max));
  const x = t * (HEAT_STOPS.length - 1);
  const i = Math.min(HEAT_STOPS.length - 2, Math.floor(x));
  const f = x - i;
  const a = HEAT_STOPS[i], b = HEAT_STOPS[i + 1];
  return [Math.round(a[0] + (b[0] - a[0]) * f), Math.round(a[1] + (b[1] - a[1]) * f), Math.round(a[2] + (b[2] - a[2]) * f)];
}

export function formatBytes(n: number): string {
  if (!isFinite(n)) return '?';
  const a = Math.abs(n);
  if (a < 1024) return `${n} B`;
  if (a < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (a < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(2)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

export function formatNs(ns: number): string {
  const a = Math.abs(ns);
  if (a < 1e3) return `${ns.toFixed(0)} ns`;
  if (a < 1e6) return `${(ns / 1e3).toFixed(1)} µs`;
  if (a < 1e9) return `${(ns / 1e6).toFixed(2)} ms`;
  return `${(ns / 1e9).toFixed(3)} s`;
}

// Index of the tensor containing byte `offset` (tensors sorted by offset_start), or -1.
export function tensorAt(sorted: MapTensor[], offset: number): number {
  let lo = 0, hi = sorted.length - 1, found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid].offset_start <= offset) { found = mid; lo = mid + 1; } else hi = mid - 1;
  }
  if (found >= 0 && offset < sorted[found].offset_end) return found;
  return -1;
}

// A byte window [start, end) zoomed by `factor` (<1 zooms in) around `anchor`, clamped to [0, size) and at least
// `minSpan` bytes wide.
export function zoomWindow(start: number, end: number, anchor: number, factor: number, size: number,
                           minSpan = 16): [number, number] {
  let span = Math.max(minSpan, Math.min(size, (end - start) * factor));
  const rel = (anchor - start) / (end - start);
  let s = anchor - rel * span;
  s = Math.max(0, Math.min(size - span, s));
  span = Math.min(span, size);
  return [s, s + span];
}

export function panWindow(start: number, end: number, delta: number, size: number): [number, number] {
  const span = end - start;
  const s = Math.max(0, Math.min(size - span, start + delta));
  return [s, s + span];
}

// What the graph transforms need of a node and an edge (the API's have these and more).
export type GraphNode = Pick<ApiGraphNode, 'id' | 'name' | 'op' | 'layer'> & Partial<ApiGraphNode>;
export type GraphEdge = Pick<ApiGraphEdge, 'source' | 'target' | 'slot'> & Partial<ApiGraphEdge>;

// The nodes of one layer plus the nodes outside it that feed it (shared inputs) or consume it, and the edges
// touching the layer (null: the nodes outside every layer). layer === 'all' keeps everything.
export function filterGraph<N extends GraphNode, E extends GraphEdge>(nodes: N[], edges: E[], layer: number | null | 'all'):
  { nodes: N[]; edges: E[]; boundary: Set<string> } {
  if (layer === 'all') return { nodes, edges, boundary: new Set() };
  const inLayer = new Set(nodes.filter((n) => n.layer === layer).map((n) => n.id));
  const keep = new Set(inLayer);
  const boundary = new Set<string>();
  const kept: E[] = [];
  for (const e of edges) {
    const s = inLayer.has(e.source), t = inLayer.has(e.target);
    if (!s && !t) continue;
    kept.push(e);
    for (const id of [e.source, e.target]) if (!inLayer.has(id)) { keep.add(id); boundary.add(id); }
  }
  return { nodes: nodes.filter((n) => keep.has(n.id)), edges: kept, boundary };
}

export interface CompareRow { key: string; a: number; b: number; diff: number; ratio: number | null }

// Side-by-side values keyed by name (op kind, layer...) with b - a and b / a.
export function compareBy(a: { key: string; value: number }[], b: { key: string; value: number }[]): CompareRow[] {
  const keys = new Map<string, CompareRow>();
  for (const x of a) keys.set(x.key, { key: x.key, a: x.value, b: 0, diff: 0, ratio: null });
  for (const x of b) {
    const r = keys.get(x.key) ?? { key: x.key, a: 0, b: 0, diff: 0, ratio: null };
    r.b = x.value;
    keys.set(x.key, r);
  }
  return [...keys.values()].map((r) => ({ ...r, diff: r.b - r.a, ratio: r.a ? r.b / r.a : null }));
}

// Per step token comparison: first differing step (or -1) and per-step equality.
export function compareTokens(a: { token?: number | null }[], b: { token?: number | null }[]): { firstDiff: number; same: boolean[] } {
  const n = Math.max(a.length, b.length);
  const same: boolean[] = [];
  let firstDiff = -1;
  for (let i = 0; i < n; i++) {
    const eq = i < a.length && i < b.length && a[i].token === b[i].token;
    same.push(eq);
    if (!eq && firstDiff < 0) firstDiff = i;
  }
  return { firstDiff, same };
}

// Max and its index of a series (peak marker), ignoring non-finite values.
export function peakOf(values: number[]): { index: number; value: number } {
  let index = -1, value = -Infinity;
  values.forEach((v, i) => { if (isFinite(v) && v > value) { value = v; index = i; } });
  return { index, value: index < 0 ? 0 : value };
}

// Maps [t0, t1] to [0, width] pixels and back.
export class Scale {
  constructor(public d0: number, public d1: number, public r0: number, public r1: number) {}
  px(v: number): number { return this.r0 + ((v - this.d0) / (this.d1 - this.d0)) * (this.r1 - this.r0); }
  inv(p: number): number { return this.d0 + ((p - this.r0) / (this.r1 - this.r0)) * (this.d1 - this.d0); }
}

// The step whose [start_ns, end_ns) contains t (steps sorted by start), else the last one starting before t.
export function stepAtTime(steps: { start_ns?: number }[], t: number): number {
  let lo = 0, hi = steps.length - 1, found = 0;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if ((steps[mid].start_ns ?? 0) <= t) { found = mid; lo = mid + 1; } else hi = mid - 1;
  }
  return found;
}

export function shapeString(shape: number[] | null | undefined): string {
  return shape ? `[${shape.join(', ')}]` : '[dynamic]';
}

// --- mixture-of-experts routing (GET /api/runs/{i}/routing) ---

export interface RoutingTable { n_expert: number; top_k: number; layers: number[]; tokens: [number, number][];
  experts: number[]; weights: number[] }

// Picks per (routed layer, expert), flattened [layer][expert], of the tokens of `step` (cumulative: of every step up
// to it), and the largest count.
export function expertCounts(r: RoutingTable, step: number, cumulative: boolean): { counts: number[]; max: number } {
  const L = r.layers.length, counts = new Array<number>(L * r.n_expert).fill(0);
  let max = 0;
  r.tokens.forEach(([s], t) => {
    if (cumulative ? s > step : s !== step) return;
    for (let l = 0; l < L; l++) for (let k = 0; k < r.top_k; k++) {
      const e = r.experts[(t * L + l) * r.top_k + k];
      if (e < 0 || e >= r.n_expert) continue;
      max = Math.max(max, ++counts[l * r.n_expert + e]);
    }
  });
  return { counts, max };
}

// Indices into r.tokens of the tokens of one step, in position order.
export function tokensOfStep(r: RoutingTable, step: number): number[] {
  const out: number[] = [];
  r.tokens.forEach(([s], t) => { if (s === step) out.push(t); });
  return out;
}

// A token's chosen experts per routed layer, in slot order with their weights (empty where the layer did not route it).
export function tokenExperts(r: RoutingTable, token: number): [number, number][][] {
  const L = r.layers.length;
  return r.layers.map((_, l) => {
    const out: [number, number][] = [];
    for (let k = 0; k < r.top_k; k++) {
      const i = (token * L + l) * r.top_k + k;
      if (r.experts[i] >= 0) out.push([r.experts[i], r.weights[i]]);
    }
    return out;
  });
}

// The experts one model layer chose at a step (any of its tokens): what that layer's MUL_MAT_IDs read.
export function stepLayerExperts(r: RoutingTable, step: number, layer: number): Set<number> {
  const l = r.layers.indexOf(layer), out = new Set<number>();
  if (l < 0) return out;
  for (const t of tokensOfStep(r, step)) for (const [e] of tokenExperts(r, t)[l]) out.add(e);
  return out;
}

// The byte ranges of one expert in the model file: its slab of each of the layer's 3-D `*_exps` tensors (ggml keeps
// an expert's rows contiguous: [ne0, ne1, n_expert]).
export function expertSlabs(tensors: MapTensor[], layer: number, expert: number): [number, number][] {
  const out: [number, number][] = [];
  for (const t of tensors) {
    if (t.layer !== layer || t.shape.length !== 3 || !/_exps\.weight$/.test(t.name)) continue;
    const n = t.shape[2];
    if (!(expert >= 0 && expert < n)) continue;
    const slab = t.size_bytes / n;
    out.push([t.offset_start + expert * slab, t.offset_start + (expert + 1) * slab]);
  }
  return out;
}

// The expert-cache replay as hit-rate-vs-size curves, one per policy (in the answer's order): each point the cache's
// capacity as a share of every routed expert's bytes (x) and the hit rate (y), by increasing capacity.
export interface HitRateCurve { policy: string; points: { size: string; share: number; hitRate: number }[] }
export function hitRateCurves(c: ExpertCache): HitRateCurve[] {
  const byPolicy = new Map<string, HitRateCurve>();
  for (const row of c.results) {
    let curve = byPolicy.get(row.policy);
    if (!curve) byPolicy.set(row.policy, curve = { policy: row.policy, points: [] });
    curve.points.push({ size: row.size, share: c.expert_bytes > 0 ? row.capacity_bytes / c.expert_bytes : 0, hitRate: row.hit_rate });
  }
  const curves = [...byPolicy.values()];
  for (const curve of curves) curve.points.sort((a, b) => a.share - b.share);
  return curves;
}

// --- the weight cache of a `run --weight-budget` run (GET /api/runs/{i}/weight-cache) ---

// What a load was: a demand miss (its node waited for the read), a prefetch (read ahead of its use), or a hit.
export type LoadKind = 'miss' | 'prefetch' | 'hit';
export function loadKind(hit: boolean, prefetch: boolean): LoadKind {
  return prefetch ? 'prefetch' : hit ? 'hit' : 'miss';
}
export const LOAD_COLORS: Record<LoadKind, string> = { miss: '#e15759', prefetch: '#4e9fe8', hit: '#59a14f' };

// A load as a mark on a time axis: its read [start_ns, end_ns] in pixels, at least 1 px wide. `row` is its kind's
// row (misses on top, then prefetches, then hits); `load` is its index into the answer's loads.
export interface LoadMark { load: number; kind: LoadKind; x0: number; x1: number; row: number }
const KIND_ROW: Record<LoadKind, number> = { miss: 0, prefetch: 1, hit: 2 };

// The marks of the loads (rows [i, step, node, tensor, expert, offset, bytes, start_ns, end_ns, wait_ns, hit,
// prefetch, ...]) on the scale t -> px; loads wholly outside [x0, x1] are left out.
export function loadMarks(loads: readonly (readonly unknown[])[], sx: Scale, x0: number, x1: number): LoadMark[] {
  const out: LoadMark[] = [];
  loads.forEach((l, load) => {
    const a = sx.px(l[7] as number), b = Math.max(sx.px(l[8] as number), a + 1);
    if (b < x0 || a > x1) return;
    const kind = loadKind(l[10] as boolean, l[11] as boolean);
    out.push({ load, kind, x0: Math.max(x0, a), x1: Math.min(x1, b), row: KIND_ROW[kind] });
  });
  return out;
}

// The mark under pixel x in `row` (within `slack` px), the nearest by its middle; -1 when none.
export function markAt(marks: LoadMark[], x: number, row: number, slack = 2): number {
  let best = -1, dist = Infinity;
  marks.forEach((m, i) => {
    if (m.row !== row || x < m.x0 - slack || x > m.x1 + slack) return;
    const d = Math.abs((m.x0 + m.x1) / 2 - x);
    if (d < dist) { dist = d; best = i; }
  });
  return best;
}

// The occupancy series against the budget on one vertical scale from 0 (at y0) to the larger of the two (at y1):
// each bucket's y, the budget line's y, and whether any bucket lies above the budget (it must not).
export function occupancyLine(occupancy: number[], budget: number, y0: number, y1: number):
  { ys: number[]; budgetY: number; max: number; over: boolean } {
  const max = Math.max(budget, ...occupancy, 1);
  const sy = new Scale(0, max, y0, y1);
  return { ys: occupancy.map((v) => sy.px(v)), budgetY: sy.px(budget), max, over: occupancy.some((v) => v > budget) };
}
