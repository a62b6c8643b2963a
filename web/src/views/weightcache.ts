// Weight cache (`run --weight-budget` runs only): over the timeline's window, the cache's occupancy against the budget
// line, every load as a mark (demand miss, prefetch, hit) and each step's stall time; hovering a load names it,
// the selected step's loads are listed below.
import type { WeightCache } from '../api';
import type { Ctx } from '../context';
import {
  formatBytes, formatNs, LOAD_COLORS, loadKind, loadMarks, markAt, occupancyLine, Scale, stepAtTime, type LoadKind,
  type LoadMark,
} from '../transforms';
import { cssWidth, debounce, el, esc, fitCanvas, hideTip, panel, showTip, whenVisible } from '../ui';
import { Lifetime, type View } from '../view';

const PAD_L = 64, OCC_T = 8, OCC_H = 80, ROW_H = 10, LOADS_T = OCC_T + OCC_H + 8, STALL_T = LOADS_T + 3 * ROW_H + 8;
const STALL_H = 36, H = STALL_T + STALL_H + 18;
const KINDS: LoadKind[] = ['miss', 'prefetch', 'hit'];
const LIMIT = 5000;  // loads fetched for the window (the server's page limit); more: zoom in to see each
const LIST_LIMIT = 500;  // loads listed for the selected step

