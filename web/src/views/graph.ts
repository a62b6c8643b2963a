// Graph: the selected step's compute DAG in a layered layout (layout.ts), optionally one layer with its shared
// inputs and the edges in and out. Click a node to select its op (or a weight leaf to select the tensor).
import type { GraphEdge, GraphNode, GraphResp } from '../api';
import type { Ctx } from '../context';
import { layeredLayout, type LayeredLayout } from '../layout';
import { filterGraph, formatNs, OP_COLORS, shapeString, tensorColor } from '../transforms';
import { el, esc, hideTip, panel, rafThrottle, showTip, whenVisible } from '../ui';
import { Lifetime, type View } from '../view';

const SVG = 'http://www.w3.org/2000/svg';
const svgEl = (tag: string, attrs: Record<string, string | number> = {}) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
};

// The graph shown: a step's graph with its timing rows (filled in later when the graph was known already).
type Shown = Omit<GraphResp, 'timing_columns'>;
interface Filtered { nodes: GraphNode[]; edges: GraphEdge[]; boundary: Set<string> }
interface Layout { nodes: Map<string, { x: number; y: number; w: number; h: number; n: GraphNode }>;
  edges: { e: GraphEdge; points: { x: number; y: number }[] }[]; width: number; height: number; boundary: Set<string> }

