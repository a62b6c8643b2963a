// The viewer: one page of synchronized views over a run (two runs: compare mode).
import './style.css';
import { listRuns, RunApi, type RunEntry, type StepRow, type Summary } from './api';
import { makeCtx, type Ctx } from './context';
import { Store } from './state';
import { el, tokenText } from './ui';
import { Lifetime, type View } from './view';
import { buffersView } from './views/buffers';
import { compareView } from './views/compare';
import { expertsView } from './views/experts';
import { graphView } from './views/graph';
import { heatmapView } from './views/heatmap';
import { logitsView } from './views/logits';
import { summaryView } from './views/summary';
import { tableView } from './views/table';
import { timelineView } from './views/timeline';
import { weightCacheView } from './views/weightcache';

// Read by the e2e test and its --measure mode: when each view became ready, first paint, the shown run's context.
interface Probe { ready: Record<string, number>; firstPaintMs?: number; ctx?: Ctx }
declare global { interface Window { __tt: Probe } }
const t0 = 0;  // times below are ms since navigation start
window.__tt = { ready: {} };

// Shows run `active` with views that live as long as `life`; `show` switches to another run.
async function open(runs: RunEntry[], active: number, life: Lifetime, show: (active: number) => void) {
  delete document.body.dataset.ready;
  window.__tt = { ready: {} };
  const app = document.getElementById('app')!;
  const api = new RunApi(active, life.signal);
  const [info, map] = await Promise.all([api.run(), api.memoryMap()]);
  life.signal.throwIfAborted();  // another run was chosen meanwhile (the views catch their own aborts)
  const store = new Store();
  const ctx = makeCtx(api, info, map, store);
  let stepsP: Promise<StepRow[]> | null = null;
  const getSteps = () => (stepsP ??= api.steps().then((r) => r.steps));
  let sumP: Promise<Summary> | null = null;
  const getSummary = () => (sumP ??= api.summary());

  const header = topBar(ctx, runs, active, getSteps, show);
  const heat = heatmapView(ctx), timeline = timelineView(ctx), table = tableView(ctx), graph = graphView(ctx);
  const buffers = buffersView(ctx), logits = logitsView(ctx, getSteps), summary = summaryView(ctx, getSummary);
  // The Experts view only for a mixture-of-experts run (one whose trace has routing).
  const experts = info.derived.routed ? expertsView(ctx) : null;
  // The Weight cache view only for a `run --weight-budget` run.
  const weights = info.derived.weight_budget ? weightCacheView(ctx) : null;
  for (const v of [header, heat, timeline, table, graph, buffers, logits, summary, experts, weights]) if (v) life.add(() => v.dispose());
  const compareSlot = el('div', { id: 'compare-slot' });
  app.replaceChildren(header.element, heat.element, timeline.element, el('div', { class: 'row2' }, table.element, graph.element),
    el('div', { class: 'row2' }, buffers.element, logits.element), ...(weights ? [weights.element] : []),
    ...(experts ? [experts.element] : []), summary.element,
    compareSlot);
  store.sel.step = 0;
  const start = (v: View, name: string) => Promise.resolve(v.start?.()).then(() => {
    window.__tt.ready[name] = performance.now() - t0;
  });
  // first paint: heatmap and timeline; then the rest
  await Promise.all([start(heat, 'heatmap'), start(timeline, 'timeline'), start(table, 'table')]);
  life.signal.throwIfAborted();
  const firstPaintMs = performance.now() - t0;
  window.__tt.firstPaintMs = firstPaintMs;
  start(header, 'steps').catch((e: Error) => { if (e.name !== 'AbortError') throw e; });  // the label's tokens
  document.body.dataset.firstPaint = firstPaintMs.toFixed(0);
  await Promise.all([start(graph, 'graph'), start(buffers, 'buffers'), start(logits, 'logits'), start(summary, 'summary'),
    ...(experts ? [start(experts, 'experts')] : []), ...(weights ? [start(weights, 'weight-cache')] : [])]);
  life.signal.throwIfAborted();
  if (runs.length === 2) {
    const [a, b] = await Promise.all([new RunApi(0, life.signal).summary(), new RunApi(1, life.signal).summary()]);
    const compare = compareView(runs, a, b, (s) => store.setStep(Math.min(s, ctx.stepTimes.length - 1)));
    life.add(() => compare.dispose());
    compareSlot.replaceChildren(compare.element);
    window.__tt.ready.compare = performance.now() - t0;
  }
  window.__tt.ctx = ctx;
  document.body.dataset.ready = '1';
}

