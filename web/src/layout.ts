// A layered (Sugiyama-style) DAG layout, pure and fast enough for every node of a step's graph at once: ranks by
// longest path, long edges split into dummy points, barycenter ordering sweeps that keep the order with the fewest
// crossings, and x positions by weighted isotonic regression (each node as close to the mean of its neighbours as
// the order and spacing allow). dagre did the same more thoroughly but took seconds for 512 nodes.

export interface LayoutInputNode { id: string; width: number; height: number }
export interface LayoutInputEdge { source: string; target: string }
export interface LayoutOptions { nodesep: number; edgesep: number; ranksep: number; marginx: number; marginy: number;
  sweeps: number }
export interface PlacedNode { x: number; y: number; width: number; height: number }  // x, y: center
// edgePoints: per input edge (same order), from the source's bottom through the dummy points to the target's top
export interface LayeredLayout { nodes: Map<string, PlacedNode>; edgePoints: { x: number; y: number }[][];
  width: number; height: number; ranks: number }

const DEFAULTS: LayoutOptions = { nodesep: 14, edgesep: 6, ranksep: 26, marginx: 10, marginy: 10, sweeps: 6 };

// One slot in a rank: a real node (index < nReal) or a dummy point of a long edge.
interface Slot { width: number; preds: number[]; succs: number[] }

export function layeredLayout(nodes: LayoutInputNode[], edges: LayoutInputEdge[],
  options: Partial<LayoutOptions> = {}): LayeredLayout {
  const o = { ...DEFAULTS, ...options };
  const nReal = nodes.length;
  const indexOf = new Map(nodes.map((n, i) => [n.id, i]));
  // edges to unknown nodes and self loops are not laid out (their point lists stay empty)
  const edgeEnds = edges.map((e) => [indexOf.get(e.source) ?? -1, indexOf.get(e.target) ?? -1] as const);
  const valid = ([s, t]: readonly [number, number]) => s >= 0 && t >= 0 && s !== t;
  const rank = assignRanks(nReal, edgeEnds.filter(valid));

  // Slots: real nodes, then dummies for every edge spanning more than one rank (edges going up, possible only
  // in a cyclic input, stay straight lines).
  const slots: Slot[] = nodes.map((n) => ({ width: n.width, preds: [], succs: [] }));
  const slotRank = [...rank];
  const chains: number[][] = [];  // per edge: the slots from source to target
  for (const ends of edgeEnds) {
    if (!valid(ends)) { chains.push([]); continue; }
    const [s, t] = ends;
    const chain = [s];
    if (rank[t] > rank[s]) {
      for (let r = rank[s] + 1; r < rank[t]; r++) {
        slots.push({ width: 0, preds: [], succs: [] });
        slotRank.push(r);
        chain.push(slots.length - 1);
      }
      chain.push(t);
      for (let k = 0; k + 1 < chain.length; k++) { slots[chain[k]].succs.push(chain[k + 1]); slots[chain[k + 1]].preds.push(chain[k]); }
    } else chain.push(t);
    chains.push(chain);
  }

  const nRanks = nReal ? Math.max(...rank) + 1 : 0;
  const order = orderRanks(slots, slotRank, nRanks, o.sweeps);
  const x = positionX(slots, order, nReal, o);

  // y per rank: rank heights are the tallest node of the rank.
  const rankH = new Array<number>(nRanks).fill(0);
  for (let i = 0; i < nReal; i++) rankH[rank[i]] = Math.max(rankH[rank[i]], nodes[i].height);
  const rankY: number[] = [];
  let y = o.marginy;
  for (let r = 0; r < nRanks; r++) { rankY.push(y + rankH[r] / 2); y += rankH[r] + o.ranksep; }
  const height = nRanks ? y - o.ranksep + o.marginy : 2 * o.marginy;

  let minX = Infinity, maxX = -Infinity;
  for (let i = 0; i < slots.length; i++) { minX = Math.min(minX, x[i] - slots[i].width / 2); maxX = Math.max(maxX, x[i] + slots[i].width / 2); }
  if (!slots.length) minX = maxX = 0;
  const shift = o.marginx - minX;
  const placed = new Map<string, PlacedNode>();
  nodes.forEach((n, i) => placed.set(n.id, { x: x[i] + shift, y: rankY[rank[i]], width: n.width, height: n.height }));
  const edgePoints = chains.map((chain) => {
    if (!chain.length) return [];
    const first = chain[0], last = chain[chain.length - 1];
    const down = rank[last] > rank[first];
    const pts = [{ x: x[first] + shift, y: rankY[rank[first]] + (down ? 1 : -1) * nodes[first].height / 2 }];
    for (let k = 1; k + 1 < chain.length; k++) pts.push({ x: x[chain[k]] + shift, y: rankY[slotRank[chain[k]]] });
    pts.push({ x: x[last] + shift, y: rankY[rank[last]] - (down ? 1 : -1) * nodes[last].height / 2 });
    return pts;
  });
  return { nodes: placed, edgePoints, width: maxX - minX + 2 * o.marginx, height, ranks: nRanks };
}