export function graphView(ctx: Ctx): View {
  const life = new Lifetime();
  const layerSel = el('select', { id: 'graph-layer', 'aria-label': 'layer' }, el('option', { value: 'all' }, 'all layers'),
    el('option', { value: 'none' }, 'outside layers'),
    ...Array.from({ length: ctx.nLayers }, (_, l) => el('option', { value: String(l) }, `layer ${l}`)));
  layerSel.value = ctx.nLayers > 0 ? '0' : 'all';
  const info = el('span', { class: 'muted', id: 'graph-info' });
  const fitBtn = el('button', { onclick: () => fitView() }, 'fit');
  const { root, body } = panel('graph', 'Graph', layerSel, fitBtn, info);
  const svg = svgEl('svg', { id: 'graph-svg', role: 'img' }) as SVGSVGElement;
  body.append(el('div', { class: 'graph-wrap' }, svg));

  let resp: Shown | null = null;
  let layout: Layout | null = null;
  let view = { x: 0, y: 0, w: 100, h: 100 };
  const layouts = new Map<string, Layout>();
  const timing = new Map<number, number[]>();  // node index -> [node, start, end, thread, i]

  const layoutInput = (f: Filtered) =>
    f.nodes.map((n) => ({ id: n.id, width: Math.max(70, Math.min(190, n.name.length * 6.4 + 16)), height: 30 }));
  function toLayout(f: Filtered, placed: LayeredLayout): Layout {
    const nodes = new Map<string, { x: number; y: number; w: number; h: number; n: GraphNode }>();
    for (const n of f.nodes) { const p = placed.nodes.get(n.id)!; nodes.set(n.id, { x: p.x, y: p.y, w: p.width, h: p.height, n }); }
    const edges = f.edges.map((e, k) => ({ e, points: placed.edgePoints[k] }));
    return { nodes, edges, width: placed.width, height: placed.height, boundary: f.boundary };
  }
  const filtered = (r: Shown, layer: number | null | 'all') =>
    filterGraph(r.graph.nodes, r.graph.edges, layer);

  // One layer (tens of nodes) is laid out on the spot; all layers of a newly seen graph in a worker, started as soon
  // as the graph arrives, so choosing "all layers" finds it ready and the page never waits for it.
  function layoutFor(r: Shown, layer: number | null | 'all'): Layout {
    const key = `${r.graph_id}:${layer}`;
    let l = layouts.get(key);
    if (!l) { const f = filtered(r, layer); l = toLayout(f, layeredLayout(layoutInput(f), f.edges)); layouts.set(key, l); }
    return l;
  }
  const inWorker = new Map<string, Promise<void>>();
  let worker: Worker | null = null;
  const answers = new Map<number, { done: (l: LayeredLayout) => void; fail: () => void }>();
  let requestId = 0;
  function layoutAllInWorker(r: Shown) {
    const key = `${r.graph_id}:all`;
    if (layouts.has(key) || inWorker.has(key)) return;
    if (!worker) {
      try {
        worker = new Worker(new URL('../layout-worker.ts', import.meta.url), { type: 'module' });
      } catch { return; }  // no worker: laid out on the spot when chosen
      life.add(() => worker?.terminate());
      worker.onmessage = (ev) => {
        const { id, layout: l } = ev.data;
        answers.get(id)?.done({ ...l, nodes: new Map(l.nodes) });
        answers.delete(id);
      };
      worker.onerror = () => { for (const a of answers.values()) a.fail(); answers.clear(); };
    }
    const f = filtered(r, 'all');
    const id = ++requestId;
    inWorker.set(key, new Promise<void>((resolve) => {
      answers.set(id, {
        done: (placed) => { layouts.set(key, toLayout(f, placed)); inWorker.delete(key); resolve(); },
        fail: () => { inWorker.delete(key); resolve(); },  // then laid out on the spot
      });
    }));
    worker.postMessage({ id, nodes: layoutInput(f), edges: f.edges.map((e) => ({ source: e.source, target: e.target })) });
  }

  // Graphs by id (a run has a few: the prompt's and the generation steps'), so a step change fetches only that
  // step's timing rows, after showing it; one load per step and layer at a time (a table click asks twice).
  const graphs = new Map<number, GraphResp['graph']>();
  let loading: Promise<void> | null = null, loadingKey = '';
  function load(): Promise<void> {
    const key = `${ctx.store.sel.step}|${layerSel.value}`;
    if (loading && loadingKey === key) return loading;
    loadingKey = key;
    const p: Promise<void> = loadNow().finally(() => { if (loading === p) loading = null; });
    loading = p;
    return p;
  }

  async function loadNow() {
    const step = ctx.store.sel.step;
    if (resp && resp.step === step) { show(); return; }
    const gid: number | undefined = ctx.info.derived.step_graph[step];
    const known = gid === undefined ? undefined : graphs.get(gid);
    if (known && gid !== undefined) {
      // A known graph is shown at once; the step's timing rows (tooltips, node clicks) follow without delaying it.
      const shown: Shown = { step, graph_id: gid, graph: known, timing: [] };
      resp = shown;
      timing.clear();
      show();
      ctx.api.graphTiming(step).then((t) => {
        if (resp !== shown) return;
        shown.timing = t.timing;
        for (const r of t.timing) timing.set(r[0], r);
      }).catch((e) => { info.textContent = `error: ${(e as Error).message}`; });
      return;
    }
    let next: GraphResp;
    try {
      next = await ctx.api.graph(step);
    } catch (e) { info.textContent = `error: ${(e as Error).message}`; return; }
    graphs.set(next.graph_id, next.graph);
    layoutAllInWorker(next);
    if (ctx.store.sel.step !== step) return;  // a newer step was selected meanwhile
    resp = next;
    timing.clear();
    for (const t of resp.timing) timing.set(t[0], t);
    show();
  }

  // Lays out (cached) and draws the current graph and layer; the same layout only moves the selection outline.
  function show() {
    if (!resp) return;
    const pending = inWorker.get(`${resp.graph_id}:${currentLayer()}`);
    if (pending) { info.textContent = 'laying out all layers…'; pending.then(show); return; }
    const t0 = performance.now();
    const nextLayout = layoutFor(resp, currentLayer());
    const fresh = layout !== nextLayout;
    layout = nextLayout;
    if (fresh) { render(); fitView(); } else markSelection();
    svg.dataset.layoutMs = (performance.now() - t0).toFixed(1);
    info.textContent = `step ${resp.step} · graph ${resp.graph_id} · ${layout.nodes.size} of ${resp.graph.nodes.length} nodes, ${layout.edges.length} edges`;
  }

  // The other graphs of the run (a run has a few: the prompt's and the generation steps') are fetched and laid out
  // for the shown layer while the page is idle, so the first step into them costs no more than any other.
  function prefetchGraphsWhenIdle() {
    const stepGraph = ctx.info.derived.step_graph;
    const firstStep = new Map<number, number>();
    stepGraph.forEach((gid, step) => { if (gid >= 0 && !firstStep.has(gid)) firstStep.set(gid, step); });
    const idle = (f: () => void) => {
      if ('requestIdleCallback' in window) { const id = requestIdleCallback(f); life.add(() => cancelIdleCallback(id)); }
      else { const id = setTimeout(f, 200); life.add(() => clearTimeout(id)); }
    };
    for (const [gid, step] of firstStep) {
      if (graphs.has(gid)) continue;
      idle(() => {
        if (graphs.has(gid)) return;
        ctx.api.graph(step).then((r) => {
          if (graphs.has(gid)) return;
          graphs.set(gid, r.graph);
          layoutAllInWorker(r);
          idle(() => { layoutFor(r, currentLayer()); });
        }).catch(() => {});  // only ahead of time: a failure shows when the step is selected
      });
    }
  }

  function currentLayer(): number | null | 'all' {
    return layerSel.value === 'all' ? 'all' : layerSel.value === 'none' ? null : Number(layerSel.value);
  }

  function isSelected(id: string, n: GraphNode): boolean {
    const selOp = ctx.store.sel.op;
    if (n.op === 'LEAF') return ctx.store.sel.tensor === n.name;
    return !!(selOp && resp && selOp.step === resp.step && id === `node_${selOp.node}`);
  }
  function markSelection() {
    if (!layout) return;
    for (const g of svg.querySelectorAll<SVGGElement>('g.node')) {
      const p = layout.nodes.get(g.dataset.id!);
      if (p) g.classList.toggle('selected', isSelected(g.dataset.id!, p.n));
    }
  }

  function render() {
    if (!layout || !resp) return;
    svg.replaceChildren();
    nodeEls.clear();
    const defs = svgEl('defs');
    const marker = svgEl('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' });
    marker.append(svgEl('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#6b7685' }));
    defs.append(marker);
    svg.append(defs);
    const ge = svgEl('g', { class: 'edges' });
    for (const { e, points } of layout.edges) {
      if (!points.length) continue;
      const d = points.map((p, i) => `${i ? 'L' : 'M'}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(' ');
      ge.append(svgEl('path', { d, class: 'edge', 'data-source': e.source, 'data-target': e.target, 'marker-end': 'url(#arrow)' }));
    }
    svg.append(ge);
    const gn = svgEl('g', { class: 'nodes' });
    for (const [id, p] of layout.nodes) {
      const n = p.n;
      const leaf = n.op === 'LEAF';
      const fill = leaf ? (n.pool === 'MODEL_FILE' ? tensorColor(n.layer, n.category ?? '', ctx.nLayers) : '#3a4350') : OP_COLORS[n.op] ?? '#888';
      const selected = isSelected(id, n);
      const g = svgEl('g', { class: `node${leaf ? ' leaf' : ''}${leaf && n.pool === 'MODEL_FILE' ? ' weight' : ''}${selected ? ' selected' : ''}${layout.boundary.has(id) ? ' boundary' : ''}`,
        'data-id': id, 'data-name': n.name, transform: `translate(${p.x - p.w / 2},${p.y - p.h / 2})` });
      g.append(svgEl('rect', { width: p.w, height: p.h, rx: leaf ? 2 : 6, fill }));
      gn.append(g);
      nodeEls.set(id, g);
    }
    svg.append(gn);
    labelled.clear();
    applyView();
  }

  // Labels (two texts per node, most of the rendering cost) only for the nodes in view and only once the zoom makes
  // them legible; added as the view moves, kept afterwards. All 512 nodes of a step at once then cost their boxes.
  const nodeEls = new Map<string, SVGElement>();
  const labelled = new Set<string>();
  const LEGIBLE_SCALE = 0.45;  // screen px per layout px below which 10 px text is unreadable
  function labelVisible() {
    if (!layout) return;
    const width = svgSize?.width ?? 0;
    if (width && width / view.w < LEGIBLE_SCALE) return;
    const mx = view.w * 0.25, my = view.h * 0.25;
    for (const [id, p] of layout.nodes) {
      if (labelled.has(id)) continue;
      if (p.x + p.w / 2 < view.x - mx || p.x - p.w / 2 > view.x + view.w + mx || p.y + p.h / 2 < view.y - my || p.y - p.h / 2 > view.y + view.h + my) continue;
      const g = nodeEls.get(id);
      if (!g) continue;
      const n = p.n;
      const t = svgEl('text', { x: p.w / 2, y: 12, 'text-anchor': 'middle' });
      t.textContent = n.name.length > 28 ? `${n.name.slice(0, 27)}…` : n.name;
      const t2 = svgEl('text', { x: p.w / 2, y: 24, 'text-anchor': 'middle', class: 'sub' });
      t2.textContent = n.op === 'LEAF' ? (n.pool ?? '') : n.op;
      g.append(t, t2);
      labelled.add(id);
    }
  }
  const labelSoon = rafThrottle(labelVisible);

  function applyView() {
    svg.setAttribute('viewBox', `${view.x} ${view.y} ${view.w} ${view.h}`);
    labelSoon();
  }
  // The SVG's size, kept current by a ResizeObserver: measuring it right after inserting hundreds of nodes would
  // force a synchronous layout of all of them (60 ms for every layer at once).
  let svgSize: { width: number; height: number } | null = null;
  new ResizeObserver(() => { const r = svg.getBoundingClientRect(); svgSize = { width: r.width, height: r.height }; }).observe(svg);
  function fitView() {
    if (!layout) return;
    const r = svgSize ?? svg.getBoundingClientRect();
    const aspect = (r.height || 500) / (r.width || 800);
    // a tall graph: fit the width and start at the top
    const w = Math.max(layout.width, 300);
    view = { x: 0, y: 0, w, h: w * aspect };
    if (layout.height < view.h) view.y = -(view.h - layout.height) / 2;
    applyView();
  }
  function centerOn(id: string) {
    const p = layout?.nodes.get(id);
    if (!p) return;
    view.x = p.x - view.w / 2;
    view.y = p.y - view.h / 2;
    applyView();
  }

  svg.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const r = svg.getBoundingClientRect();
    const f = Math.pow(1.0015, ev.deltaY);
    const ax = view.x + ((ev.clientX - r.left) / r.width) * view.w, ay = view.y + ((ev.clientY - r.top) / r.height) * view.h;
    view = { x: ax - (ax - view.x) * f, y: ay - (ay - view.y) * f, w: view.w * f, h: view.h * f };
    applyView();
  }, { passive: false });
  let drag: { x: number; y: number; vx: number; vy: number; moved: boolean } | null = null;
  svg.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y, moved: false }; });
  window.addEventListener('mousemove', (ev) => {
    if (!drag) return;
    const r = svg.getBoundingClientRect();
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    view.x = drag.vx - (dx / r.width) * view.w;
    view.y = drag.vy - (dy / r.height) * view.h;
    applyView();
  }, { signal: life.signal });
  window.addEventListener('mouseup', async (ev) => {
    const d = drag;
    drag = null;
    if (!d || d.moved) return;
    const g = (ev.target as Element).closest?.('g.node') as SVGGElement | null;
    if (!g || !resp || !layout) return;
    const id = g.dataset.id!;
    const n = layout.nodes.get(id)!.n;
    if (n.op === 'LEAF') {
      const t = ctx.tensorByName.get(n.name);
      ctx.store.setTensor(n.name, t ? [t.offset_start, t.offset_end] : null);
    } else {
      const t = timing.get(n.index ?? Number(id.slice(5)));
      if (t) ctx.store.setOp(await ctx.opByIndex(t[4]));
    }
  }, { signal: life.signal });
  svg.addEventListener('mousemove', (ev) => {
    if (drag) return;
    const g = (ev.target as Element).closest?.('g.node') as SVGGElement | null;
    if (!g || !layout) { hideTip('graph'); return; }
    const n = layout.nodes.get(g.dataset.id!)!.n;
    const t = n.index !== undefined ? timing.get(n.index) : undefined;
    showTip(ev.clientX, ev.clientY, `<b>${esc(n.name)}</b> ${esc(n.op)}<br>${esc(n.type ?? '')} ${esc(shapeString(n.shape))} · layer ${n.layer ?? '—'} · ${esc(n.pool ?? '')}` +
      (n.weight_tensor ? `<br>weight ${esc(n.weight_tensor)}` : '') + (t ? `<br>${formatNs(t[2] - t[1])} on thread ${t[3]}` : ''), 'graph');
  });
  svg.addEventListener('mouseleave', () => hideTip('graph'));
  layerSel.addEventListener('change', load);

  ctx.store.on('step', whenVisible(root, () => { load(); }, life.signal));
  ctx.store.on('op', async () => {
    const op = ctx.store.sel.op;
    const want = op?.layer === null || op?.layer === undefined ? 'none' : String(op.layer);
    if (op && layerSel.value !== 'all' && want !== layerSel.value) layerSel.value = want;
    await load();
    if (op) centerOn(`node_${op.node}`);
  });
  ctx.store.on('tensor', () => {
    markSelection();
    const name = ctx.store.sel.tensor;
    if (name && layout) for (const [id, p] of layout.nodes) if (p.n.name === name) { centerOn(id); break; }
  });
  return { element: root, start: () => load().then(prefetchGraphsWhenIdle), dispose: () => life.dispose() };
}
