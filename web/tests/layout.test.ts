import { describe, expect, it } from 'vitest';
import { assignRanks, isotonic, layeredLayout, type LayoutInputEdge, type LayoutInputNode } from '../src/layout';

const node = (id: string, width = 80): LayoutInputNode => ({ id, width, height: 30 });
const edge = (source: string, target: string): LayoutInputEdge => ({ source, target });

// Nodes of one rank never overlap (centers at least half of both widths apart).
function overlaps(l: ReturnType<typeof layeredLayout>): number {
  const byY = new Map<number, { x: number; width: number }[]>();
  for (const p of l.nodes.values()) byY.set(p.y, [...(byY.get(p.y) ?? []), p]);
  let n = 0;
  for (const row of byY.values()) {
    row.sort((a, b) => a.x - b.x);
    for (let i = 1; i < row.length; i++) if (row[i].x - row[i - 1].x < (row[i].width + row[i - 1].width) / 2 - 1e-6) n++;
  }
  return n;
}

describe('assignRanks', () => {
  it('puts every node below its inputs', () => {
    const r = assignRanks(4, [[0, 1], [1, 2], [0, 2], [2, 3]]);
    expect(r).toEqual([0, 1, 2, 3]);
  });
  it('moves an input-less node (a weight) down to just above its consumer', () => {
    // 0 -> 1 -> 2 -> 3, weight 4 -> 3
    expect(assignRanks(5, [[0, 1], [1, 2], [2, 3], [4, 3]])[4]).toBe(2);
  });
  it('terminates on a cycle and ranks every node', () => {
    const r = assignRanks(3, [[0, 1], [1, 2], [2, 1]]);
    expect(r).toHaveLength(3);
    expect(r.every((x) => Number.isFinite(x) && x >= 0)).toBe(true);
  });
});

describe('isotonic', () => {
  it('keeps an increasing sequence and pools violators to their weighted mean', () => {
    expect(Array.from(isotonic([1, 2, 3], [1, 1, 1]))).toEqual([1, 2, 3]);
    expect(Array.from(isotonic([3, 1, 5], [1, 1, 1]))).toEqual([2, 2, 5]);
    expect(Array.from(isotonic([4, 0], [3, 1]))).toEqual([3, 3]);
    expect(Array.from(isotonic([5, 4, 3, 9], [1, 1, 1, 1], 3))).toEqual([4, 4, 4]);  // only the first n
  });
});

describe('layeredLayout', () => {
  it('places every node, edges point downwards and ranks do not overlap', () => {
    const nodes = ['in', 'a', 'b', 'c', 'd', 'w1', 'w2', 'out'].map((id) => node(id, id.length * 20 + 40));
    const edges = [edge('in', 'a'), edge('in', 'b'), edge('w1', 'a'), edge('w2', 'b'), edge('a', 'c'), edge('b', 'c'),
      edge('c', 'd'), edge('in', 'd'), edge('d', 'out')];
    const l = layeredLayout(nodes, edges);
    expect(l.nodes.size).toBe(nodes.length);
    for (const e of edges) expect(l.nodes.get(e.target)!.y).toBeGreaterThan(l.nodes.get(e.source)!.y);
    expect(overlaps(l)).toBe(0);
    expect(l.edgePoints).toHaveLength(edges.length);
    // each edge runs from the bottom of its source to the top of its target, through one point per skipped rank
    edges.forEach((e, k) => {
      const pts = l.edgePoints[k], s = l.nodes.get(e.source)!, t = l.nodes.get(e.target)!;
      expect(pts[0]).toEqual({ x: s.x, y: s.y + s.height / 2 });
      expect(pts[pts.length - 1]).toEqual({ x: t.x, y: t.y - t.height / 2 });
    });
    const long = edges.findIndex((e) => e.source === 'in' && e.target === 'd');
    expect(l.edgePoints[long].length).toBe(2 + 2);  // in (rank 0) → d (rank 3): two ranks skipped
    for (const p of l.nodes.values()) {
      expect(p.x - p.width / 2).toBeGreaterThanOrEqual(0);
      expect(p.x + p.width / 2).toBeLessThanOrEqual(l.width);
      expect(p.y + p.height / 2).toBeLessThanOrEqual(l.height);
    }
  });

  it('uncrosses a crossed pair of chains', () => {
    // a1 b1 over a2 b2 given in crossed input order: a1 → a2, b1 → b2
    const l = layeredLayout([node('a1'), node('b1'), node('b2'), node('a2')], [edge('a1', 'a2'), edge('b1', 'b2')]);
    const x = (id: string) => l.nodes.get(id)!.x;
    expect(Math.sign(x('a1') - x('b1'))).toBe(Math.sign(x('a2') - x('b2')));
  });

  it('is deterministic and handles self loops, unknown endpoints and an empty graph', () => {
    const nodes = [node('a'), node('b')];
    const edges = [edge('a', 'b'), edge('a', 'a'), edge('a', 'zz')];
    const l1 = layeredLayout(nodes, edges), l2 = layeredLayout(nodes, edges);
    expect([...l1.nodes.entries()]).toEqual([...l2.nodes.entries()]);
    expect(l1.edgePoints[1]).toEqual([]);
    expect(l1.edgePoints[2]).toEqual([]);
    const empty = layeredLayout([], []);
    expect(empty.nodes.size).toBe(0);
    expect(empty.width).toBeGreaterThan(0);
  });

  it('lays out a ~500-node layered chain graph with residual and shared-input edges without overlaps', () => {
    const nodes: LayoutInputNode[] = [], edges: LayoutInputEdge[] = [];
    nodes.push(node('inp'));
    let prev = 'inp';
    for (let layer = 0; layer < 30 && nodes.length < 500; layer++) {
      const ids = Array.from({ length: 16 }, (_, k) => `l${layer}_${k}`);
      ids.forEach((id) => nodes.push(node(id)));
      edges.push(edge(prev, ids[0]));
      for (let k = 1; k < ids.length; k++) edges.push(edge(ids[k - 1], ids[k]));
      edges.push(edge(prev, ids[ids.length - 1]));  // residual
      edges.push(edge('inp', ids[5]));              // a shared input used by every layer
      prev = ids[ids.length - 1];
    }
    const l = layeredLayout(nodes, edges);
    expect(l.nodes.size).toBe(nodes.length);
    expect(overlaps(l)).toBe(0);
  });
});