export function weightCacheView(ctx: Ctx): View {
  const life = new Lifetime();
  const info = el('span', { class: 'muted', id: 'weight-cache-info' });
  const { root, body } = panel('weight-cache', 'Weight cache', info);
  const canvas = el('canvas', { id: 'weight-cache-canvas' });
  const legend = el('div', { class: 'legend' }, ...KINDS.map((k) =>
    el('span', { class: 'chip' }, el('i', { style: { background: LOAD_COLORS[k] } }), k === 'miss' ? 'demand miss' : k)),
  el('span', { class: 'muted' }, ' · occupancy vs budget (dashed) · stall per step · follows the timeline window; click: step'));
  const list = el('div', { id: 'weight-cache-loads', class: 'wc-loads' });
  body.append(el('div', { class: 'canvas-wrap' }, canvas), legend, list);
  let data: WeightCache | null = null;
  let marks: LoadMark[] = [];
  let abort: AbortController | null = null, listAbort: AbortController | null = null;
  const stepStarts = ctx.stepTimes.map((t) => ({ start_ns: t[0] }));

  async function load() {
    abort?.abort();
    abort = new AbortController();
    const [t0, t1] = ctx.timeWindow;
    try {
      data = await ctx.api.weightCache({ t0: Math.floor(t0), t1: Math.ceil(t1),
        px: Math.max(50, Math.round(cssWidth(canvas) - PAD_L)), limit: LIMIT }, abort.signal);
      draw();
    } catch (e) { if ((e as Error).name !== 'AbortError') info.textContent = `error: ${(e as Error).message}`; }
  }

  function draw() {
    const g = fitCanvas(canvas, H);
    const W = cssWidth(canvas);
    g.clearRect(0, 0, W, H);
    if (!data) return;
    const d = data;
    const sx = new Scale(d.t0, d.t1, PAD_L, W);
    g.font = '10px system-ui, sans-serif';
    g.textBaseline = 'top';
    for (const [y, h] of [[OCC_T, OCC_H], [LOADS_T, 3 * ROW_H], [STALL_T, STALL_H]]) {
      g.fillStyle = '#14181e';
      g.fillRect(PAD_L, y, W - PAD_L, h);
    }
    // occupancy: the highest resident bytes per bucket, against the budget
    const occ = occupancyLine(d.occupancy, d.budget_bytes, OCC_T + OCC_H, OCC_T + 4);
    const bw = (W - PAD_L) / d.px;
    g.strokeStyle = '#f28e2b';
    g.fillStyle = '#f28e2b40';
    g.lineWidth = 1.5;
    g.beginPath();
    g.moveTo(PAD_L, OCC_T + OCC_H);
    occ.ys.forEach((y, i) => { g.lineTo(PAD_L + i * bw, y); g.lineTo(PAD_L + (i + 1) * bw, y); });
    g.lineTo(W, OCC_T + OCC_H);
    g.fill();
    g.stroke();
    g.strokeStyle = '#ffffff';
    g.setLineDash([4, 3]);
    g.beginPath(); g.moveTo(PAD_L, occ.budgetY); g.lineTo(W, occ.budgetY); g.stroke();
    g.setLineDash([]);
    g.fillStyle = '#f28e2b';
    g.fillText('resident', 2, OCC_T);
    g.fillStyle = '#9aa3ad';
    g.fillText(`budget ${formatBytes(d.budget_bytes)}`, 2, OCC_T + 12);
    // loads: a row per kind
    marks = loadMarks(d.loads, sx, PAD_L, W);
    KINDS.forEach((k, r) => {
      g.fillStyle = LOAD_COLORS[k];
      g.fillText(k, 2, LOADS_T + r * ROW_H);
    });
    for (const m of marks) {
      g.fillStyle = LOAD_COLORS[m.kind];
      g.fillRect(m.x0, LOADS_T + m.row * ROW_H + 1, m.x1 - m.x0, ROW_H - 2);
    }
    // stall per step, over the step's time
    const maxStall = Math.max(1, ...d.steps.map((s) => s.stall_ns));
    g.fillStyle = '#9aa3ad';
    g.fillText('stall', 2, STALL_T);
    g.fillText(formatNs(maxStall), 2, STALL_T + 12);
    g.fillStyle = LOAD_COLORS.miss;
    d.steps.forEach((s) => {
      const t = ctx.stepTimes[s.step];
      if (!t || !s.stall_ns || t[1] < d.t0 || t[0] > d.t1) return;
      const x0 = Math.max(PAD_L, sx.px(t[0])), x1 = Math.min(W, Math.max(x0 + 1, sx.px(t[1])));
      const h = (s.stall_ns / maxStall) * (STALL_H - 2);
      g.fillRect(x0, STALL_T + STALL_H - h, Math.max(1, x1 - x0 - 1), h);
    });
    // the selected step
    const st = ctx.stepTimes[ctx.store.sel.step];
    if (st) { g.fillStyle = 'rgba(61,242,255,0.12)'; g.fillRect(Math.max(PAD_L, sx.px(st[0])), OCC_T, Math.max(1, sx.px(st[1]) - Math.max(PAD_L, sx.px(st[0]))), STALL_T + STALL_H - OCC_T); }
    g.fillStyle = '#9aa3ad';
    g.fillText(formatNs(d.t0), PAD_L, H - 14);
    const end = formatNs(d.t1);
    g.fillText(end, W - g.measureText(end).width - 2, H - 14);
    const miss = marks.find((m) => m.kind === 'miss');  // where the e2e test hovers a load
    Object.assign(canvas.dataset, { firstMiss: miss ? `${((miss.x0 + miss.x1) / 2).toFixed(1)},${LOADS_T + ROW_H / 2}` : '',
      marks: String(marks.length), total: String(d.total), step: String(ctx.store.sel.step),
      budgetY: occ.budgetY.toFixed(2), occupancyTopY: Math.min(...occ.ys, OCC_T + OCC_H).toFixed(2), over: occ.over ? '1' : '0' });
    const t = d.totals;
    const partial = d.loads.length < d.total ? ` · ${d.loads.length} of ${d.total.toLocaleString()} loads in view drawn (zoom in)` : '';
    info.textContent = `${d.policy} · budget ${d.budget} = ${formatBytes(d.budget_bytes)}${d.direct_io ? ' · direct I/O' : ''} · ` +
      `${t.hits.toLocaleString()} hits, ${t.misses.toLocaleString()} misses, ${t.prefetches.toLocaleString()} prefetches of ` +
      `${t.accesses.toLocaleString()} · ${formatBytes(t.bytes_read)} read at ${formatBytes(t.read_bytes_per_s)}/s · ` +
      `stall ${formatNs(t.stall_ns)} · peak ${formatBytes(t.peak_resident_bytes)}${partial}`;
  }

  // The selected step's loads, in access order.
  async function showStep() {
    listAbort?.abort();
    listAbort = new AbortController();
    const step = ctx.store.sel.step;
    try {
      const r = await ctx.api.weightCache({ step, px: 1, limit: LIST_LIMIT }, listAbort.signal);
      const s = r.steps[step];
      const head = el('div', { class: 'muted' }, `step ${step}: ${r.total} loads · ${s?.hits ?? 0} hits, ${s?.misses ?? 0} misses, ` +
        `${s?.prefetches ?? 0} prefetches · ${formatBytes(s?.bytes_read ?? 0)} read · stall ${formatNs(s?.stall_ns ?? 0)}` +
        (r.loads.length < r.total ? ` (first ${r.loads.length} listed)` : ''));
      const rows = r.loads.map((l) => {
        const kind = loadKind(l[10], l[11]);
        return el('div', { class: 'wrow', 'data-kind': kind }, el('i', { style: { background: LOAD_COLORS[kind] } }),
          el('span', { class: 'mono' }, `${l[3]}${l[4] >= 0 ? ` [expert ${l[4]}]` : ''}`),
          el('span', { class: 'muted' }, `${formatBytes(l[6])} · ${kind} · wait ${formatNs(l[9])} · node ${l[2]}`));
      });
      list.replaceChildren(head, ...rows);
      list.dataset.step = String(step);
      list.dataset.rows = String(rows.length);
    } catch (e) { if ((e as Error).name !== 'AbortError') list.textContent = `error: ${(e as Error).message}`; }
  }

  canvas.addEventListener('mousemove', (ev) => {
    if (!data) return;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    if (x < PAD_L) { hideTip('weight-cache'); return; }
    const d = data;
    if (y >= LOADS_T && y < LOADS_T + 3 * ROW_H) {
      const k = markAt(marks, x, Math.floor((y - LOADS_T) / ROW_H));
      if (k < 0) { hideTip('weight-cache'); return; }
      const l = d.loads[marks[k].load];
      showTip(ev.clientX, ev.clientY, `<b>${esc(l[3])}</b>${l[4] >= 0 ? ` expert ${l[4]}` : ''}<br>${marks[k].kind === 'miss' ? 'demand miss' : marks[k].kind} · ` +
        `${formatBytes(l[6])} at byte ${l[5].toLocaleString()}<br>wait ${formatNs(l[9])} · read ${formatNs(l[7])} → ${formatNs(l[8])}<br>` +
        `step ${l[1]} node ${l[2]} · resident after ${formatBytes(l[12])}`, 'weight-cache');
      return;
    }
    const sx = new Scale(d.t0, d.t1, PAD_L, r.width);
    const t = sx.inv(x);
    const step = stepAtTime(stepStarts, t);
    const bucket = Math.min(d.px - 1, Math.max(0, Math.floor(((x - PAD_L) / (r.width - PAD_L)) * d.px)));
    const s = d.steps[step];
    showTip(ev.clientX, ev.clientY, `<b>${formatNs(t)}</b> · step ${step}<br>resident up to ${formatBytes(d.occupancy[bucket] ?? 0)} of ` +
      `${formatBytes(d.budget_bytes)}<br>step stall ${formatNs(s?.stall_ns ?? 0)} · ${s?.misses ?? 0} misses`, 'weight-cache');
  });
  canvas.addEventListener('mouseleave', () => { hideTip('weight-cache'); });
  canvas.addEventListener('click', (ev) => {
    if (!data) return;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    if (x < PAD_L) return;
    ctx.store.setStep(stepAtTime(stepStarts, new Scale(data.t0, data.t1, PAD_L, r.width).inv(x)));
  });
  const loadSoon = debounce(load, 60);
  ctx.onTimeWindow.add(whenVisible(root, loadSoon, life.signal));  // off screen: fetched when scrolled into view
  ctx.store.on('step', whenVisible(root, () => { draw(); void showStep(); }, life.signal));
  window.addEventListener('resize', debounce(load, 150), { signal: life.signal });
  life.add(() => { abort?.abort(); listAbort?.abort(); });
  return { element: root, start: () => Promise.all([load(), showStep()]).then(() => {}), dispose: () => life.dispose() };
}