// Longest-path ranks (a node one below its deepest input), then pulled down where that shortens edges. Nodes on a
// cycle (not expected in a compute graph) get ranks in input order.
export function assignRanks(n: number, edges: readonly (readonly [number, number])[]): number[] {
  const succs: number[][] = Array.from({ length: n }, () => []);
  const indeg = new Array<number>(n).fill(0);
  for (const [s, t] of edges) { succs[s].push(t); indeg[t]++; }
  const rank = new Array<number>(n).fill(0);
  const topo: number[] = [];
  const queue: number[] = [];
  for (let i = 0; i < n; i++) if (indeg[i] === 0) queue.push(i);
  const done = new Array<boolean>(n).fill(false);
  let head = 0;
  const drain = () => {
    while (head < queue.length) {
      const v = queue[head++];
      done[v] = true;
      topo.push(v);
      for (const w of succs[v]) {
        rank[w] = Math.max(rank[w], rank[v] + 1);
        if (--indeg[w] === 0) queue.push(w);
      }
    }
  };
  drain();
  for (let i = 0; i < n; i++) if (!done[i] && indeg[i] > 0) { indeg[i] = 0; queue.push(i); drain(); }
  // Consumers first: a node with at least as many outputs as inputs moves down to just above its first consumer
  // (shortens as many edges as it lengthens, or more): a layer's weights and its KV cache views then sit beside
  // the ops reading them instead of all at the top.
  const preds = new Array<number>(n).fill(0);
  for (const [, t] of edges) preds[t]++;
  for (let k = topo.length - 1; k >= 0; k--) {
    const v = topo[k];
    if (!succs[v].length || succs[v].length < preds[v]) continue;
    let below = Infinity;
    for (const w of succs[v]) below = Math.min(below, rank[w]);
    if (below - 1 > rank[v]) rank[v] = below - 1;
  }
  return rank;
}

// Orders each rank by barycenter sweeps (down using predecessors, up using successors) and keeps the order with
// the fewest edge crossings.
function orderRanks(slots: Slot[], slotRank: number[], nRanks: number, sweeps: number): number[][] {
  const order: number[][] = Array.from({ length: nRanks }, () => []);
  // initial order: depth-first from the top ranks, so connected nodes start out near each other
  const seen = new Array<boolean>(slots.length).fill(false);
  const visit = (start: number) => {
    const stack = [start];
    while (stack.length) {
      const v = stack.pop()!;
      if (seen[v]) continue;
      seen[v] = true;
      order[slotRank[v]].push(v);
      for (let k = slots[v].succs.length - 1; k >= 0; k--) if (!seen[slots[v].succs[k]]) stack.push(slots[v].succs[k]);
    }
  };
  const byRank = slots.map((_, i) => i).sort((a, b) => slotRank[a] - slotRank[b] || a - b);
  for (const v of byRank) if (!seen[v]) visit(v);

  const pos = new Float64Array(slots.length);
  const bary = new Float64Array(slots.length);
  for (const r of order) r.forEach((v, i) => { pos[v] = i; });
  let best = order.map((r) => r.slice());
  let bestCrossings = crossings(slots, order, pos);
  for (let s = 0; s < sweeps; s++) {
    const down = s % 2 === 0;
    for (let k = 1; k < nRanks; k++) {
      const r = order[down ? k : nRanks - 1 - k];
      for (const v of r) {
        const nb = down ? slots[v].preds : slots[v].succs;
        let sum = 0;
        for (const w of nb) sum += pos[w];
        bary[v] = nb.length ? sum / nb.length : pos[v];
      }
      r.sort((a, b) => bary[a] - bary[b] || pos[a] - pos[b]);
      for (let i = 0; i < r.length; i++) pos[r[i]] = i;
    }
    const c = crossings(slots, order, pos);
    if (c < bestCrossings) { bestCrossings = c; best = order.map((r) => r.slice()); }
  }
  return best;
}

