// Timeline: every worker thread's share of every op over time, colored by op kind or layer, with step markers.
import type { Spans } from '../api';
import type { Ctx } from '../context';
import { formatNs, layerColor, OP_COLORS, OP_KINDS, Scale, stepAtTime } from '../transforms';
import { cssWidth, debounce, el, esc, fitCanvas, hideTip, panel, rafThrottle, showTip, leadingDebounce } from '../ui';
import { Lifetime, type View } from '../view';

const LANE = 22, TOP = 18, BOTTOM = 6;

export function timelineView(ctx: Ctx): View {
  const life = new Lifetime();
  const total: [number, number] = [0, Math.max(1, ctx.info.derived.t_end_ns)];
  let data: Spans | null = null;
  let abort: AbortController | null = null;
  const colorSel = el('select', { id: 'timeline-color', 'aria-label': 'color by' },
    el('option', { value: 'op' }, 'color by op kind'), el('option', { value: 'layer' }, 'color by layer'));
  const fit = el('button', { onclick: () => setWindow(total, true) }, 'whole run');
  const stepBtn = el('button', { onclick: () => zoomToStep(ctx.store.sel.step) }, 'zoom to step');
  const info = el('span', { class: 'muted' });
  const { root, body } = panel('timeline', 'Timeline', colorSel, fit, stepBtn, info);
  const canvas = el('canvas', { id: 'timeline-canvas' });
  const legend = el('div', { class: 'legend' });
  body.append(el('div', { class: 'canvas-wrap' }, canvas), legend);
  const threads = Math.max(1, ctx.info.derived.threads);
  const height = TOP + threads * LANE + BOTTOM;

  // `now`: a single jump (button, selection) fetches at once; wheel and drag moves are coalesced first
  function setWindow(w: [number, number], now = false) {
    ctx.timeWindow = [Math.max(total[0], w[0]), Math.min(total[1], Math.max(w[0] + 50, w[1]))];
    redraw();
    if (now) load(); else loadSoon();
    for (const f of ctx.onTimeWindow) f();
  }
  function zoomToStep(s: number) {
    const t = ctx.stepTimes[s];
    if (!t) return;
    const pad = (t[1] - t[0]) * 0.03;
    setWindow([t[0] - pad, t[1] + pad], true);
  }

  // Answers by window: the whole run (aggregating every span takes the server 40-100 ms) and the steps zoomed into
  // come back often; the run does not change while served.
  const cache = new Map<string, Spans>();
  const CACHE_SIZE = 32;

  async function load() {
    abort?.abort();
    const [t0, t1] = ctx.timeWindow;
    const q = { t0: Math.floor(t0), t1: Math.ceil(t1), px: Math.round(cssWidth(canvas) || 1000), limit: 30000 };
    const key = `${q.t0}|${q.t1}|${q.px}`;
    const hit = cache.get(key);
    if (hit) { data = hit; draw(); return; }
    abort = new AbortController();
    try {
      data = await ctx.api.spans(q, abort.signal);
      cache.set(key, data);
      if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
      draw();
    } catch (e) {
      if ((e as Error).name !== 'AbortError') info.textContent = `error: ${(e as Error).message}`;
    }
  }
  const loadSoon = leadingDebounce(load, 50);

  function color(op: number, layer: number): string {
    return colorSel.value === 'op' ? OP_COLORS[OP_KINDS[op]] ?? '#888' : layerColor(layer < 0 ? null : layer, ctx.nLayers);
  }

  function draw() {
    const g = fitCanvas(canvas, height);
    const W = cssWidth(canvas);
    const [t0, t1] = ctx.timeWindow;
    const sx = new Scale(t0, t1, 0, W);
    g.clearRect(0, 0, W, height);
    g.fillStyle = '#14181e';
    g.fillRect(0, TOP, W, threads * LANE);
    // steps: alternating bands, the selected one highlighted, labels when there is room
    g.font = '10px system-ui, sans-serif';
    g.textBaseline = 'top';
    let lastLabel = -1e9;
    ctx.stepTimes.forEach(([a, b], s) => {
      if (b < t0 || a > t1) return;
      const xa = sx.px(a), xb = sx.px(b);
      if (s === ctx.store.sel.step) { g.fillStyle = 'rgba(61,242,255,0.12)'; g.fillRect(xa, TOP, xb - xa, threads * LANE); }
      g.fillStyle = '#4a5563';
      g.fillRect(xa, 0, 1, TOP + threads * LANE);
      if (xa - lastLabel > 34) { g.fillStyle = '#9aa3ad'; g.fillText(`s${s}`, xa + 2, 3); lastLabel = xa; }
    });
    let drawn = 0;
    if (data?.mode === 'spans') {
      for (const [th, a, b, , , op, layer] of data.spans!) {
        const x0 = sx.px(a), x1 = sx.px(b);
        g.fillStyle = color(op, layer);
        g.fillRect(x0, TOP + th * LANE + 2, Math.max(1, x1 - x0), LANE - 4);
        drawn++;
      }
    } else if (data?.mode === 'buckets') {
      const bw = W / (data.px ?? 1000);
      for (const [th, bucket, busy, op, layer] of data.buckets!) {
        g.globalAlpha = 0.25 + 0.75 * busy;
        g.fillStyle = color(op, layer);
        const h = (LANE - 4) * Math.max(0.15, busy);
        g.fillRect(bucket * bw, TOP + th * LANE + LANE - 2 - h, Math.max(1, bw), h);
        drawn++;
      }
      g.globalAlpha = 1;
    }
    // the selected op's spans
    const op = ctx.store.sel.op;
    if (op && data?.mode === 'spans') {
      g.strokeStyle = '#ffffff';
      g.lineWidth = 2;
      for (const [th, a, b, , , , , i] of data.spans!)
        if (i === op.i) g.strokeRect(sx.px(a) - 1, TOP + th * LANE + 1, Math.max(3, sx.px(b) - sx.px(a) + 2), LANE - 2);
    }
    for (let th = 0; th < threads; th++) { g.fillStyle = '#d6dde6'; g.fillText(`T${th}`, 3, TOP + th * LANE + 6); }
    canvas.dataset.drawn = String(drawn);
    canvas.dataset.mode = data?.mode ?? '';
    canvas.dataset.window = data ? `${data.t0}-${data.t1}` : '';  // the window of the spans drawn (tests)
    info.textContent = `${formatNs(t0)} – ${formatNs(t1)} · ${data?.count ?? 0} spans${data?.mode === 'buckets' ? ' (aggregated per pixel: zoom in for single ops)' : ''}`;
  }
  const redraw = rafThrottle(draw);

  function spanAt(ev: MouseEvent): number[] | null {
    if (data?.mode !== 'spans') return null;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const th = Math.floor((y - TOP) / LANE);
    const sx = new Scale(ctx.timeWindow[0], ctx.timeWindow[1], 0, r.width);
    const t = sx.inv(x), tol = sx.inv(x + 3) - t;
    let best: number[] | null = null;
    for (const s of data.spans!) if (s[0] === th && s[1] - tol <= t && s[2] + tol >= t) best = s;
    return best;
  }

  let drag: { x: number; w: [number, number]; moved: boolean } | null = null;
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    const [t0, t1] = ctx.timeWindow;
    const anchor = t0 + ((ev.clientX - r.left) / r.width) * (t1 - t0);
    const f = Math.pow(1.0015, ev.deltaY);
    setWindow([anchor - (anchor - t0) * f, anchor + (t1 - anchor) * f]);
  }, { passive: false });
  canvas.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX, w: [...ctx.timeWindow], moved: false }; });
  window.addEventListener('mouseup', async (ev) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    if (d.moved || ev.target !== canvas) return;
    const s = spanAt(ev);
    if (s) { ctx.store.setOp(await ctx.opByIndex(s[7])); return; }
    const r = canvas.getBoundingClientRect();
    const t = ctx.timeWindow[0] + ((ev.clientX - r.left) / r.width) * (ctx.timeWindow[1] - ctx.timeWindow[0]);
    ctx.store.setStep(stepAtTime(ctx.stepTimes.map(([a]) => ({ start_ns: a })), t));
  }, { signal: life.signal });
  canvas.addEventListener('mousemove', (ev) => {
    if (drag) {
      const W = canvas.getBoundingClientRect().width;
      const dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      const dt = (-dx / W) * (drag.w[1] - drag.w[0]);
      const span = drag.w[1] - drag.w[0];
      const a = Math.max(total[0], Math.min(total[1] - span, drag.w[0] + dt));
      setWindow([a, a + span]);
      return;
    }
    const s = spanAt(ev);
    if (!s) { hideTip('timeline'); return; }
    const [th, a, b, step, node, op, layer] = s;
    showTip(ev.clientX, ev.clientY, `<b>${esc(OP_KINDS[op] ?? '?')}</b> step ${step} node ${node}<br>layer ${layer < 0 ? '—' : layer} · thread ${th}` +
      `<br>${formatNs(b - a)} (${formatNs(a)} – ${formatNs(b)})<br><span class="muted">click: select</span>`, 'timeline');
  });
  canvas.addEventListener('mouseleave', () => hideTip('timeline'));
  colorSel.addEventListener('change', () => { drawLegend(); draw(); });

  function drawLegend() {
    legend.replaceChildren();
    if (colorSel.value === 'op') {
      for (const k of OP_KINDS) if (k !== 'VIEW' && k !== 'PERMUTE')
        legend.append(el('span', { class: 'chip' }, el('i', { style: { background: OP_COLORS[k] } }), k === 'RESHAPE' ? 'views' : k));
    } else {
      const n = ctx.nLayers, st = Math.max(1, Math.ceil(n / 12));
      for (let l = 0; l < n; l += st) legend.append(el('span', { class: 'chip' }, el('i', { style: { background: layerColor(l, n) } }), `L${l}`));
      legend.append(el('span', { class: 'chip' }, el('i', { style: { background: layerColor(null, n) } }), 'no layer'));
    }
    legend.append(el('span', { class: 'muted' }, ' · wheel: zoom, drag: pan, click: select op / step'));
  }
  drawLegend();

  ctx.store.on('step', () => {
    const t = ctx.stepTimes[ctx.store.sel.step];
    const [t0, t1] = ctx.timeWindow;
    if (t && (t[0] > t1 || t[1] < t0)) { const span = t1 - t0; setWindow([t[0] - span * 0.1, t[0] + span * 0.9], true); } else redraw();
  });
  ctx.store.on('op', () => {
    const op = ctx.store.sel.op;
    if (op) {
      const [t0, t1] = ctx.timeWindow;
      const dur = op.end_ns - op.start_ns;
      if (op.start_ns < t0 || op.end_ns > t1 || data?.mode !== 'spans') {
        const st = ctx.stepTimes[op.step];
        if (st) setWindow([st[0], st[1]], true); else setWindow([op.start_ns - dur * 20, op.end_ns + dur * 20], true);
        return;
      }
    }
    redraw();
  });
  window.addEventListener('resize', debounce(load, 150), { signal: life.signal });
  life.add(() => abort?.abort());
  return { element: root, start: load, dispose: () => life.dispose() };
}
