// Logit landscape: per step the top-k tokens' probabilities (rank × step), the chosen token, entropy and the
// top1−top2 logit gap over the run; the selected step's top-k as bars.
import type { Ctx } from '../context';
import type { StepRow } from '../api';
import { heatColor, Scale } from '../transforms';
import { CachedLayer, cssWidth, el, esc, fitCanvas, hideTip, panel, showTip, tokenText, whenVisible } from '../ui';
import { Lifetime, type View } from '../view';

const H = 200, PAD_L = 40, LAND_H = 110;

export function logitsView(ctx: Ctx, getSteps: () => Promise<StepRow[]>): View {
  const life = new Lifetime();
  const info = el('span', { class: 'muted' });
  const { root, body } = panel('logits', 'Logit landscape', info);
  const canvas = el('canvas', { id: 'logits-canvas' });
  const bars = el('div', { class: 'topk', id: 'logits-topk' });
  body.append(el('div', { class: 'split' }, el('div', { class: 'canvas-wrap grow' }, canvas), bars));
  let steps: StepRow[] = [];

  // The landscape does not depend on the selected step: drawn once per size, a step change adds the marker and bars.
  const base = new CachedLayer();
  let cells = 0;

  function draw() {
    const g = fitCanvas(canvas, H);
    const W = cssWidth(canvas);
    if (!steps.length) { g.clearRect(0, 0, W, H); return; }
    base.paint(canvas, g, W, H, (bg) => drawLandscape(bg, W));
    const s = ctx.store.sel.step;
    const sx = new Scale(0, steps.length, PAD_L, W);
    g.strokeStyle = '#3df2ff';
    g.lineWidth = 1;
    g.strokeRect(sx.px(s), 0, Math.max(2, (W - PAD_L) / steps.length), H - 2);
    canvas.dataset.cells = String(cells);
    canvas.dataset.step = String(s);
    drawBars();
  }

  function drawLandscape(g: CanvasRenderingContext2D, W: number) {
    const k = Math.max(1, ...steps.map((s) => s.top_k?.length ?? 0));
    const sx = new Scale(0, steps.length, PAD_L, W);
    const cw = (W - PAD_L) / steps.length, ch = LAND_H / k;
    cells = 0;
    steps.forEach((s, i) => (s.top_k ?? []).forEach((t, r) => {
      const c = heatColor(t.prob, 1);
      if (!c) return;
      g.fillStyle = c;
      g.fillRect(sx.px(i), r * ch, Math.max(1, cw), Math.max(1, ch - (ch > 4 ? 1 : 0)));
      cells++;
      if (t.id === s.token && cw >= 3) { g.fillStyle = '#ffffff'; g.fillRect(sx.px(i) + cw / 2 - 1, r * ch + ch / 2 - 1, 2, 2); }
    }));
    g.font = '10px system-ui, sans-serif';
    g.fillStyle = '#9aa3ad';
    g.textBaseline = 'top';
    g.fillText('rank 1', 2, 0);
    g.fillText(`rank ${k}`, 2, LAND_H - 11);
    // entropy and gap lines
    const y0 = LAND_H + 8, y1 = H - 4;
    const ent = steps.map((s) => s.entropy ?? 0), gap = steps.map((s) => s.top1_top2_gap ?? 0);
    const line = (v: number[], color: string) => {
      const m = Math.max(1e-9, ...v);
      const sy = new Scale(0, m, y1, y0);
      g.strokeStyle = color;
      g.lineWidth = 1.5;
      g.beginPath();
      v.forEach((y, i) => (i ? g.lineTo(sx.px(i + 0.5), sy.px(y)) : g.moveTo(sx.px(i + 0.5), sy.px(y))));
      g.stroke();
      return m;
    };
    g.fillStyle = '#14181e';
    g.fillRect(PAD_L, y0, W - PAD_L, y1 - y0);
    const me = line(ent, '#f28e2b'), mg = line(gap, '#76b7b2');
    g.fillStyle = '#f28e2b'; g.fillText(`H≤${me.toFixed(2)}`, 2, y0);
    g.fillStyle = '#76b7b2'; g.fillText(`gap≤${mg.toFixed(1)}`, 2, y0 + 14);
  }

  function drawBars() {
    const s = steps[ctx.store.sel.step];
    if (!s) { bars.replaceChildren(); return; }
    const rows = (s.top_k ?? []).map((t) => el('div', { class: `bar${t.id === s.token ? ' chosen' : ''}`, title: `id ${t.id}, logit ${t.logit.toFixed(3)}` },
      el('span', { class: 'tok' }, tokenText(t.text)),
      el('span', { class: 'fill', style: { width: `${Math.max(1, t.prob * 100)}%` } }),
      el('span', { class: 'p' }, `${(t.prob * 100).toFixed(t.prob < 0.01 ? 2 : 1)}%`)));
    bars.replaceChildren(el('div', { class: 'muted small' }, `step ${s.step}: chose ${tokenText(s.token_text)} · H ${s.entropy?.toFixed(3)} · gap ${s.top1_top2_gap?.toFixed(2)}`), ...rows);
  }

  canvas.addEventListener('mousemove', (ev) => {
    if (!steps.length) return;
    const r = canvas.getBoundingClientRect();
    const i = Math.floor(new Scale(0, steps.length, PAD_L, r.width).inv(ev.clientX - r.left));
    const s = steps[i];
    if (!s) { hideTip('logits'); return; }
    const k = Math.max(1, s.top_k?.length ?? 1);
    const rank = Math.floor(((ev.clientY - r.top) / LAND_H) * k);
    const t = s.top_k?.[rank];
    showTip(ev.clientX, ev.clientY, `<b>step ${s.step}</b> chose ${esc(tokenText(s.token_text))}<br>` +
      (t && ev.clientY - r.top < LAND_H ? `rank ${rank + 1}: ${esc(tokenText(t.text))} ${(t.prob * 100).toFixed(2)}%<br>` : '') +
      `entropy ${s.entropy?.toFixed(3)} · gap ${s.top1_top2_gap?.toFixed(3)}`, 'logits');
  });
  canvas.addEventListener('mouseleave', () => hideTip('logits'));
  canvas.addEventListener('click', (ev) => {
    const r = canvas.getBoundingClientRect();
    const i = Math.floor(new Scale(0, steps.length, PAD_L, r.width).inv(ev.clientX - r.left));
    if (i >= 0 && i < steps.length) ctx.store.setStep(i);
  });
  ctx.store.on('step', whenVisible(root, draw, life.signal));
  window.addEventListener('resize', draw, { signal: life.signal });
  async function start() {
    steps = await getSteps();
    info.textContent = `${steps.length} steps · white dot: chosen token · orange: entropy · teal: top1−top2 gap`;
    draw();
  }
  return { element: root, start, dispose: () => life.dispose() };
}
