import { describe, expect, it } from 'vitest';
import {
  compareBy, compareTokens, loadKind, loadMarks, markAt, occupancyLine, expertCounts, expertSlabs, filterGraph, hitRateCurves, formatBytes, formatNs, heatColor, heatRGB, panWindow, peakOf, Scale, stepAtTime,
  stepLayerExperts, tensorAt, tensorColor, tokenExperts, tokensOfStep, zoomWindow, type GraphEdge, type GraphNode,
  type MapTensor, type RoutingTable,
} from '../src/transforms';

const t = (name: string, s: number, e: number, layer: number | null = null): MapTensor => ({
  name, type: 'F32', shape: [e - s], offset_start: s, offset_end: e, size_bytes: e - s, layer, category: 'ffn',
  component: 'up',
});

describe('tensorAt', () => {
  const tensors = [t('a', 100, 200), t('b', 224, 300), t('c', 320, 1000)];
  it('finds the tensor containing a byte', () => {
    expect(tensorAt(tensors, 100)).toBe(0);
    expect(tensorAt(tensors, 199)).toBe(0);
    expect(tensorAt(tensors, 250)).toBe(1);
    expect(tensorAt(tensors, 999)).toBe(2);
  });
  it('returns -1 in padding, header and past the end', () => {
    expect(tensorAt(tensors, 200)).toBe(-1);
    expect(tensorAt(tensors, 10)).toBe(-1);
    expect(tensorAt(tensors, 1000)).toBe(-1);
    expect(tensorAt([], 5)).toBe(-1);
  });
});

describe('zoom and pan', () => {
  it('zooms around the anchor and keeps it in place', () => {
    const [s, e] = zoomWindow(0, 1000, 250, 0.5, 1000);
    expect(e - s).toBe(500);
    expect((250 - s) / (e - s)).toBeCloseTo(0.25);
  });
  it('clamps to the file and a minimum span', () => {
    expect(zoomWindow(0, 1000, 500, 4, 1000)).toEqual([0, 1000]);
    const [s, e] = zoomWindow(0, 100, 50, 0.001, 1000, 16);
    expect(e - s).toBe(16);
    expect(panWindow(0, 100, -50, 1000)).toEqual([0, 100]);
    expect(panWindow(0, 100, 5000, 1000)).toEqual([900, 1000]);
  });
});

describe('filterGraph', () => {
  const nodes: GraphNode[] = [
    { id: 'leaf_0', name: 'tok', op: 'LEAF', layer: null }, { id: 'node_0', name: 'embd', op: 'GET_ROWS', layer: null },
    { id: 'node_1', name: 'norm-0', op: 'RMS_NORM', layer: 0 }, { id: 'node_2', name: 'l_out-0', op: 'ADD', layer: 0 },
    { id: 'node_3', name: 'norm-1', op: 'RMS_NORM', layer: 1 }, { id: 'node_4', name: 'l_out-1', op: 'ADD', layer: 1 },
  ];
  const edges: GraphEdge[] = [
    { source: 'leaf_0', target: 'node_0', slot: 0 }, { source: 'node_0', target: 'node_1', slot: 0 },
    { source: 'node_1', target: 'node_2', slot: 0 }, { source: 'node_0', target: 'node_2', slot: 1 },
    { source: 'node_2', target: 'node_3', slot: 0 }, { source: 'node_3', target: 'node_4', slot: 0 },
  ];
  it('keeps the layer, its inputs and consumers, and edges in/out', () => {
    const f = filterGraph(nodes, edges, 0);
    expect(f.nodes.map((n) => n.id).sort()).toEqual(['node_0', 'node_1', 'node_2', 'node_3']);
    expect(f.edges.length).toBe(4);
    expect([...f.boundary].sort()).toEqual(['node_0', 'node_3']);
  });
  it("'all' keeps everything", () => {
    expect(filterGraph(nodes, edges, 'all').nodes.length).toBe(nodes.length);
  });
});

describe('compare', () => {
  it('diffs values by key, missing on one side as 0', () => {
    const r = compareBy([{ key: 'MUL_MAT', value: 10 }, { key: 'ADD', value: 2 }], [{ key: 'MUL_MAT', value: 15 }, { key: 'ROPE', value: 1 }]);
    const m = Object.fromEntries(r.map((x) => [x.key, x]));
    expect(m.MUL_MAT.diff).toBe(5);
    expect(m.MUL_MAT.ratio).toBeCloseTo(1.5);
    expect(m.ADD.b).toBe(0);
    expect(m.ROPE.ratio).toBeNull();
  });
  it('finds the first differing token', () => {
    const a = [{ step: 0, token: 1 }, { step: 1, token: 2 }, { step: 2, token: 3 }];
    const b = [{ step: 0, token: 1 }, { step: 1, token: 5 }];
    expect(compareTokens(a, b)).toEqual({ firstDiff: 1, same: [true, false, false] });
    expect(compareTokens(a, a).firstDiff).toBe(-1);
  });
});

