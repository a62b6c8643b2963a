// Experts (mixture-of-experts runs only): a routed layer × expert heatmap of how often each expert was chosen in the
// selected step (or every step up to it), the selected token's chosen experts outlined with their weights, and
// per layer the experts' popularity as bars (sorted, hottest first). Selecting a MUL_MAT_ID op (timeline, table)
// outlines the experts its layer read in that step; clicking a cell selects that expert, whose slabs the file
// heatmap outlines. Below, the expert-cache replay of the whole run (`analyze --expert-cache`'s, from
// /expert-cache) as hit rate against cache size, one line per policy, for the scope and prefetch picked.
import type { Ctx } from '../context';
import type { ExpertCache, Routing } from '../api';
import { expertCounts, heatColor, hitRateCurves, stepLayerExperts, tokenExperts, tokensOfStep } from '../transforms';
import { cssWidth, el, fitCanvas, hideTip, panel, showTip, whenVisible } from '../ui';
import { Lifetime, type View } from '../view';

const PAD_L = 34, ROW_H = 22, POP_H = 18, CACHE_H = 220;
const POLICY_COLORS: Record<string, string> = { lru: '#4e79a7', lfu: '#f28e2b', fifo: '#59a14f', 'lru-2': '#b07aa1',
  'least-stale': '#edc948', opt: '#e15759' };

