// Summary: time and bytes per step, time per layer and per op kind, hottest tensors.
import type { Summary } from '../api';
import type { Ctx } from '../context';
import { formatBytes, formatNs, layerColor, OP_COLORS, Scale } from '../transforms';
import { CachedLayer, cssWidth, el, fitCanvas, hideTip, panel, showTip, whenVisible } from '../ui';
import { Lifetime, type View } from '../view';

const H = 150, PAD_L = 56;
const maxOpNs = (st: Summary['steps']) => Math.max(1, ...st.map((s) => s.op_ns ?? 0));

export function summaryView(ctx: Ctx, getSummary: () => Promise<Summary>): View {
  const life = new Lifetime();
  const { root, body } = panel('summary', 'Summary');
  const canvas = el('canvas', { id: 'summary-canvas' });
  const grid = el('div', { class: 'summary-grid' });
  body.append(el('div', { class: 'muted small' }, 'per step: op time (bars) · bytes read from the file (blue) and from runtime buffers (red)'),
    el('div', { class: 'canvas-wrap' }, canvas), grid);
  let sum: Summary | null = null;

  // Everything but the selected step's bar is drawn once per size; a step change adds that bar.
  const base = new CachedLayer();

  function draw() {
    if (!sum) return;
    const g = fitCanvas(canvas, H);
    const W = cssWidth(canvas);
    const data = sum;
    base.paint(canvas, g, W, H, (bg) => drawBase(bg, W, data));
    const st = sum.steps, i = ctx.store.sel.step, s = st[i];
    if (s) {
      const sx = new Scale(0, st.length, PAD_L, W), sy = new Scale(0, maxOpNs(st), H - 4, 6);
      const bw = (W - PAD_L) / st.length;
      g.fillStyle = '#3df2ff';
      g.fillRect(sx.px(i), sy.px(s.op_ns ?? 0), Math.max(1, bw - (bw > 3 ? 1 : 0)), H - 4 - sy.px(s.op_ns ?? 0));
    }
    canvas.dataset.steps = String(st.length);
    canvas.dataset.step = String(i);
  }

  function drawBase(g: CanvasRenderingContext2D, W: number, sum: Summary) {
    const st = sum.steps;
    const sx = new Scale(0, st.length, PAD_L, W);
    const maxT = maxOpNs(st);
    const maxB = Math.max(1, ...st.map((s) => Math.max(s.file_bytes ?? 0, s.buffer_bytes ?? 0)));
    const sy = new Scale(0, maxT, H - 4, 6), sb = new Scale(0, maxB, H - 4, 6);
    g.fillStyle = '#14181e';
    g.fillRect(PAD_L, 0, W - PAD_L, H);
    const bw = (W - PAD_L) / st.length;
    st.forEach((s, i) => {
      g.fillStyle = s.phase === 'PROMPT' ? '#8e7cc3' : '#56606e';
      g.fillRect(sx.px(i), sy.px(s.op_ns ?? 0), Math.max(1, bw - (bw > 3 ? 1 : 0)), H - 4 - sy.px(s.op_ns ?? 0));
    });
    for (const [key, color] of [['file_bytes', '#4e79a7'], ['buffer_bytes', '#e15759']] as const) {
      g.strokeStyle = color;
      g.lineWidth = 1.5;
      g.beginPath();
      st.forEach((s, i) => (i ? g.lineTo(sx.px(i + 0.5), sb.px(s[key] ?? 0)) : g.moveTo(sx.px(i + 0.5), sb.px(s[key] ?? 0))));
      g.stroke();
    }
    g.font = '10px system-ui, sans-serif';
    g.fillStyle = '#9aa3ad';
    g.textBaseline = 'top';
    g.fillText(formatNs(maxT), 2, 2);
    g.fillStyle = '#4e79a7';
    g.fillText(formatBytes(maxB), 2, 16);
  }

  function tables() {
    if (!sum) return;
    const maxL = Math.max(1, ...sum.layers.map((l) => l.ns));
    const layers = el('div', { class: 'card' }, el('h3', {}, 'time per layer'),
      ...sum.layers.map((l) => el('div', { class: 'hbar' }, el('span', { class: 'lbl' }, l.layer === null ? 'no layer' : `L${l.layer}`),
        el('span', { class: 'fill', style: { width: `${(l.ns / maxL) * 100}%`, background: layerColor(l.layer, ctx.nLayers) } }),
        el('span', { class: 'val' }, formatNs(l.ns)))));
    const totalNs = sum.op_kinds.reduce((a, k) => a + k.ns, 0) || 1;
    const kinds = el('div', { class: 'card' }, el('h3', {}, 'time per op kind'),
      el('table', {}, el('tr', {}, el('th', {}, 'op'), el('th', {}, 'count'), el('th', {}, 'time'), el('th', {}, 'share')),
        ...[...sum.op_kinds].sort((a, b) => b.ns - a.ns).map((k) => el('tr', {},
          el('td', { style: { color: OP_COLORS[k.op] } }, k.op), el('td', {}, k.count.toLocaleString()), el('td', {}, formatNs(k.ns)),
          el('td', {}, `${((k.ns / totalNs) * 100).toFixed(1)}%`)))));
    const hot = el('div', { class: 'card' }, el('h3', {}, 'hottest tensors (bytes read)'),
      el('table', { id: 'hottest' }, el('tr', {}, el('th', {}, 'tensor'), el('th', {}, 'reads'), el('th', {}, 'bytes')),
        ...sum.hottest_tensors.slice(0, 12).map((t) => el('tr', { class: 'clickable', onclick: () => {
          const m = ctx.tensorByName.get(t.name);
          ctx.store.setTensor(t.name, m ? [m.offset_start, m.offset_end] : null);
        } }, el('td', {}, t.name), el('td', {}, t.reads.toLocaleString()), el('td', {}, formatBytes(t.bytes))))));
    const fileTotal = sum.steps.reduce((a, s) => a + (s.file_bytes ?? 0), 0);
    const bufTotal = sum.steps.reduce((a, s) => a + (s.buffer_bytes ?? 0), 0);
    const totals = el('div', { class: 'card' }, el('h3', {}, 'totals'),
      el('div', {}, `${sum.steps.length} steps · ${ctx.info.derived.ops.toLocaleString()} ops · ${ctx.info.derived.threads} threads`),
      el('div', {}, `read from the file: ${formatBytes(fileTotal)}`), el('div', {}, `read from buffers: ${formatBytes(bufTotal)}`),
      el('div', {}, `peak runtime memory: ${formatBytes(sum.peak_buffer_bytes)}`),
      el('div', { class: 'muted' }, `model ${ctx.map.file} (${formatBytes(ctx.map.file_size)})`));
    grid.replaceChildren(totals, layers, kinds, hot, threadsCard(sum));
  }

  // Each thread's median generation step (else the prompt's): in node shares (bar) and outside them, and how the
  // outside time is cut up: many sub-microsecond gaps are idle time too short to hold other work.
  function threadsCard(sum: Summary): HTMLElement {
    const card = el('div', { class: 'card wide', id: 'threads' }, el('h3', {}, 'threads: where each one is during the median step'));
    const phases = sum.thread_time?.phases ?? {};
    const name = phases.GENERATE ? 'GENERATE' : phases.PROMPT ? 'PROMPT' : null;
    if (!name) { card.append(el('div', { class: 'muted' }, 'no worker spans in this trace')); return card; }
    const p = phases[name];
    const stepNs = Math.max(1, p.step_ns_median);
    card.append(el('div', { class: 'muted small' },
      `${name.toLowerCase()}: ${p.steps} steps, median ${formatNs(p.step_ns_median)}, then ${formatNs(p.after_step_ns_median)} to the next step (sampling, no nodes); bar: in node shares (blue) and outside them (grey)`),
      el('table', {}, el('tr', {}, el('th', {}, 'thread'), el('th', {}, 'step'), el('th', {}, 'in nodes'), el('th', {}, 'outside'),
        el('th', {}, 'gaps a step'), el('th', {}, 'gap median'), el('th', {}, 'gap p90'), el('th', {}, 'outside in gaps < 1 µs')),
      ...p.threads.map((t) => el('tr', { class: 'thread-row' },
        el('td', {}, `${t.thread}`),
        el('td', {}, el('span', { class: 'stepbar' },
          el('span', { class: 'busy', style: { width: `${Math.min(100, (t.busy_ns_median_step / stepNs) * 100)}%` } }))),
        el('td', {}, formatNs(t.busy_ns_median_step)), el('td', {}, formatNs(t.outside_ns_median_step)),
        el('td', {}, t.gaps_median_step.toFixed(0)), el('td', {}, formatNs(t.gap_median_ns)), el('td', {}, formatNs(t.gap_p90_ns)),
        el('td', {}, `${(t.outside_share_in_short_gaps * 100).toFixed(0)}%`)))));
    return card;
  }

  canvas.addEventListener('mousemove', (ev) => {
    if (!sum) return;
    const r = canvas.getBoundingClientRect();
    const i = Math.floor(new Scale(0, sum.steps.length, PAD_L, r.width).inv(ev.clientX - r.left));
    const s = sum.steps[i];
    if (!s) { hideTip('summary'); return; }
    showTip(ev.clientX, ev.clientY, `<b>step ${i}</b> ${s.phase ?? ''}<br>${s.ops} ops, ${formatNs(s.op_ns ?? 0)}<br>file ${formatBytes(s.file_bytes ?? 0)} · buffers ${formatBytes(s.buffer_bytes ?? 0)}`, 'summary');
  });
  canvas.addEventListener('mouseleave', () => hideTip('summary'));
  canvas.addEventListener('click', (ev) => {
    if (!sum) return;
    const r = canvas.getBoundingClientRect();
    const i = Math.floor(new Scale(0, sum.steps.length, PAD_L, r.width).inv(ev.clientX - r.left));
    if (i >= 0 && i < sum.steps.length) ctx.store.setStep(i);
  });
  ctx.store.on('step', whenVisible(root, draw, life.signal));
  window.addEventListener('resize', draw, { signal: life.signal });
  const start = async () => { sum = await getSummary(); draw(); tables(); };
  return { element: root, start, dispose: () => life.dispose() };
}