describe('formatting and scales', () => {
  it('formats bytes and times', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(2048)).toBe('2.0 KiB');
    expect(formatBytes(3 * 1024 * 1024)).toBe('3.00 MiB');
    expect(formatNs(1500)).toBe('1.5 µs');
    expect(formatNs(2.5e6)).toBe('2.50 ms');
  });
  it('maps and inverts', () => {
    const s = new Scale(100, 200, 0, 1000);
    expect(s.px(150)).toBe(500);
    expect(s.inv(250)).toBe(125);
  });
  it('finds peaks and steps by time', () => {
    expect(peakOf([1, 5, NaN, 3])).toEqual({ index: 1, value: 5 });
    const steps = [{ start_ns: 0 }, { start_ns: 100 }, { start_ns: 250 }];
    expect(stepAtTime(steps, 99)).toBe(0);
    expect(stepAtTime(steps, 100)).toBe(1);
    expect(stepAtTime(steps, 1e9)).toBe(2);
  });
  it('colors: zero is transparent, layers differ, globals are neutral', () => {
    expect(heatColor(0, 10)).toBeNull();
    expect(heatColor(10, 10)).toBe('rgb(252,230,80)');
    expect(heatRGB(10, 10)).toEqual([252, 230, 80]);
    expect(heatRGB(0, 10)).toBeNull();
    expect(heatColor(3, 10)).toBe(`rgb(${heatRGB(3, 10)!.join(',')})`);
    expect(tensorColor(0, 'ffn', 4)).not.toBe(tensorColor(2, 'ffn', 4));
    expect(tensorColor(null, 'embedding', 4)).toMatch(/^hsl\(30, 10%/);
  });
});

describe('filterGraph outside layers', () => {
  it('null keeps the global nodes and their neighbours', () => {
    const nodes: GraphNode[] = [{ id: 'a', name: 'embd', op: 'GET_ROWS', layer: null }, { id: 'b', name: 'n', op: 'RMS_NORM', layer: 0 },
      { id: 'c', name: 'out', op: 'MUL_MAT', layer: null }];
    const edges: GraphEdge[] = [{ source: 'a', target: 'b', slot: 0 }, { source: 'b', target: 'c', slot: 0 }];
    const f = filterGraph(nodes, edges, null);
    expect(f.nodes.map((n) => n.id)).toEqual(['a', 'b', 'c']);
    expect([...f.boundary]).toEqual(['b']);
  });
});

describe('expert routing', () => {
  // Two steps: a 2-token prompt (the last layer routes only its last token), one generated token; 2 layers, top 2.
  const r: RoutingTable = {
    n_expert: 4, top_k: 2, layers: [0, 1], tokens: [[0, 0], [0, 1], [1, 2]],
    experts: [0, 1, -1, -1, /**/ 1, 2, 3, 0, /**/ 1, 3, 2, 0],
    weights: [0.6, 0.4, 0, 0, /**/ 0.7, 0.3, 0.5, 0.5, /**/ 0.9, 0.1, 0.8, 0.2],
  };
  it('counts picks per layer and expert for a step and cumulatively', () => {
    expect(expertCounts(r, 0, false)).toEqual({ counts: [1, 2, 1, 0, 1, 0, 0, 1], max: 2 });
    expect(expertCounts(r, 1, false)).toEqual({ counts: [0, 1, 0, 1, 1, 0, 1, 0], max: 1 });
    expect(expertCounts(r, 1, true)).toEqual({ counts: [1, 3, 1, 1, 2, 0, 1, 1], max: 3 });
  });
  it("gives a token's experts per layer, skipping the layers that did not route it", () => {
    expect(tokensOfStep(r, 0)).toEqual([0, 1]);
    expect(tokenExperts(r, 0)).toEqual([[[0, 0.6], [1, 0.4]], []]);
    expect(tokenExperts(r, 2)).toEqual([[[1, 0.9], [3, 0.1]], [[2, 0.8], [0, 0.2]]]);
  });
  it("unites a step's experts in a layer", () => {
    expect([...stepLayerExperts(r, 0, 0)].sort()).toEqual([0, 1, 2]);
    expect([...stepLayerExperts(r, 0, 1)].sort()).toEqual([0, 3]);
    expect(stepLayerExperts(r, 0, 7).size).toBe(0);
  });
  it("finds an expert's slab in each of its layer's 3-D expert tensors", () => {
    const x = (name: string, s: number, layer: number, shape: number[]): MapTensor => ({ ...t(name, s, s + 400, layer), shape });
    const tensors = [x('blk.1.ffn_up_exps.weight', 1000, 1, [2, 50, 4]), x('blk.1.ffn_gate_inp.weight', 2000, 1, [2, 4]),
      x('blk.2.ffn_up_exps.weight', 3000, 2, [2, 50, 4])];
    expect(expertSlabs(tensors, 1, 2)).toEqual([[1200, 1300]]);
    expect(expertSlabs(tensors, 1, 4)).toEqual([]);
  });
});

