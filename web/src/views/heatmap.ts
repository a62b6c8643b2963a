// Model file heatmap: the GGUF file to scale (tensors colored by layer and kind), how often each byte range was
// read (cumulative up to the selected step, or in that step only), and tracks for the runtime buffers.
import type { Heatmap as HeatData } from '../api';
import type { Ctx } from '../context';
import { expertSlabs, formatBytes, layerColor, shapeString, tensorAt, tensorColor, zoomWindow, panWindow, CATEGORY_LIGHTNESS } from '../transforms';
import { el, esc, fitCanvas, cssWidth, drawHeatRow, hideTip, panel, showTip, rafThrottle, debounce, leadingDebounce } from '../ui';
import { Lifetime, type View } from '../view';

const ROW = { axis: 14, layoutY: 18, layoutH: 30, heatY: 52, heatH: 44, storageY: 98, storageH: 7, kvY: 124, trackH: 34, actY: 200, total: 250 };

export function heatmapView(ctx: Ctx): View {
  const life = new Lifetime();
  const fileSize = ctx.map.file_size;
  let win: [number, number] = [0, fileSize];
  let data: HeatData | null = null;
  const modeSel = el('select', { 'aria-label': 'heatmap mode', id: 'heat-mode' },
    el('option', { value: '1' }, 'cumulative up to step'), el('option', { value: '0' }, 'selected step only'));
  const reset = el('button', { onclick: () => { win = [0, fileSize]; load(); } }, 'whole file');
  const label = el('span', { class: 'muted', id: 'heat-window' });
  const { root, body } = panel('heatmap', 'Model file heatmap', modeSel, reset, label);
  const canvas = el('canvas', { id: 'heat-canvas', tabindex: 0 });
  const totals = el('div', { class: 'muted small', id: 'heat-totals' });
  body.append(el('div', { class: 'canvas-wrap' }, canvas), totals, legend(ctx));
  modeSel.addEventListener('change', () => ctx.store.setCumulative(modeSel.value === '1'));

  const tensorStats = new Map<number, [number, number]>();  // memory-map index -> reads, bytes

  // Responses by request: the run does not change while served, so stepping back, replaying or toggling the mode
  // reuses them; the next step is fetched ahead while stepping one at a time (keys, playback).
  const cache = new Map<string, Promise<HeatData>>();
  const CACHE_SIZE = 64;  // answers of ~40 kB JSON each
  let generation = 0;
  let lastStep = ctx.store.sel.step;

  function fetchHeat(step: number, w: number): Promise<HeatData> {
    const start = Math.floor(win[0]), end = Math.ceil(win[1]);
    const key = `${step}|${ctx.store.cumulative ? 1 : 0}|${w}|${start}|${end}`;
    let p = cache.get(key);
    if (p) { cache.delete(key); cache.set(key, p); return p; }  // most recently used last
    p = ctx.api.heatmap({ step, cumulative: ctx.store.cumulative, bins: w, track_bins: w, start, end });
    p.catch(() => cache.delete(key));
    cache.set(key, p);
    if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
    return p;
  }

  async function load() {
    const my = ++generation;
    const w = Math.max(100, Math.round(cssWidth(canvas) || 1000));
    const step = ctx.store.sel.step;
    const direction = Math.abs(step - lastStep) === 1 ? step - lastStep : 0;
    lastStep = step;
    try {
      const t0 = performance.now();
      const d = await fetchHeat(step, w);
      if (my !== generation) return;  // a newer step or window was asked for meanwhile
      data = d;
      tensorStats.clear();
      for (const [i, r, b] of d.tensors) tensorStats.set(i, [r, b]);
      draw();
      canvas.dataset.loadMs = (performance.now() - t0).toFixed(1);
      const ahead = step + direction;
      if (direction && ahead >= 0 && ahead < ctx.stepTimes.length) fetchHeat(ahead, w).catch(() => {});
    } catch (e) {
      if (my === generation) totals.textContent = `error: ${(e as Error).message}`;
    }
  }
  const loadSoon = leadingDebounce(load, 60);

  function draw() {
    const g = fitCanvas(canvas, ROW.total);
    const W = cssWidth(canvas);
    g.clearRect(0, 0, W, ROW.total);
    g.font = '11px system-ui, sans-serif';
    const [s, e] = win;
    const x = (off: number) => ((off - s) / (e - s)) * W;
    // axis
    g.fillStyle = '#9aa3ad';
    g.textBaseline = 'top';
    for (let i = 0; i <= 4; i++) {
      const off = s + ((e - s) * i) / 4;
      const t = formatBytes(Math.round(off));
      const tw = g.measureText(t).width;
      g.fillText(t, Math.min(W - tw, Math.max(0, (W * i) / 4 - tw / 2)), 0);
    }
    // sections before the data: header, metadata, tensor infos
    const sec = ctx.map.sections ?? {};
    for (const [name, r] of Object.entries(sec)) {
      if (name === 'data') continue;
      const a = x(r[0]), b = x(r[1]);
      if (b < 0 || a > W) continue;
      g.fillStyle = name === 'metadata' ? '#3b4452' : '#2f3540';
      g.fillRect(a, ROW.layoutY, Math.max(1, b - a), ROW.layoutH);
    }
    // tensors
    for (const t of ctx.tensors) {
      if (t.offset_end < s || t.offset_start > e) continue;
      const a = x(t.offset_start), b = x(t.offset_end);
      g.fillStyle = tensorColor(t.layer, t.category, ctx.nLayers);
      g.fillRect(a, ROW.layoutY, Math.max(1, b - a - (b - a > 3 ? 1 : 0)), ROW.layoutH);
      if (b - a > 60) {
        g.fillStyle = '#111';
        g.save();
        g.beginPath();
        g.rect(a, ROW.layoutY, b - a, ROW.layoutH);
        g.clip();
        g.fillText(t.name, a + 3, ROW.layoutY + 9);
        g.restore();
      }
    }
    // file heat
    g.fillStyle = '#14181e';
    g.fillRect(0, ROW.heatY, W, ROW.heatH);
    let nonzero = 0, sum = 0;
    if (data) {
      const max = Math.max(1e-9, ...data.file);
      ({ nonzero, sum } = drawHeatRow(g, data.file, max, 0, ROW.heatY, W, ROW.heatH));
      rowLabel(g, `reads (max ${max.toFixed(max < 10 ? 2 : 0)}× per byte)`, ROW.heatY);
      // a budgeted run: the bytes its weight cache read from storage, under the reads
      if (data.storage) {
        const sMax = Math.max(1e-9, ...data.storage.bins);
        g.fillStyle = '#14181e';
        g.fillRect(0, ROW.storageY, W, ROW.storageH);
        g.fillStyle = '#e15759';
        let marked = 0;
        data.storage.bins.forEach((v, i) => {
          if (!(v > 0)) return;
          ++marked;
          g.globalAlpha = 0.35 + 0.65 * Math.min(1, Math.log1p(v) / Math.log1p(sMax));
          g.fillRect((i / data!.storage!.bins.length) * W, ROW.storageY, Math.max(1, W / data!.storage!.bins.length), ROW.storageH);
        });
        g.globalAlpha = 1;
        canvas.dataset.storageBins = String(marked);
      }
      // runtime tracks
      data.tracks.forEach((tr, k) => drawTrack(g, tr, k === 0 ? ROW.kvY : ROW.actY, W));
      const b = data.bytes;
      totals.textContent = `${data.cumulative ? `steps 0–${data.step}` : `step ${data.step}`}: ` +
        `${formatBytes(b.file)} read from the file · KV cache ${formatBytes(b.kv_read)} read, ${formatBytes(b.kv_written)} written · ` +
        `activations ${formatBytes(b.activation_read)} read, ${formatBytes(b.activation_written)} written` +
        (data.storage ? ` · ${formatBytes(data.storage.bytes)} read from storage by the weight cache (red, under the reads)` : '');
    }
    // selection overlays: the selected op's file ranges, the selected tensor
    const op = ctx.store.sel.op;
    g.strokeStyle = '#3df2ff';
    g.lineWidth = 2;
    let selectedRanges = 0;
    if (op) for (const inp of op.inputs) for (const r of inp.ranges) {
      if (r[0] !== 'MODEL_FILE') continue;
      ++selectedRanges;
      const a = x(r[2] as number), b = x((r[2] as number) + (r[3] as number));
      if (b < 0 || a > W) continue;
      g.strokeRect(a, ROW.layoutY - 1, Math.max(2, b - a), ROW.heatY + ROW.heatH - ROW.layoutY + 2);
    }
    if (ctx.store.sel.range) {
      const [ra, rb] = ctx.store.sel.range;
      g.strokeStyle = '#ffffff';
      g.setLineDash([4, 3]);
      g.strokeRect(x(ra), ROW.layoutY - 2, Math.max(2, x(rb) - x(ra)), ROW.heatY + ROW.heatH - ROW.layoutY + 4);
      g.setLineDash([]);
    }
    // the selected expert's slabs (Experts view): its rows of each of its layer's expert tensors
    const ex = ctx.store.sel.expert;
    const slabs = ex ? expertSlabs(ctx.tensors, ex.layer, ex.expert) : [];
    g.strokeStyle = '#ff9f1c';
    for (const [ra, rb] of slabs) g.strokeRect(x(ra), ROW.layoutY - 3, Math.max(2, x(rb) - x(ra)), ROW.heatY + ROW.heatH - ROW.layoutY + 6);
    canvas.dataset.expertSlabs = String(slabs.length);
    canvas.dataset.step = String(data?.step ?? '');
    canvas.dataset.cumulative = data ? (data.cumulative ? '1' : '0') : '';
    canvas.dataset.nonzero = String(nonzero);
    canvas.dataset.signature = sum.toFixed(3);
    canvas.dataset.selectedRanges = String(selectedRanges);  // the selected op's model-file ranges outlined
    label.textContent = `bytes ${formatBytes(Math.round(s))} – ${formatBytes(Math.round(e))} of ${formatBytes(fileSize)}`;
  }

  function drawTrack(g: CanvasRenderingContext2D, tr: HeatData['tracks'][number], y: number, W: number) {
    g.fillStyle = '#14181e';
    g.fillRect(0, y, W, ROW.trackH);
    const size = Math.max(1, tr.size);
    tr.segments.forEach((sg, i) => {
      const a = (sg.start / size) * W, b = (sg.end / size) * W;
      g.fillStyle = i % 2 ? '#1c222b' : '#232a35';
      g.fillRect(a, y, b - a, ROW.trackH);
    });
    const max = Math.max(1e-9, ...tr.read, ...tr.write);
    const h = ROW.trackH / 2;
    drawHeatRow(g, tr.read, max, 0, y, W, h - 1);
    drawHeatRow(g, tr.write, max, 0, y + h, W, h);
    g.fillStyle = '#9aa3ad';
    tr.segments.forEach((sg) => {
      const a = (sg.start / size) * W, b = (sg.end / size) * W;
      if (b - a > 50) g.fillText(sg.name, a + 2, y + ROW.trackH + 2);
    });
    rowLabel(g, `${tr.name} (${formatBytes(tr.size)}): reads ▲ writes ▼`, y - 14, true);
  }

  function hover(ev: MouseEvent) {
    const r = canvas.getBoundingClientRect();
    const px = ev.clientX - r.left, py = ev.clientY - r.top;
    const W = r.width;
    if (py >= ROW.layoutY && py <= ROW.heatY + ROW.heatH) {
      const off = win[0] + (px / W) * (win[1] - win[0]);
      const k = tensorAt(ctx.tensors, off);
      const bin = data ? Math.floor((px / W) * data.file.length) : -1;
      const intensity = data && bin >= 0 ? data.file[bin] : 0;
      if (k < 0) {
        const sec = Object.entries(ctx.map.sections ?? {}).find(([, s]) => off >= s[0] && off < s[1]);
        showTip(ev.clientX, ev.clientY, `<b>${esc(sec ? sec[0] : 'padding')}</b><br>byte ${Math.floor(off)}`, 'heat');
        canvas.dataset.hover = '';
        return;
      }
      const t = ctx.tensors[k];
      const st = tensorStats.get(t.idx) ?? [0, 0];
      canvas.dataset.hover = t.name;
      showTip(ev.clientX, ev.clientY,
        `<b>${esc(t.name)}</b><br>${esc(t.type)} ${esc(shapeString(t.shape))} · layer ${t.layer ?? '—'} · ${esc(t.category)}/${esc(t.component)}` +
        `<br>offsets ${t.offset_start} – ${t.offset_end} (${formatBytes(t.size_bytes)})` +
        `<br>times read: <b>${st[0]}</b> · bytes read: <b>${formatBytes(st[1])}</b>` +
        `<br>byte ${Math.floor(off)}: ${intensity.toFixed(2)}× per byte in this bin`, 'heat');
      return;
    }
    if (data) for (const [k, y] of [[0, ROW.kvY], [1, ROW.actY]] as const) {
      if (py < y || py > y + ROW.trackH) continue;
      const tr = data.tracks[k];
      const off = (px / W) * tr.size;
      const sg = tr.segments.find((s) => off >= s.start && off < s.end);
      const bin = Math.floor((px / W) * tr.bins);
      showTip(ev.clientX, ev.clientY, `<b>${esc(sg?.name ?? tr.name)}</b> (${esc(sg?.pool ?? '')})<br>offset ${Math.floor(off - (sg?.start ?? 0))}` +
        `<br>read ${tr.read[bin]?.toFixed(2)}× · written ${tr.write[bin]?.toFixed(2)}× per byte`, 'heat');
      return;
    }
    hideTip('heat');
  }

  let drag: { x: number; win: [number, number]; moved: boolean } | null = null;
  canvas.addEventListener('mousemove', (ev) => {
    if (drag) {
      const W = canvas.getBoundingClientRect().width;
      const dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      win = panWindow(drag.win[0], drag.win[1], (-dx / W) * (drag.win[1] - drag.win[0]), fileSize);
      redraw();
      loadSoon();
      return;
    }
    hover(ev);
  });
  canvas.addEventListener('mouseleave', () => hideTip('heat'));
  canvas.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX, win: [...win], moved: false }; });
  window.addEventListener('mouseup', (ev) => {
    if (!drag) return;
    const moved = drag.moved;
    drag = null;
    if (moved || ev.target !== canvas) return;
    const r = canvas.getBoundingClientRect();
    const py = ev.clientY - r.top;
    if (py < ROW.layoutY || py > ROW.heatY + ROW.heatH) return;
    const off = win[0] + ((ev.clientX - r.left) / r.width) * (win[1] - win[0]);
    const k = tensorAt(ctx.tensors, off);
    if (k < 0) ctx.store.setTensor(null, null);
    else ctx.store.setTensor(ctx.tensors[k].name, [ctx.tensors[k].offset_start, ctx.tensors[k].offset_end]);
  }, { signal: life.signal });
  canvas.addEventListener('dblclick', (ev) => {
    const r = canvas.getBoundingClientRect();
    const off = win[0] + ((ev.clientX - r.left) / r.width) * (win[1] - win[0]);
    const k = tensorAt(ctx.tensors, off);
    if (k >= 0) { win = [ctx.tensors[k].offset_start, ctx.tensors[k].offset_end]; load(); }
  });
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    const anchor = win[0] + ((ev.clientX - r.left) / r.width) * (win[1] - win[0]);
    win = zoomWindow(win[0], win[1], anchor, Math.pow(1.0015, ev.deltaY), fileSize, 8);
    redraw();
    loadSoon();
  }, { passive: false });
  const redraw = rafThrottle(draw);

  ctx.store.on('step', load);
  ctx.store.on('cumulative', () => { modeSel.value = ctx.store.cumulative ? '1' : '0'; load(); });
  ctx.store.on('op', redraw);
  ctx.store.on('tensor', redraw);
  ctx.store.on('expert', redraw);
  window.addEventListener('resize', debounce(load, 150), { signal: life.signal });
  return { element: root, start: load, dispose: () => life.dispose() };
}

