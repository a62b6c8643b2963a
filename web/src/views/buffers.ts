// Buffers: live bytes over time per pool (following the timeline's window), the peak marked, events on hover.
import type { BuffersResp } from '../api';
import type { Ctx } from '../context';
import { formatBytes, formatNs, peakOf, Scale } from '../transforms';
import { cssWidth, debounce, el, esc, fitCanvas, hideTip, panel, showTip, whenVisible } from '../ui';
import { Lifetime, type View } from '../view';

const H = 170, PAD_L = 64, PAD_T = 10, PAD_B = 18;
const POOL_COLORS: Record<string, string> = { KV_CACHE: '#e15759', ACTIVATION: '#4e79a7', SCRATCH: '#edc948', INPUT: '#59a14f' };

export function buffersView(ctx: Ctx): View {
  const life = new Lifetime();
  const info = el('span', { class: 'muted', id: 'buffers-info' });
  const { root, body } = panel('buffers', 'Buffers', info);
  const canvas = el('canvas', { id: 'buffers-canvas' });
  const legend = el('div', { class: 'legend' });
  body.append(el('div', { class: 'canvas-wrap' }, canvas), legend);
  let data: BuffersResp | null = null;
  let abort: AbortController | null = null;

  async function load() {
    abort?.abort();
    abort = new AbortController();
    const [t0, t1] = ctx.timeWindow;
    try {
      data = await ctx.api.buffers({ t0: Math.floor(t0), t1: Math.ceil(t1), px: Math.max(50, Math.round(cssWidth(canvas) - PAD_L)), max_events: 0 }, abort.signal);
      draw();
    } catch (e) { if ((e as Error).name !== 'AbortError') info.textContent = `error: ${(e as Error).message}`; }
  }

  function draw() {
    const g = fitCanvas(canvas, H);
    const W = cssWidth(canvas);
    g.clearRect(0, 0, W, H);
    if (!data) return;
    // one lane per pool, each on its own scale (the KV cache would flatten the activations otherwise)
    const lanes = data.pools.length || 1;
    const laneH = (H - PAD_T - PAD_B) / lanes;
    const n = data.px;
    const bw = (W - PAD_L) / n;
    let drawn = 0;
    g.font = '10px system-ui, sans-serif';
    data.pools.forEach((pool, li) => {
      const v = data!.live_max[pool];
      const max = Math.max(1, ...v);
      const top = PAD_T + li * laneH;
      const sy = new Scale(0, max * 1.15, top + laneH - 2, top + 2);
      g.fillStyle = '#14181e';
      g.fillRect(PAD_L, top, W - PAD_L, laneH - 3);
      g.fillStyle = POOL_COLORS[pool] ?? '#aaa';
      g.textBaseline = 'top';
      g.fillText(pool, 2, top + 2);
      g.fillStyle = '#9aa3ad';
      g.fillText(formatBytes(max), 2, top + 14);
      g.strokeStyle = POOL_COLORS[pool] ?? '#aaa';
      g.fillStyle = (POOL_COLORS[pool] ?? '#aaaaaa') + '40';
      g.lineWidth = 1.5;
      g.beginPath();
      g.moveTo(PAD_L, sy.px(0));
      v.forEach((y, i) => { const x = PAD_L + i * bw; g.lineTo(x, sy.px(y)); g.lineTo(x + bw, sy.px(y)); });
      g.lineTo(W, sy.px(0));
      g.fill();
      g.stroke();
      drawn += v.length;
      const pk = peakOf(v);
      if (pk.index >= 0) {
        const x = PAD_L + (pk.index + 0.5) * bw, y = sy.px(pk.value);
        g.fillStyle = '#ffffff';
        g.beginPath(); g.arc(x, y, 3.5, 0, Math.PI * 2); g.fill();
        g.fillStyle = '#d6dde6';
        g.textBaseline = 'top';
        g.fillText(`peak ${formatBytes(pk.value)}`, Math.min(W - 90, x + 6), Math.max(top + 2, y - 2));
      }
    });
    // the run's overall peak (all pools) if it lies in the window
    const sx = new Scale(data.t0, data.t1, PAD_L, W);
    if (data.peak.t_ns >= data.t0 && data.peak.t_ns <= data.t1) {
      g.strokeStyle = '#ffffff';
      g.setLineDash([3, 3]);
      g.beginPath(); g.moveTo(sx.px(data.peak.t_ns), PAD_T); g.lineTo(sx.px(data.peak.t_ns), H - PAD_B); g.stroke();
      g.setLineDash([]);
    }
    const st = ctx.stepTimes[ctx.store.sel.step];
    if (st) { g.fillStyle = 'rgba(61,242,255,0.12)'; g.fillRect(sx.px(st[0]), PAD_T, Math.max(1, sx.px(st[1]) - sx.px(st[0])), H - PAD_T - PAD_B); }
    g.fillStyle = '#9aa3ad';
    g.textBaseline = 'top';
    g.fillText(formatNs(data.t0), PAD_L, H - PAD_B + 4);
    const end = formatNs(data.t1);
    g.fillText(end, W - g.measureText(end).width - 2, H - PAD_B + 4);
    canvas.dataset.drawn = String(drawn);
    canvas.dataset.step = String(ctx.store.sel.step);
    info.textContent = `run peak ${formatBytes(data.peak.bytes)} at ${formatNs(data.peak.t_ns)} (dashed line) · ${data.event_count.toLocaleString()} events in view`;
    legend.replaceChildren(...data.pools.map((p) => el('span', { class: 'chip' }, el('i', { style: { background: POOL_COLORS[p] ?? '#aaa' } }), p)),
      el('span', { class: 'muted' }, ' · follows the timeline window; hover: events'));
  }

  const hoverEvents = debounce(async (x: number, y: number, t: number, tw: number) => {
    if (!data) return;
    const r = await ctx.api.buffers({ t0: Math.max(0, Math.floor(t - tw)), t1: Math.ceil(t + tw) + 1, px: 1, max_events: 8 });
    const rows = r.events.map((e) => `${e[2] === 'a' ? '+' : '−'} ${esc(e[7])} ${formatBytes(e[6])} <span class="muted">${esc(e[3])}#${e[4]}@${e[5]} · step ${e[1]}</span>`);
    const vals = data.pools.map((p) => `${esc(p)} ${formatBytes(r.live_max[p]?.[0] ?? 0)}`).join(' · ');
    showTip(x, y, `<b>${formatNs(t)}</b><br>${vals}<br>${rows.length ? rows.join('<br>') : `${r.event_count} events (zoom in to list them)`}`, 'buffers');
  }, 40);
  canvas.addEventListener('mousemove', (ev) => {
    if (!data) return;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    if (x < PAD_L) { hideTip('buffers'); return; }
    const sx = new Scale(data.t0, data.t1, PAD_L, r.width);
    hoverEvents(ev.clientX, ev.clientY, sx.inv(x), (sx.inv(x + 2) - sx.inv(x)));
  });
  canvas.addEventListener('mouseleave', () => { hideTip('buffers'); });
  const loadSoon = debounce(load, 60);
  ctx.onTimeWindow.add(whenVisible(root, loadSoon, life.signal));  // off screen: fetched when scrolled into view
  ctx.store.on('step', whenVisible(root, draw, life.signal));
  window.addEventListener('resize', debounce(load, 150), { signal: life.signal });
  life.add(() => abort?.abort());
  return { element: root, start: load, dispose: () => life.dispose() };
}