describe('expert-cache curves', () => {
  const row = (size: string, policy: string, capacity_bytes: number, hit_rate: number) => ({ size, policy,
    capacity_bytes, accesses: 10, hits: hit_rate * 10, misses: 10 - hit_rate * 10, cold_misses: 2, hit_rate,
    bytes_loaded: 0, bytes_loaded_per_token: 0, load_seconds_per_token: null, prefetches: 0, prefetch_bytes: 0,
    useful_prefetches: 0 });
  it('groups the rows into one curve per policy, by increasing capacity share', () => {
    const curves = hitRateCurves({ scope: 'global', prefetch: 'none', read_bytes_per_s: null, read_rate_source: 'none',
      tokens: 5, n_expert: 8, expert_bytes: 800,
      results: [row('4', 'lru', 400, 0.5), row('4', 'opt', 400, 0.7), row('1', 'lru', 100, 0.1), row('1', 'opt', 100, 0.2),
        row('8', 'lru', 800, 0.8), row('8', 'opt', 800, 0.8)] });
    expect(curves.map((c) => c.policy)).toEqual(['lru', 'opt']);
    expect(curves[0].points).toEqual([{ size: '1', share: 0.125, hitRate: 0.1 }, { size: '4', share: 0.5, hitRate: 0.5 },
      { size: '8', share: 1, hitRate: 0.8 }]);
    expect(curves[1].points.map((p) => p.hitRate)).toEqual([0.2, 0.7, 0.8]);
  });
  it('gives no curve for no rows', () => {
    expect(hitRateCurves({ scope: 'per-layer', prefetch: 'none', read_bytes_per_s: null, read_rate_source: 'none',
      tokens: 0, n_expert: 8, expert_bytes: 0, results: [] })).toEqual([]);
  });
});

describe('weight cache', () => {
  // [i, step, node, tensor, expert, offset, bytes, start_ns, end_ns, wait_ns, hit, prefetch, resident_bytes]
  const load = (i: number, start: number, end: number, hit: boolean, prefetch = false) =>
    [i, 0, i, `blk.${i}.ffn_up.weight`, -1, 1000 * i, 100, start, end, end - start, hit, prefetch, 100 * i] as const;
  it('classifies a load as a demand miss, a prefetch or a hit', () => {
    expect(loadKind(false, false)).toBe('miss');
    expect(loadKind(true, false)).toBe('hit');
    expect(loadKind(false, true)).toBe('prefetch');
    expect(loadKind(true, true)).toBe('prefetch');
  });
  it('places each load at its read, a row per kind, at least a pixel wide', () => {
    const sx = new Scale(0, 1000, 100, 1100);  // 1 ns per px from x = 100
    const marks = loadMarks([load(0, 10, 60, false), load(1, 200, 200, true), load(2, 300, 400, false, true)], sx, 100, 1100);
    expect(marks).toEqual([
      { load: 0, kind: 'miss', x0: 110, x1: 160, row: 0 },
      { load: 1, kind: 'hit', x0: 300, x1: 301, row: 2 },
      { load: 2, kind: 'prefetch', x0: 400, x1: 500, row: 1 },
    ]);
  });
  it('leaves out loads outside the window and clips those crossing it', () => {
    const sx = new Scale(500, 600, 0, 100);
    const marks = loadMarks([load(0, 0, 100, false), load(1, 550, 700, false), load(2, 450, 520, true)], sx, 0, 100);
    expect(marks.map((m) => [m.load, m.x0, m.x1])).toEqual([[1, 50, 100], [2, 0, 20]]);
  });
  it('finds the mark under the pointer in its row, the nearest first', () => {
    const sx = new Scale(0, 1000, 0, 1000);
    const marks = loadMarks([load(0, 10, 20, false), load(1, 22, 40, false), load(2, 15, 16, true)], sx, 0, 1000);
    expect(markAt(marks, 15, 0)).toBe(0);
    expect(markAt(marks, 21, 0)).toBe(0);
    expect(markAt(marks, 35, 0)).toBe(1);
    expect(markAt(marks, 15, 2)).toBe(2);
    expect(markAt(marks, 500, 0)).toBe(-1);
    expect(markAt(marks, 15, 1)).toBe(-1);
  });
  it('puts occupancy and budget on one scale, the budget line in view', () => {
    const o = occupancyLine([0, 50, 100, 80], 100, 200, 0);
    expect(o.ys).toEqual([200, 100, 0, 40]);
    expect(o.budgetY).toBe(0);
    expect(o.over).toBe(false);
    const low = occupancyLine([10, 20], 100, 100, 0);  // far below the budget: the line still shows it
    expect(low.budgetY).toBe(0);
    expect(low.ys).toEqual([90, 80]);
    const bad = occupancyLine([150], 100, 150, 0);  // above the budget: flagged, and on the same scale
    expect(bad.over).toBe(true);
    expect(bad.budgetY).toBe(50);
    expect(bad.ys).toEqual([0]);
  });
});