// Edge crossings between consecutive ranks (counted by insertion into a Fenwick tree).
function crossings(slots: Slot[], order: number[][], pos: Float64Array): number {
  let total = 0;
  const targets: number[] = [];
  for (let r = 0; r + 1 < order.length; r++) {
    const below = order[r + 1].length;
    if (!below) continue;
    targets.length = 0;
    for (const v of order[r]) {
      const succs = slots[v].succs;
      if (succs.length === 1) { targets.push(pos[succs[0]]); continue; }
      const from = targets.length;
      for (const w of succs) targets.push(pos[w]);
      for (let i = from + 1; i < targets.length; i++)  // insertion sort: a node has few outputs
        for (let j = i; j > from && targets[j - 1] > targets[j]; j--) [targets[j - 1], targets[j]] = [targets[j], targets[j - 1]];
    }
    const tree = new Int32Array(below + 1);
    let seen = 0;
    for (const t of targets) {
      let greater = seen;  // seen so far minus those at positions <= t
      for (let i = t + 1; i > 0; i -= i & -i) greater -= tree[i];
      total += greater;
      for (let i = t + 1; i <= below; i += i & -i) tree[i]++;
      seen++;
    }
  }
  return total;
}

// x of every slot: alternately pulled to the mean x of its predecessors and of its successors, then the rank is
// fitted to those targets in order with the minimum spacing (weighted isotonic regression, pool adjacent
// violators). Dummy points weigh more, so long edges run straight.
function positionX(slots: Slot[], order: number[][], nReal: number, o: LayoutOptions): Float64Array {
  const x = new Float64Array(slots.length);
  const gap = (a: number, b: number) => slots[a].width / 2 + slots[b].width / 2 + (a < nReal && b < nReal ? o.nodesep : o.edgesep);
  const widest = Math.max(0, ...order.map((r) => r.length));
  const values = new Float64Array(widest), weights = new Float64Array(widest), offsets = new Float64Array(widest);
  for (const r of order) {
    let cur = 0;
    r.forEach((v, i) => { if (i) cur += gap(r[i - 1], v); x[v] = cur; });
  }
  const passes = 8;
  for (let p = 0; p < passes; p++) {
    const down = p % 2 === 0;
    for (let k = 0; k < order.length; k++) {
      const r = order[down ? k : order.length - 1 - k];
      if (!r.length) continue;
      for (let i = 0; i < r.length; i++) {
        const v = r[i];
        offsets[i] = i ? offsets[i - 1] + gap(r[i - 1], v) : 0;
        const nb = down ? slots[v].preds : slots[v].succs;
        const all = nb.length ? nb : (down ? slots[v].succs : slots[v].preds);
        let sum = 0;
        for (const w of all) sum += x[w];
        values[i] = (all.length ? sum / all.length : x[v]) - offsets[i];
        weights[i] = v >= nReal ? 4 : 1;
      }
      const fitted = isotonic(values, weights, r.length);
      for (let i = 0; i < r.length; i++) x[r[i]] = fitted[i] + offsets[i];
    }
  }
  return x;
}

// The non-decreasing sequence closest to `values` in weighted least squares (pool adjacent violators).
export function isotonic(values: ArrayLike<number>, weights: ArrayLike<number>, n = values.length): Float64Array {
  // blocks of pooled values: mean, total weight and length, as a stack
  const mean = new Float64Array(n), weight = new Float64Array(n), count = new Int32Array(n);
  let top = -1;
  for (let i = 0; i < n; i++) {
    top++;
    mean[top] = values[i]; weight[top] = weights[i]; count[top] = 1;
    while (top > 0 && mean[top - 1] > mean[top]) {
      const w = weight[top - 1] + weight[top];
      mean[top - 1] = (mean[top - 1] * weight[top - 1] + mean[top] * weight[top]) / w;
      weight[top - 1] = w;
      count[top - 1] += count[top];
      top--;
    }
  }
  const out = new Float64Array(n);
  for (let k = 0, i = 0; k <= top; k++) for (let j = 0; j < count[k]; j++) out[i++] = mean[k];
  return out;
}