// The page over the served runs, one shown at a time: showing another disposes the shown run's views (and aborts
// its requests) first. What fails is shown in place of the page, except the aborts of a run switched away from.
function viewer(runs: RunEntry[]): (active: number) => void {
  let shown: Lifetime | null = null;
  const show = (active: number) => {
    shown?.dispose();
    const life = new Lifetime();
    shown = life;
    open(runs, active, life, show).catch((e: Error) => {
      if (e.name !== 'AbortError') document.getElementById('app')!.replaceChildren(el('p', { class: 'error' }, `cannot load: ${e.message}`));
    });
  };
  return show;
}

// The step controls and the run switcher; start() loads the steps' chosen tokens for the label.
function topBar(ctx: Ctx, runs: RunEntry[], active: number, getSteps: () => Promise<StepRow[]>,
  show: (active: number) => void): View {
  const life = new Lifetime();
  const n = ctx.stepTimes.length;
  const slider = el('input', { type: 'range', min: 0, max: Math.max(0, n - 1), value: 0, id: 'step-slider', 'aria-label': 'step' });
  const label = el('span', { id: 'step-label', class: 'step-label' });
  const play = el('button', { id: 'play', title: 'play / pause (space)' }, '▶ play');
  const speed = el('select', { id: 'play-speed', 'aria-label': 'speed' }, ...[1, 4, 10, 30].map((s) => el('option', { value: s, selected: s === 4 }, `${s} steps/s`)));
  const prev = el('button', { title: 'previous step (←)', onclick: () => go(ctx.store.sel.step - 1) }, '◀');
  const next = el('button', { title: 'next step (→)', onclick: () => go(ctx.store.sel.step + 1) }, '▶');
  const r = ctx.info.run;
  const title = el('div', { class: 'title' }, el('b', {}, 'tensortrace'),
    el('span', {}, ` ${ctx.map.file} · ${r?.model?.config?.n_layer ?? '?'} layers · ${n} steps · ${ctx.info.derived.ops.toLocaleString()} ops · ${ctx.info.derived.threads} threads`),
    el('span', { class: 'muted prompt', title: r?.generated_text ?? '' }, ` “${r?.options?.prompt ?? ''}” → ${(r?.generated_text ?? '').slice(0, 80)}`));
  const switcher = runs.length > 1 ? el('span', { class: 'runs' }, ...runs.map((run, i) =>
    el('button', { class: i === active ? 'active' : '', id: `run-${i}`, onclick: () => i !== active && show(i) }, `${i ? 'B' : 'A'}: ${run.name}`))) : null;
  const bar = el('div', { class: 'topbar' }, title, el('div', { class: 'controls' }, switcher, prev, slider, next, play, speed, label,
    el('span', { class: 'muted small' }, '← → step · space play · table: ↑ ↓ PgUp PgDn')));
  let steps: StepRow[] = [];
  function go(s: number) { ctx.store.setStep(Math.max(0, Math.min(n - 1, s))); }
  function update() {
    const s = ctx.store.sel.step;
    slider.value = String(s);
    const st = steps[s];
    const t = ctx.stepTimes[s];
    label.textContent = `step ${s} / ${n - 1} · ${t?.[2] ?? ''}${st ? ` · chose ${tokenText(st.token_text)}` : ''}`;
  }
  slider.addEventListener('input', () => go(Number(slider.value)));
  let timer: ReturnType<typeof setInterval> | null = null;
  life.add(() => { if (timer) clearInterval(timer); });
  function toggle() {
    if (timer) { clearInterval(timer); timer = null; play.textContent = '▶ play'; return; }
    if (ctx.store.sel.step >= n - 1) go(0);
    play.textContent = '⏸ pause';
    timer = setInterval(() => {
      if (ctx.store.sel.step >= n - 1) { toggle(); return; }
      go(ctx.store.sel.step + 1);
    }, 1000 / Number(speed.value));
  }
  play.addEventListener('click', toggle);
  ctx.store.on('step', update);
  document.addEventListener('keydown', (ev) => {
    const tag = (ev.target as HTMLElement).tagName;
    if (tag === 'INPUT' && (ev.target as HTMLInputElement).type !== 'range') return;
    if (tag === 'SELECT' || (ev.target as HTMLElement).closest('.tscroll')) return;
    if (ev.key === 'ArrowRight' || ev.key === 'ArrowLeft') { ev.preventDefault(); go(ctx.store.sel.step + (ev.key === 'ArrowRight' ? 1 : -1)); }
    else if (ev.key === 'Home') go(0);
    else if (ev.key === 'End') go(n - 1);
    else if (ev.key === ' ') { ev.preventDefault(); toggle(); }
  }, { signal: life.signal });
  update();
  const start = () => getSteps().then((s) => { steps = s; update(); });
  return { element: bar, start, dispose: () => life.dispose() };
}


listRuns().then((r) => {
  if (!r.runs.length) throw new Error('no runs');
  viewer(r.runs)(0);
}).catch((e: Error) => {
  document.getElementById('app')!.replaceChildren(el('p', { class: 'error' }, `cannot load: ${e.message}`));
});