export function expertsView(ctx: Ctx): View {
  const life = new Lifetime();
  const info = el('span', { class: 'muted' });
  const tokenSel = el('select', { id: 'experts-token', 'aria-label': 'token' });
  const cumul = el('label', { class: 'small' }, el('input', { type: 'checkbox', id: 'experts-cumulative' }), ' cumulative');
  const cumulBox = cumul.querySelector('input')!;
  const { root, body } = panel('experts', 'Experts', tokenSel, cumul, info);
  const canvas = el('canvas', { id: 'experts-canvas' });
  const pop = el('canvas', { id: 'experts-pop' });
  const weights = el('div', { class: 'topk', id: 'experts-weights' });
  body.append(el('div', { class: 'split' }, el('div', { class: 'canvas-wrap grow' }, canvas, pop), weights));
  const option = (v: string) => el('option', { value: v }, v);
  const scopeSel = el('select', { id: 'experts-cache-scope', 'aria-label': 'cache scope' }, option('global'), option('per-layer'));
  const prefetchSel = el('select', { id: 'experts-cache-prefetch', 'aria-label': 'prefetch' },
    option('none'), option('predicted'), option('previous-token'));
  const cacheInfo = el('span', { class: 'muted small', id: 'experts-cache-info' });
  const cacheCanvas = el('canvas', { id: 'experts-cache' });
  body.append(el('div', { class: 'small' }, 'expert cache replay, hit rate vs size · scope ', scopeSel, ' prefetch ',
    prefetchSel, ' ', cacheInfo), el('div', { class: 'canvas-wrap' }, cacheCanvas));
  let r: Routing | null = null;
  let token = -1;  // index into r.tokens
  let opExperts: { layer: number; experts: Set<number> } | null = null;  // the selected MUL_MAT_ID's
  let cache: ExpertCache | null = null;
  let cacheRequest: AbortController | null = null;

  const cellW = (W: number) => (W - PAD_L) / Math.max(1, r?.n_expert ?? 1);

  // The step's tokens in the selector; keeps the chosen position when the step has it, else its last token.
  function fillTokens() {
    if (!r) return;
    const ts = tokensOfStep(r, ctx.store.sel.step);
    const pos = token >= 0 ? r.tokens[token][1] : -1;
    token = ts.find((t) => r!.tokens[t][1] === pos) ?? ts[ts.length - 1] ?? -1;
    tokenSel.replaceChildren(...ts.map((t) => el('option', { value: t, selected: t === token }, `position ${r!.tokens[t][1]}`)));
  }

  function draw() {
    if (!r) return;
    const L = r.layers.length, E = r.n_expert;
    const H = L * ROW_H + 14;
    const g = fitCanvas(canvas, H);
    const W = cssWidth(canvas);
    g.clearRect(0, 0, W, H);
    const step = ctx.store.sel.step, cumulative = ctx.store.cumulative;
    const { counts, max } = expertCounts(r, step, cumulative);
    const cw = cellW(W);
    g.font = '10px system-ui, sans-serif';
    g.textBaseline = 'middle';
    let cells = 0;
    for (let l = 0; l < L; l++) {
      g.fillStyle = '#9aa3ad';
      g.fillText(`L${r.layers[l]}`, 2, l * ROW_H + ROW_H / 2);
      for (let e = 0; e < E; e++) {
        g.fillStyle = heatColor(counts[l * E + e], max) ?? '#14181e';
        g.fillRect(PAD_L + e * cw, l * ROW_H + 1, Math.max(1, cw - (cw > 4 ? 1 : 0)), ROW_H - 2);
        cells++;
      }
    }
    // The MUL_MAT_ID's experts (cyan), the selected token's (white), the selected expert (orange, dashed).
    let opOutlined = 0;
    if (opExperts) {
      const l = r.layers.indexOf(opExperts.layer);
      g.strokeStyle = '#3df2ff';
      g.lineWidth = 1;
      if (l >= 0) for (const e of opExperts.experts) { g.strokeRect(PAD_L + e * cw + 0.5, l * ROW_H + 0.5, cw - 1, ROW_H - 1); opOutlined++; }
    }
    let outlined = 0;
    const chosen = token >= 0 ? tokenExperts(r, token) : [];
    g.strokeStyle = '#ffffff';
    g.lineWidth = 2;
    chosen.forEach((slots, l) => slots.forEach(([e, w]) => {
      g.strokeRect(PAD_L + e * cw + 1, l * ROW_H + 1, cw - 2, ROW_H - 2);
      if (cw >= 22) { g.fillStyle = '#ffffff'; g.fillText(w.toFixed(2).replace(/^0/, ''), PAD_L + e * cw + 2, l * ROW_H + ROW_H / 2); }
      outlined++;
    }));
    const ex = ctx.store.sel.expert;
    if (ex) {
      const l = r.layers.indexOf(ex.layer);
      g.strokeStyle = '#ff9f1c';
      g.setLineDash([3, 2]);
      if (l >= 0) g.strokeRect(PAD_L + ex.expert * cw - 1, l * ROW_H - 1, cw + 2, ROW_H + 2);
      g.setLineDash([]);
    }
    g.fillStyle = '#9aa3ad';
    g.fillText(`expert 0 … ${E - 1} · ${cumulative ? `steps 0–${step}` : `step ${step}`} · most picks ${max}`, PAD_L, L * ROW_H + 7);
    canvas.dataset.cells = String(cells);
    canvas.dataset.layers = String(L);
    canvas.dataset.experts = String(E);
    canvas.dataset.topK = String(r.top_k);
    canvas.dataset.outlined = String(outlined);
    canvas.dataset.opOutlined = String(opOutlined);
    canvas.dataset.step = String(step);
    drawPopularity(counts);
    drawWeights(chosen);
  }

  // Per layer, the experts' picks sorted (hottest first) as bars, against the uniform share (a grey line).
  function drawPopularity(counts: number[]) {
    if (!r) return;
    const L = r.layers.length, E = r.n_expert;
    const H = L * POP_H + 4;
    const g = fitCanvas(pop, H);
    const W = cssWidth(pop);
    g.clearRect(0, 0, W, H);
    const cw = cellW(W);
    g.font = '10px system-ui, sans-serif';
    g.textBaseline = 'middle';
    for (let l = 0; l < L; l++) {
      const row = counts.slice(l * E, (l + 1) * E).sort((a, b) => b - a);
      const total = row.reduce((a, b) => a + b, 0), top = Math.max(1, row[0]);
      const y0 = l * POP_H + 2, h = POP_H - 4;
      g.fillStyle = '#9aa3ad';
      g.fillText(`L${r.layers[l]}`, 2, y0 + h / 2);
      g.fillStyle = '#4e79a7';
      row.forEach((c, i) => { if (c) g.fillRect(PAD_L + i * cw, y0 + h - (c / top) * h, Math.max(1, cw - (cw > 4 ? 1 : 0)), (c / top) * h); });
      if (total) {
        const y = y0 + h - (total / E / top) * h;
        g.strokeStyle = '#8f99a5';
        g.beginPath(); g.moveTo(PAD_L, y); g.lineTo(W, y); g.stroke();
        g.fillStyle = '#d6dde6';
        g.fillText(`hottest ${(row[0] / (total / E)).toFixed(1)}× uniform`, W - 120, y0 + h / 2);
      }
    }
    pop.dataset.layers = String(L);
  }

  function drawWeights(chosen: [number, number][][]) {
    if (!r || token < 0) { weights.replaceChildren(); return; }
    const [s, p] = r.tokens[token];
    weights.replaceChildren(el('div', { class: 'muted small' }, `step ${s}, position ${p}: experts (weight)`),
      ...chosen.map((slots, l) => el('div', { class: 'small mono' }, `L${r!.layers[l]}: `,
        slots.length ? slots.map(([e, w]) => `${e} (${w.toFixed(3)})`).join(', ') : '— (not routed)')));
  }

  // Replays the run for the picked scope and prefetch (the server's replay; a bad pick, such as predicted on a run
  // without predictions, shows the server's message).
  async function loadCache() {
    cacheRequest?.abort();
    const request = cacheRequest = new AbortController();
    const scope = scopeSel.value, prefetch = prefetchSel.value;
    cacheInfo.textContent = 'replaying…';
    cacheInfo.classList.remove('error-text');
    try {
      cache = await ctx.api.expertCache({ scope, prefetch }, AbortSignal.any([request.signal, life.signal]));
      cacheInfo.textContent = `${cache.tokens} tokens · ${cache.scope} scope · prefetch ${cache.prefetch} · x: cache size as a share of the experts' bytes`;
    } catch (e) {
      if (request.signal.aborted || life.signal.aborted) return;
      cache = null;
      cacheInfo.textContent = String(e instanceof Error ? e.message : e);
      cacheInfo.classList.add('error-text');
    }
    cacheCanvas.dataset.scope = scope;
    cacheCanvas.dataset.prefetch = prefetch;
    drawCache();
  }

  // Hit rate (0–1) against the cache's share of the expert bytes on a log2 axis, a line and dots per policy.
  function drawCache() {
    const g = fitCanvas(cacheCanvas, CACHE_H);
    const W = cssWidth(cacheCanvas);
    g.clearRect(0, 0, W, CACHE_H);
    const curves = cache ? hitRateCurves(cache) : [];
    const shares = curves.flatMap((c) => c.points.map((p) => p.share)).filter((x) => x > 0);
    const x0 = Math.log2(Math.min(1, ...shares)), x1 = Math.log2(Math.max(...shares, Math.min(1, ...shares) * 2));
    const L = 40, R = 110, T = 8, B = 24, w = W - L - R, h = CACHE_H - T - B;
    const X = (share: number) => L + (share > 0 ? (Math.log2(share) - x0) / (x1 - x0) : 0) * w;
    const Y = (rate: number) => T + (1 - rate) * h;
    g.font = '10px system-ui, sans-serif';
    g.strokeStyle = '#2a313a';
    g.fillStyle = '#9aa3ad';
    g.textBaseline = 'middle';
    for (const r of [0, 0.25, 0.5, 0.75, 1]) {
      g.beginPath(); g.moveTo(L, Y(r)); g.lineTo(L + w, Y(r)); g.stroke();
      g.fillText(`${Math.round(r * 100)}%`, 4, Y(r));
    }
    g.textBaseline = 'top';
    const ticks = curves[0]?.points ?? [];
    for (const p of ticks) g.fillText(p.size, X(p.share) - 4, T + h + 6);
    if (ticks.length) g.fillText('cache size', L + w + 12, T + h + 6);
    let points = 0;
    curves.forEach((c, i) => {
      const color = POLICY_COLORS[c.policy] ?? '#d6dde6';
      g.strokeStyle = g.fillStyle = color;
      g.lineWidth = 1.5;
      g.beginPath();
      c.points.forEach((p, j) => { if (j) g.lineTo(X(p.share), Y(p.hitRate)); else g.moveTo(X(p.share), Y(p.hitRate)); });
      g.stroke();
      for (const p of c.points) { g.fillRect(X(p.share) - 2, Y(p.hitRate) - 2, 4, 4); points++; }
      g.fillText(c.policy, L + w + 12, T + i * 14);
    });
    g.lineWidth = 1;
    cacheCanvas.dataset.lines = String(curves.length);
    cacheCanvas.dataset.points = String(points);
    cacheCanvas.dataset.curves = JSON.stringify(Object.fromEntries(curves.map((c) => [c.policy, c.points.map((p) => p.hitRate)])));
  }

  function cellAt(ev: MouseEvent): { layer: number; expert: number; l: number } | null {
    if (!r) return null;
    const b = canvas.getBoundingClientRect();
    const l = Math.floor((ev.clientY - b.top) / ROW_H), e = Math.floor((ev.clientX - b.left - PAD_L) / cellW(b.width));
    if (l < 0 || l >= r.layers.length || e < 0 || e >= r.n_expert) return null;
    return { layer: r.layers[l], expert: e, l };
  }
  canvas.addEventListener('mousemove', (ev) => {
    const c = cellAt(ev);
    if (!c || !r) { hideTip('experts'); return; }
    const { counts } = expertCounts(r, ctx.store.sel.step, ctx.store.cumulative);
    showTip(ev.clientX, ev.clientY, `<b>layer ${c.layer}, expert ${c.expert}</b><br>` +
      `${counts[c.l * r.n_expert + c.expert]} picks ${ctx.store.cumulative ? 'up to' : 'in'} step ${ctx.store.sel.step}<br>click: its slabs in the file`, 'experts');
  });
  canvas.addEventListener('mouseleave', () => hideTip('experts'));
  canvas.addEventListener('click', (ev) => {
    const c = cellAt(ev);
    const cur = ctx.store.sel.expert;
    ctx.store.setExpert(c && !(cur && cur.layer === c.layer && cur.expert === c.expert) ? { layer: c.layer, expert: c.expert } : null);
  });
  tokenSel.addEventListener('change', () => { token = Number(tokenSel.value); draw(); });
  scopeSel.addEventListener('change', () => void loadCache());
  prefetchSel.addEventListener('change', () => void loadCache());
  cumulBox.addEventListener('change', () => ctx.store.setCumulative(cumulBox.checked));

  const redraw = whenVisible(root, draw, life.signal);
  ctx.store.on('step', () => { fillTokens(); redraw(); });
  ctx.store.on('cumulative', () => { cumulBox.checked = ctx.store.cumulative; redraw(); });
  ctx.store.on('expert', redraw);
  ctx.store.on('op', () => {
    const op = ctx.store.sel.op;
    opExperts = r && op?.op === 'MUL_MAT_ID' && op.layer !== null
      ? { layer: op.layer, experts: stepLayerExperts(r, op.step, op.layer) } : null;
    redraw();
  });
  window.addEventListener('resize', () => { draw(); drawCache(); }, { signal: life.signal });

  async function start() {
    r = await ctx.api.routing();
    cumulBox.checked = ctx.store.cumulative;
    info.textContent = `${r.layers.length} routed layers · ${r.n_expert} experts · top ${r.top_k} · ${r.tokens.length} tokens · ` +
      'white: the token\'s experts · cyan: the selected MUL_MAT_ID\'s · click: select an expert';
    fillTokens();
    draw();
    void loadCache();
  }
  return { element: root, start, dispose: () => life.dispose() };
}
