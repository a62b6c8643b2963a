// Experts (mixture-of-experts runs only): a routed layer × expert heatmap of how often each expert was chosen in the
// selected step (or every step up to it), the selected token's chosen experts outlined with their weights, and
// per layer the experts' popularity as bars (sorted, hottest first). Selecting a MUL_MAT_ID op (timeline, table)
// outlines the experts its layer read in that step; clicking a cell selects that expert, whose slabs the file
// heatmap outlines.
import type { Ctx } from '../context';
import type { Routing } from '../api';
import { expertCounts, heatColor, stepLayerExperts, tokenExperts, tokensOfStep } from '../transforms';
import { cssWidth, el, fitCanvas, hideTip, panel, showTip, whenVisible } from '../ui';
import { Lifetime, type View } from '../view';

const PAD_L = 34, ROW_H = 22, POP_H = 18;

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
  let r: Routing | null = null;
  let token = -1;  // index into r.tokens
  let opExperts: { layer: number; experts: Set<number> } | null = null;  // the selected MUL_MAT_ID's

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
  window.addEventListener('resize', draw, { signal: life.signal });

  async function start() {
    r = await ctx.api.routing();
    cumulBox.checked = ctx.store.cumulative;
    info.textContent = `${r.layers.length} routed layers · ${r.n_expert} experts · top ${r.top_k} · ${r.tokens.length} tokens · ` +
      'white: the token\'s experts · cyan: the selected MUL_MAT_ID\'s · click: select an expert';
    fillTokens();
    draw();
  }
  return { element: root, start, dispose: () => life.dispose() };
}