function rowLabel(g: CanvasRenderingContext2D, text: string, y: number, above = false) {
  g.font = '11px system-ui, sans-serif';
  const w = g.measureText(text).width;
  g.fillStyle = above ? 'rgba(0,0,0,0)' : 'rgba(10,12,16,0.7)';
  g.fillRect(2, y + 1, w + 6, 14);
  g.fillStyle = '#d6dde6';
  g.fillText(text, 5, y + 2);
}

function legend(ctx: Ctx): HTMLElement {
  const items: HTMLElement[] = [];
  const n = ctx.nLayers;
  const step = Math.max(1, Math.ceil(n / 12));
  for (let l = 0; l < n; l += step)
    items.push(el('span', { class: 'chip' }, el('i', { style: { background: layerColor(l, n) } }), `L${l}`));
  items.push(el('span', { class: 'chip' }, el('i', { style: { background: layerColor(null, n) } }), 'global'));
  const kinds = Object.keys(CATEGORY_LIGHTNESS).map((c) =>
    el('span', { class: 'chip' }, el('i', { style: { background: tensorColor(Math.floor(n / 2), c, n) } }), c));
  const ramp = el('span', { class: 'chip' }, 'reads per byte: ', el('i', { class: 'ramp' }), ' few → many (log)');
  return el('div', { class: 'legend' }, el('span', { class: 'muted' }, 'layer hue: '), ...items,
    el('span', { class: 'muted' }, ' · kind lightness: '), ...kinds, ramp,
    el('span', { class: 'muted' }, ' · wheel: zoom, drag: pan, click: select tensor, double-click: zoom to it'));
}
