// End-to-end test of the viewer: generates demo runs from models/stories260K.gguf, starts `tensortrace serve`,
// drives Debian's chromium headless (playwright-core, no network), checks every view rendered real content and
// that the views are synchronized, and saves screenshots.
// Usage: node e2e/e2e.mjs TENSORTRACE_BINARY REPO_DIR SCREENSHOT_DIR [--measure RUN_DIR]
import { chromium } from 'playwright-core';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runnerImport } from 'vite';

const [bin, repo, shots, ...rest] = process.argv.slice(2);
const measureDir = rest[0] === '--measure' ? rest[1] : null;
if (!bin || !repo || !shots) { console.error('usage: e2e.mjs BIN REPO SCREENSHOT_DIR [--measure RUN_DIR]'); process.exit(2); }
mkdirSync(shots, { recursive: true });
const scratch = mkdtempSync(join(tmpdir(), 'tt-e2e-'));
let failures = 0;
const fail = (m) => { console.error(`FAIL: ${m}`); failures++; };
const check = (c, m) => { if (!c) fail(m); else console.log(`ok: ${m}`); };

function startServer(dirs) {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, ['serve', ...dirs, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 60000);
    p.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/serving (http:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve({ proc: p, url: m[1] }); }
    });
    p.stderr.on('data', (d) => { out += d; });
    p.on('exit', (code) => reject(new Error(`server exited ${code}: ${out}`)));
  });
}

async function stopServer(s) {
  const done = new Promise((r) => s.proc.once('exit', (code, sig) => r({ code, sig })));
  s.proc.kill('SIGINT');
  const r = await Promise.race([done, new Promise((res) => setTimeout(() => res(null), 5000))]);
  if (!r) { s.proc.kill('SIGKILL'); fail('server did not stop on SIGINT'); } else check(r.code === 0, `server stopped cleanly on SIGINT (exit ${r.code})`);
}

async function launch() {
  return chromium.launch({
    executablePath: process.env.TT_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'],
  });
}

// Counts, in the page, what outlives a view's elements: listeners on window and document, intervals and workers
// (installed before the app runs; the app's own code is not changed for it). window.__ttLive() reads the counts.
function trackLiveResources() {
  const listeners = (target) => {
    const live = new Set();
    const add = target.addEventListener, remove = target.removeEventListener;
    const captureOf = (o) => (typeof o === 'boolean' ? o : !!o?.capture);
    const find = (type, fn, capture) => [...live].find((e) => e.type === type && e.fn === fn && e.capture === capture);
    target.addEventListener = function (type, fn, opts) {
      add.call(this, type, fn, opts);
      if (!fn || opts?.once || opts?.signal?.aborted || find(type, fn, captureOf(opts))) return;
      const e = { type, fn, capture: captureOf(opts) };
      live.add(e);
      opts?.signal?.addEventListener('abort', () => live.delete(e));
    };
    target.removeEventListener = function (type, fn, opts) {
      remove.call(this, type, fn, opts);
      const e = find(type, fn, captureOf(opts));
      if (e) live.delete(e);
    };
    return live;
  };
  const win = listeners(window), doc = listeners(document);
  const intervals = new Set();
  const setI = window.setInterval, clearI = window.clearInterval;
  window.setInterval = (...a) => { const id = setI(...a); intervals.add(id); return id; };
  window.clearInterval = (id) => { intervals.delete(id); clearI(id); };
  const workers = new Set();
  const W = window.Worker;
  window.Worker = class extends W {
    constructor(...a) { super(...a); workers.add(this); }
    terminate() { workers.delete(this); super.terminate(); }
  };
  window.__ttLive = () => ({ window: win.size, document: doc.size, intervals: intervals.size, workers: workers.size,
    windowTypes: [...win].map((e) => e.type).sort().join(' ') });
}

// Every answer of the server the page received, checked against the schemas of web/src/api.ts (the client's one
// definition of the API's shapes): a key missing, of another type, or not in the schema is a failure.
async function apiValidator() {
  const web = dirname(dirname(fileURLToPath(import.meta.url)));
  const { module: api } = await runnerImport(join(web, 'src', 'api.ts'), { configFile: false, logLevel: 'error' });
  const { module: schema } = await runnerImport(join(web, 'src', 'schema.ts'), { configFile: false, logLevel: 'error' });
  const seen = new Map();  // route -> answers validated
  return {
    check(url, status, body) {
      const u = new URL(url);
      const s = status === 200 ? api.answerSchema(u.pathname, u.searchParams) : api.ApiErrorBody;
      if (!s) { fail(`no schema in web/src/api.ts for ${u.pathname}`); return; }
      const errors = schema.validate(s, body);
      if (errors.length) fail(`${u.pathname}${u.search} (${status}) does not match web/src/api.ts: ${errors.slice(0, 5).join('; ')}`);
      const route = `${u.pathname.split('/').filter(Boolean).slice(3).join('/') || 'runs'}${u.searchParams.has('timing_only') ? '?timing_only' : ''}`;
      seen.set(route, (seen.get(route) ?? 0) + 1);
    },
    seen,
  };
}

// Non-background pixels of a canvas.
const inkOf = (page, sel) => page.evaluate((sel) => {
  const c = document.querySelector(sel);
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] > 40 || d[i + 1] > 40 || d[i + 2] > 40)) n++;
  return n;
}, sel);

// Runs `action` in the page and waits (rAF polling) until `cond` holds; returns the elapsed ms.
async function timed(page, action, cond, arg) {
  return page.evaluate(async ({ action, cond, arg }) => {
    const a = new Function('arg', action), c = new Function('arg', cond);
    const t = performance.now();
    await a(arg);
    while (!c(arg)) {
      await new Promise((r) => requestAnimationFrame(r));
      if (performance.now() - t > 20000) return -1;
    }
    return performance.now() - t;
  }, { action: action.toString(), cond: cond.toString(), arg });
}

async function main() {
  if (measureDir) return measure(measureDir);
  const runA = join(scratch, 'run-a'), runB = join(scratch, 'run-b');
  const model = join(repo, 'models', 'stories260K.gguf');
  execFileSync(bin, ['run', '-m', model, '-p', 'Once upon a time', '-n', '24', '--temp', '0', '-t', '2', '-o', runA], { stdio: 'ignore' });
  execFileSync(bin, ['run', '-m', model, '-p', 'Once upon a time there', '-n', '24', '--temp', '0', '-t', '1', '-o', runB], { stdio: 'ignore' });
  const server = await startServer([runA, runB]);
  const validator = await apiValidator();
  const api = async (p) => {
    const r = await fetch(server.url + p);
    const body = await r.json();
    validator.check(server.url + p, r.status, body);
    return body;
  };
  const info = await api('api/runs/0/run');
  const map = await api('api/runs/0/memory-map');
  const browser = await launch();
  try {
    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    await page.addInitScript(trackLiveResources);
    const pending = [];
    page.on('response', (r) => {
      if (!new URL(r.url()).pathname.startsWith('/api/')) return;
      pending.push(r.json().then((body) => validator.check(r.url(), r.status(), body), () => {}));  // aborted: no body
    });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    await page.goto(server.url, { waitUntil: 'load' });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
    check(errors.length === 0, `no page errors (${errors.join(' | ')})`);

    // 1. heatmap: real pixels, reads recorded
    check((await inkOf(page, '#heat-canvas')) > 1000, 'heatmap canvas has content');
    check(Number(await page.getAttribute('#heat-canvas', 'data-nonzero')) > 10, 'heatmap shows read bins');
    // hover the middle of token_embd.weight → tooltip names it
    const emb = map.tensors.find((t) => t.name === 'token_embd.weight');
    const box = await page.locator('#heat-canvas').boundingBox();
    const x = box.x + ((emb.offset_start + emb.offset_end) / 2 / map.file_size) * box.width;
    await page.mouse.move(x, box.y + 30);
    await page.waitForSelector('#tooltip', { state: 'visible' });
    const tip = await page.textContent('#tooltip');
    check(tip.includes('token_embd.weight') && tip.includes('times read'), `heatmap tooltip shows the tensor (${tip.slice(0, 80)})`);
    await page.locator('#heatmap').screenshot({ path: join(shots, 'heatmap.png') });
    // step control changes the heatmap: step-only mode, step 0 (prompt: 5 embedding rows) vs step 3
    await page.selectOption('#heat-mode', '0');
    await page.waitForFunction(() => { const d = document.querySelector('#heat-canvas').dataset; return d.step === '0' && d.cumulative === '0'; });
    const sig0 = await page.getAttribute('#heat-canvas', 'data-signature');
    await page.locator('#step-slider').focus();
    for (let i = 0; i < 3; i++) await page.keyboard.press('ArrowRight');
    await page.waitForFunction(() => { const d = document.querySelector('#heat-canvas').dataset; return d.step === '3' && d.cumulative === '0'; });
    const sig3 = await page.getAttribute('#heat-canvas', 'data-signature');
    check(sig0 !== sig3, `step control changes the heatmap (${sig0} → ${sig3})`);
    check((await page.textContent('#step-label')).startsWith('step 3'), 'step label follows the keyboard');
    await page.selectOption('#heat-mode', '1');
    await page.mouse.move(5, 5);

    // 2. timeline
    check(Number(await page.getAttribute('#timeline-canvas', 'data-drawn')) > 0, 'timeline drew spans');
    check((await inkOf(page, '#timeline-canvas')) > 1000, 'timeline canvas has content');
    await page.locator('#timeline').screenshot({ path: join(shots, 'timeline.png') });

    // 3. table: count matches the run, click selects the node in the graph
    const count = (await page.textContent('#table-count')).replace(/[^0-9]/g, '');
    check(Number(count) === info.derived.ops, `table counts every op (${count} = ${info.derived.ops})`);
    await page.selectOption('#tf-op', 'MUL_MAT');
    await page.waitForFunction(() => document.querySelector('#table-scroll .trow[data-i]:not([data-i=""])')?.children[4]?.textContent === 'MUL_MAT');
    const row = page.locator('#table-scroll .trow[data-i]:not([data-i=""])').nth(3);
    const node = await row.getAttribute('data-node'), step = await row.getAttribute('data-step');
    await row.click();
    await page.waitForSelector(`#graph-svg g.node.selected[data-id="node_${node}"]`, { timeout: 10000 });
    check(true, `click in the table selects node_${node} of step ${step} in the graph`);
    check((await page.textContent('#step-label')).startsWith(`step ${step}`), 'selecting an op selects its step');
    await page.locator('#table-scroll').press('ArrowDown');
    await page.waitForFunction((n) => document.querySelector('#graph-svg g.node.selected')?.dataset.id !== `node_${n}`, node);
    check(true, 'arrow key in the table moves the selection (graph follows)');
    await page.locator('#table').screenshot({ path: join(shots, 'table.png') });

    // 4. graph: all layers → node count equals the step's graph
    await page.selectOption('#graph-layer', 'all');
    const g = await api(`api/runs/0/graph?step=${step}`);
    await page.waitForFunction((n) => document.querySelectorAll('#graph-svg g.node').length === n, g.graph.nodes.length);
    check(true, `graph shows all ${g.graph.nodes.length} nodes`);
    await page.selectOption('#graph-layer', '1');
    const n1 = await page.locator('#graph-svg g.node').count();
    check(n1 > 10 && n1 < g.graph.nodes.length, `layer filter keeps one layer with its inputs (${n1} nodes)`);
    await page.locator('#graph').screenshot({ path: join(shots, 'graph.png') });

    // 5-7. buffers, logits, summary. Views off screen skip step changes and catch up once scrolled into view.
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.locator('#step-slider').focus();
    await page.keyboard.press('End');
    const cur = String(info.derived.steps - 1);
    await page.waitForFunction((s) => document.querySelector('#heat-canvas').dataset.step === s, cur);
    for (const id of ['buffers', 'logits', 'summary']) {
      await page.locator(`#${id}`).scrollIntoViewIfNeeded();
      const shown = await page.waitForFunction(([id, s]) => document.querySelector(`#${id}-canvas`).dataset.step === s, [id, cur], { timeout: 10000 })
        .then(() => true, () => false);
      check(shown, `${id} shows the selected step ${cur} once scrolled into view`);
    }
    check((await page.textContent('#logits-topk')).includes(`step ${cur}:`), 'top-k bars are the selected step\'s');
    check(Number(await page.getAttribute('#buffers-canvas', 'data-drawn')) > 0 && (await inkOf(page, '#buffers-canvas')) > 500, 'buffers chart drawn');
    await page.locator('#buffers').screenshot({ path: join(shots, 'buffers.png') });
    check(Number(await page.getAttribute('#logits-canvas', 'data-cells')) >= info.derived.steps, 'logit landscape drawn for every step');
    check((await page.locator('#logits-topk .bar').count()) === 10, 'top-10 bars of the selected step');
    await page.locator('#logits').screenshot({ path: join(shots, 'logits.png') });
    check(Number(await page.getAttribute('#summary-canvas', 'data-steps')) === info.derived.steps, 'summary per step');
    check((await page.locator('#hottest tr').count()) > 5, 'hottest tensors listed');
    check((await page.locator('#threads tr.thread-row').count()) === info.derived.threads, 'thread time: a row per thread');
    await page.locator('#summary').screenshot({ path: join(shots, 'summary.png') });
    check((await page.locator('#experts').count()) === 0, 'a dense run has no Experts view');
    check((await page.locator('#weight-cache').count()) === 0, 'a run without a weight budget has no Weight cache view');
    // compare mode
    check((await page.locator('#compare-ops tr').count()) > 5, 'compare: time per op kind A vs B');
    check((await page.locator('#compare-tokens .tokpair.differ').count()) > 0, 'compare: differing tokens marked');
    await page.locator('#compare').screenshot({ path: join(shots, 'compare.png') });
    await page.screenshot({ path: join(shots, 'page.png'), fullPage: true });
    check(errors.length === 0, `still no page errors (${errors.join(' | ')})`);

    // 8. switching runs twice (A → B → A) while playing leaves nothing of the old runs' views running: as many
    // window and document listeners as after the first load, no play timer, one layout worker
    await page.evaluate(() => window.scrollTo(0, 0));
    const base = await page.evaluate(() => window.__ttLive());
    await page.click('#play');
    check((await page.evaluate(() => window.__ttLive().intervals)) === 1, 'play runs a timer');
    for (const i of [1, 0]) {
      await page.click(`#run-${i}`);
      await page.waitForSelector(`#run-${i}.active`, { timeout: 30000 });
      await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
    }
    const live = await page.evaluate(() => window.__ttLive());
    check(live.window === base.window && live.document === base.document,
      `run switches leave no window/document listeners behind (${base.window}/${base.document} → ${live.window}/${live.document}: ${base.windowTypes} → ${live.windowTypes})`);
    check(live.intervals === 0, `run switches stop the play timer (${live.intervals} left)`);
    check(live.workers === base.workers, `run switches leave no layout workers behind (${base.workers} → ${live.workers})`);
    await page.waitForFunction((n) => (document.querySelector('#table-count')?.textContent ?? '').replace(/[^0-9]/g, '') === String(n), info.derived.ops);
    check(true, 'after switching back, the table counts run A\'s ops');
    check((await inkOf(page, '#heat-canvas')) > 1000, 'after switching back, the heatmap has content');
    await page.screenshot({ path: join(shots, 'page-after-switch.png'), fullPage: false });

    // 9. every route's answers match web/src/api.ts: those the page asked for, and the variants it does not ask for
    for (const p of ['api/runs', 'api/runs/1/run', 'api/runs/0/steps?from=0&to=3', 'api/runs/0/ops?i=7',
      'api/runs/0/ops?op=MUL_MAT&locate=0&limit=3', 'api/runs/0/spans?limit=1', 'api/runs/0/spans?t0=0&t1=1',
      'api/runs/0/graph?step=0&timing_only=1', 'api/runs/0/buffers?max_events=100000&px=3',
      'api/runs/0/heatmap?step=1&cumulative=0&bins=5', 'api/runs/0/ops?limit=nope', 'api/runs/9/run',
      'api/runs/0/routing', 'api/runs/0/expert-cache', 'api/runs/0/weight-cache']) await api(p);
    await Promise.all(pending);
    const routes = ['runs', 'run', 'memory-map', 'steps', 'ops', 'spans', 'graph', 'graph?timing_only', 'buffers', 'heatmap', 'summary'];
    const missing = routes.filter((r) => !validator.seen.has(r));
    check(missing.length === 0, `answers of every route validated against web/src/api.ts (${[...validator.seen].map(([r, n]) => `${r} ${n}`).join(', ')}; missing: ${missing.join(' ') || 'none'})`);
    check(errors.length === 0, `no page errors after the run switches (${errors.join(' | ')})`);
  } finally {
    await browser.close();
    await stopServer(server);
  }
}

// First paint and interaction times on a (long) run. Each interaction is timed inside the page, from the call or
// event that starts it to the first animation frame at which its result is in the DOM (rAF polling), so playwright's
// round trips and actionability checks do not count. Prints the figures as JSON with the load average before and
// after (the machine is shared: report it with the figures).
async function measure(dir) {
  const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const r = { load_average_before: loadavg() };
  const server = await startServer([dir]);
  const browser = await launch();
  try {
    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(server.url, { waitUntil: 'load' });
    await page.waitForSelector('body[data-first-paint]', { timeout: 60000 });
    r.first_paint_ms = await page.evaluate(() => window.__tt.firstPaintMs);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 120000 });
    r.ready_ms = await page.evaluate(() => window.__tt.ready);
    const n = await page.evaluate(() => window.__tt.ctx.stepTimes.length);
    const heatShows = (s, cumulative) => `const d = document.querySelector('#heat-canvas').dataset; return d.step === '${s}' && d.cumulative === '${cumulative}'`;
    const setStep = (s) => `window.__tt.ctx.store.setStep(${s})`;

    // step changes until the heatmap shows the new step: jumps (nothing cached), then one step at a time (← →,
    // playback: the heatmap of the next step was fetched ahead)
    r.step_jump_heatmap_ms = [];
    for (const s of [1, Math.floor(n / 2), n - 1, 5]) r.step_jump_heatmap_ms.push(await timed(page, setStep(s), heatShows(s, 1)));
    r.step_next_heatmap_ms = [];
    for (const s of [6, 7, 8, 9, 10]) r.step_next_heatmap_ms.push(await timed(page, setStep(s), heatShows(s, 1)));
    await page.selectOption('#heat-mode', '0');
    await page.waitForFunction(() => document.querySelector('#heat-canvas').dataset.cumulative === '0');
    r.step_jump_heatmap_single_ms = [];
    for (const s of [2, Math.floor(n / 3), n - 2]) r.step_jump_heatmap_single_ms.push(await timed(page, setStep(s), heatShows(s, 0)));
    check(Number(await page.getAttribute('#heat-canvas', 'data-nonzero')) > 10, 'measure: heatmap shows read bins');

    // table: scroll to the last rows (filled from one page fetch)
    const total = Number((await page.textContent('#table-count')).replace(/[^0-9]/g, ''));
    r.table_scroll_end_ms = await timed(page, `const s = document.querySelector('#table-scroll'); s.scrollTop = s.scrollHeight;`,
      `return !!document.querySelector('#table-scroll .trow[data-pos="${total - 3}"]:not([data-i=""])')`);
    // table click → the same node selected in the graph
    const [node, step] = await page.evaluate((pos) => {
      const row = document.querySelector(`#table-scroll .trow[data-pos="${pos}"]`);
      return [row.dataset.node, row.dataset.step];
    }, total - 3);
    r.table_click_to_graph_ms = await timed(page, `document.querySelector('#table-scroll .trow[data-pos="${total - 3}"] span').click()`,
      `return !!document.querySelector('#graph-svg g.node.selected[data-id="node_${node}"]') && document.querySelector('#graph-info').textContent.startsWith('step ${step} ')`);
    check(r.table_click_to_graph_ms >= 0, `measure: table click selected node_${node} of step ${step} in the graph`);

    // heatmap hover → tooltip naming a tensor
    r.heatmap_hover_ms = await timed(page, `const c = document.querySelector('#heat-canvas'); const b = c.getBoundingClientRect();
      c.dispatchEvent(new MouseEvent('mouseleave'));
      c.dispatchEvent(new MouseEvent('mousemove', { clientX: b.left + b.width * 0.5, clientY: b.top + 30, bubbles: true }));`,
      `const t = document.querySelector('#tooltip'); return t.style.display === 'block' && t.dataset.owner === 'heat'`);
    await page.mouse.move(5, 5);

    // graph: every node of a generation step at once, then a step change with all of them shown
    r.graph_all_layers_ms = await timed(page, `const s = document.querySelector('#graph-layer'); s.value = 'all'; s.dispatchEvent(new Event('change'));`,
      `return document.querySelectorAll('#graph-svg g.node').length > 300`);
    r.graph_nodes = await page.locator('#graph-svg g.node').count();
    r.graph_layout_and_render_ms = Number(await page.getAttribute('#graph-svg', 'data-layout-ms'));
    const g = await (await fetch(`${server.url}api/runs/0/graph?step=${n - 4}`)).json();
    r.graph_all_layers_step_change_ms = await timed(page, setStep(n - 4),
      `return document.querySelector('#graph-info').textContent.startsWith('step ${n - 4} ')`);
    check(r.graph_nodes > 300 && (await page.locator('#graph-svg g.node').count()) === g.graph.nodes.length,
      `measure: graph shows all ${g.graph.nodes.length} nodes`);

    // timeline: the whole run (per-pixel aggregates), then zoom into one step (single spans)
    r.timeline_whole_run_ms = await timed(page, `document.querySelector('#timeline button:nth-of-type(1)').click()`,
      `return document.querySelector('#timeline-canvas').dataset.mode === 'buckets'`);
    // wheel zoom into 64 % of the run: the server aggregates ~500k spans per pixel (after the 50 ms wheel debounce)
    r.timeline_wheel_zoom_wide_ms = await timed(page, `const c = document.querySelector('#timeline-canvas'); const b = c.getBoundingClientRect();
      window.__ttBefore = c.dataset.window;
      c.dispatchEvent(new WheelEvent('wheel', { deltaY: -300, clientX: b.left + b.width / 2, clientY: b.top + 30, bubbles: true, cancelable: true }));`,
      `const d = document.querySelector('#timeline-canvas').dataset; return d.window !== window.__ttBefore && d.mode === 'buckets'`);
    r.timeline_zoom_step_ms = await timed(page, `document.querySelector('#timeline button:nth-of-type(2)').click()`,
      `return document.querySelector('#timeline-canvas').dataset.mode === 'spans'`);
    check(Number(await page.getAttribute('#timeline-canvas', 'data-drawn')) > 0, 'measure: timeline drew spans');
    await page.screenshot({ path: join(shots, 'long-run.png'), fullPage: false });
    check(errors.length === 0, `measure: no page errors (${errors.join(' | ')})`);
    r.load_average_after = loadavg();
    console.log(JSON.stringify(r, null, 1));
  } finally {
    await browser.close();
    await stopServer(server);
  }
}

// A mixture-of-experts run (synth-qwen3moe-256 from ../shared; skipped when absent): the page loads without errors,
// the table lists its MUL_MAT_ID ops, and selecting one outlines its model-file ranges on the heatmap: one slab per
// expert the step's tokens chose, never the whole tensor.
async function moe() {
  const model = join(repo, '..', 'shared', 'models', 'synth-qwen3moe-256.Q4_K_M.gguf');
  if (!existsSync(model)) { console.log('skip: MoE run (no ../shared/models)'); return; }
  const dir = join(scratch, 'run-moe');
  execFileSync(bin, ['run', '-m', model, '-p', 'Once upon a time', '-n', '6', '--temp', '0', '-t', '2', '-o', dir], { stdio: 'ignore' });
  const server = await startServer([dir]);
  const browser = await launch();
  try {
    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    await page.goto(server.url, { waitUntil: 'load' });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
    const info0 = await (await fetch(`${server.url}api/runs/0/run`)).json();
    check(errors.length === 0, `MoE run: no page errors (${errors.join(' | ')})`);
    check((await inkOf(page, '#heat-canvas')) > 1000, 'MoE run: heatmap canvas has content');
    await page.selectOption('#tf-op', 'MUL_MAT_ID');
    const rows = '#table-scroll .trow[data-i]:not([data-i=""])';
    await page.waitForFunction((sel) => document.querySelector(sel)?.children[4]?.textContent === 'MUL_MAT_ID', rows);
    const count = (await page.textContent('#table-count')).replace(/[^0-9]/g, '');
    check(Number(count) === 3 * 4 * 6, `MoE run: the table lists every MUL_MAT_ID (${count} = 3 per layer, 4 layers, 6 steps)`);
    const row = page.locator(rows).nth(4);
    const i = await row.getAttribute('data-i');
    await row.click();
    await page.waitForFunction(() => Number(document.querySelector('#heat-canvas').dataset.selectedRanges) > 0);
    const shown = Number(await page.getAttribute('#heat-canvas', 'data-selected-ranges'));
    const op = (await (await fetch(`${server.url}api/runs/0/ops?i=${i}`)).json()).rows[0];
    const map = await (await fetch(`${server.url}api/runs/0/memory-map`)).json();
    const w = map.tensors.find((t) => t.name === op.inputs[0].name);
    const slab = w.size_bytes / w.shape[2];
    const ranges = op.inputs[0].ranges;
    check(op.op === 'MUL_MAT_ID' && ranges.length === shown && shown < w.shape[2],
      `MoE run: the selected ${op.name} outlines its ${shown} expert ranges of ${w.shape[2]} experts`);
    check(ranges.every((r) => r[3] === slab && (r[2] - w.offset_start) % slab === 0),
      `MoE run: each range of ${op.name} is one expert's slab of ${slab} bytes`);
    await page.locator('#heatmap').screenshot({ path: join(shots, 'moe-heatmap.png') });
    check(errors.length === 0, `MoE run: no page errors after selecting (${errors.join(' | ')})`);

    // The Experts view: a routed layer x expert cell each; the selected MUL_MAT_ID's experts outlined (the same
    // experts whose slabs it read); a generated token's k experts per layer outlined; a clicked cell's expert
    // outlined on the file heatmap, one slab per expert tensor of its layer.
    const validator = await apiValidator();
    const routingResp = await fetch(`${server.url}api/runs/0/routing`);
    const routing = await routingResp.json();
    validator.check(`${server.url}api/runs/0/routing`, routingResp.status, routing);
    validator.check(`${server.url}api/runs/0/run`, 200, info0);
    check(routingResp.status === 200 && info0.derived.routed === true, 'MoE run: routed, and /routing answers');
    const L = routing.layers.length, E = routing.n_expert, K = routing.top_k;
    check(L === 4 && E === w.shape[2] && K === 8, `MoE run: routing of ${L} layers, ${E} experts, top ${K}`);
    await page.locator('#experts').scrollIntoViewIfNeeded();
    await page.waitForFunction(() => Number(document.querySelector('#experts-canvas')?.dataset.cells) > 0);
    const exp = (k) => page.getAttribute('#experts-canvas', `data-${k}`);
    check(Number(await exp('cells')) === L * E, `Experts view: ${await exp('cells')} cells = ${L} layers x ${E} experts`);
    // Drawn once scrolled into view (the op was selected while the view was out of sight).
    await page.waitForFunction(() => Number(document.querySelector('#experts-canvas').dataset.opOutlined) > 0, null, { timeout: 10000 })
      .catch(() => {});
    check(Number(await exp('op-outlined')) === shown,
      `Experts view: the selected ${op.name} outlines the ${shown} experts it read (${await exp('op-outlined')})`);
    const last = String(info0.derived.steps - 1);
    await page.locator('#step-slider').focus();
    await page.keyboard.press('End');
    await page.waitForFunction((s) => document.querySelector('#experts-canvas').dataset.step === s, last);
    check(Number(await exp('outlined')) === K * L,
      `Experts view: generated token of step ${last} has its ${K} experts outlined in each of ${L} layers (${await exp('outlined')})`);
    check((await page.locator('#experts-weights .mono').count()) === L, 'Experts view: the token\'s weights per layer');
    const box = await page.locator('#experts-canvas').boundingBox();
    const cw = (box.width - 34) / E;
    await page.mouse.click(box.x + 34 + cw * 5.5, box.y + 22 * 1 + 11);  // layer 1, expert 5
    await page.waitForFunction(() => Number(document.querySelector('#heat-canvas').dataset.expertSlabs) > 0);
    const expTensors = map.tensors.filter((t) => t.layer === routing.layers[1] && /_exps\.weight$/.test(t.name)).length;
    check(Number(await page.getAttribute('#heat-canvas', 'data-expert-slabs')) === expTensors,
      `Experts view: selecting expert 5 of layer ${routing.layers[1]} outlines its ${expTensors} slabs on the file heatmap`);
    await page.mouse.move(0, 0);  // no tooltip in the screenshot
    await page.locator('#experts').screenshot({ path: join(shots, 'experts.png') });
    check(errors.length === 0, `MoE run: no page errors in the Experts view (${errors.join(' | ')})`);

    // The expert-cache curves: one line per policy, each the hit rates /expert-cache answers (analyze's replay) by
    // increasing size, redrawn for the scope and prefetch picked; a prefetch the run cannot do shows the server's
    // message instead of curves.
    const curvesOf = (ans) => {
      const out = {};
      for (const row of ans.results) (out[row.policy] ??= []).push(row.hit_rate);
      return out;
    };
    for (const [scope, prefetch] of [['global', 'none'], ['per-layer', 'none'], ['per-layer', 'previous-token']]) {
      await page.selectOption('#experts-cache-scope', scope);
      await page.selectOption('#experts-cache-prefetch', prefetch);
      await page.waitForFunction(([s, p]) => {
        const d = document.querySelector('#experts-cache').dataset;
        return d.scope === s && d.prefetch === p && Number(d.lines) > 0;
      }, [scope, prefetch], { timeout: 30000 });
      const url = `${server.url}api/runs/0/expert-cache?scope=${scope}&prefetch=${prefetch}`;
      const resp = await fetch(url);
      const ans = await resp.json();
      validator.check(url, resp.status, ans);
      const want = curvesOf(ans);
      const sizes = ans.results.length / 6;
      check(resp.status === 200 && Object.keys(want).length === 6 && sizes >= 2,
        `expert cache (${scope}, ${prefetch}): six policies at ${sizes} sizes`);
      const drawn = await page.getAttribute('#experts-cache', 'data-curves');
      check(drawn === JSON.stringify(want), `expert cache (${scope}, ${prefetch}): the curves drawn are the answer's hit rates`);
      check(Number(await page.getAttribute('#experts-cache', 'data-points')) === ans.results.length,
        `expert cache (${scope}, ${prefetch}): a point per (size, policy)`);
      check((await inkOf(page, '#experts-cache')) > 500, `expert cache (${scope}, ${prefetch}): the plot has content`);
    }
    const opt = curvesOf(await (await fetch(`${server.url}api/runs/0/expert-cache?scope=global`)).json());
    check(Object.values(opt).every((c) => c.every((r, i) => r <= opt.opt[i] + 1e-12)), 'expert cache: no policy beats OPT');
    await page.locator('#experts-cache').screenshot({ path: join(shots, 'experts-cache.png') });
    await page.selectOption('#experts-cache-prefetch', 'predicted');  // the run has no --moe-predict
    await page.waitForFunction(() => document.querySelector('#experts-cache').dataset.prefetch === 'predicted');
    const message = await page.textContent('#experts-cache-info');
    check(/no expert predictions/.test(message) && Number(await page.getAttribute('#experts-cache', 'data-lines')) === 0,
      `expert cache: prefetch predicted on a run without predictions shows why (${message})`);
    const unexpected = errors.filter((e) => !/status of 400/.test(e));  // the browser logs the refused request
    check(unexpected.length === 0, `MoE run: no page errors with the expert-cache curves (${unexpected.join(' | ')})`);
  } finally {
    await browser.close();
    await stopServer(server);
  }
}

// A `run --weight-budget 50%` run: the Weight cache view draws a mark per load of the answer, its occupancy never
// above the budget line; hovering a demand miss names the load; selecting a step lists that step's loads.
async function budgeted() {
  const dir = join(scratch, 'run-budget');
  execFileSync(bin, ['run', '-m', join(repo, 'models', 'stories260K.gguf'), '-p', 'Once upon a time', '-n', '12', '--temp', '0',
    '-t', '2', '--weight-budget', '50%', '-o', dir], { stdio: 'ignore' });
  const server = await startServer([dir]);
  const browser = await launch();
  try {
    const validator = await apiValidator();
    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    const pending = [];
    page.on('response', (r) => {
      if (!new URL(r.url()).pathname.startsWith('/api/')) return;
      pending.push(r.json().then((body) => validator.check(r.url(), r.status(), body), () => {}));
    });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    await page.goto(server.url, { waitUntil: 'load' });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
    check(errors.length === 0, `budgeted run: no page errors (${errors.join(' | ')})`);
    const get = async (p) => {
      const r = await fetch(server.url + p);
      const body = await r.json();
      validator.check(server.url + p, r.status, body);
      return body;
    };
    const info = await get('api/runs/0/run');
    const wc = await get('api/runs/0/weight-cache?limit=5000');
    check(info.derived.weight_budget === true && wc.total === wc.totals.accesses && wc.total > 0,
      `budgeted run: /weight-cache answers ${wc.total} loads (${wc.totals.misses} misses)`);
    check(wc.occupancy.every((v) => v <= wc.budget_bytes) && Math.max(...wc.occupancy) > 0,
      `budgeted run: the occupancy stays within the budget of ${wc.budget_bytes} bytes`);
    await page.locator('#weight-cache').scrollIntoViewIfNeeded();
    await page.waitForFunction(() => Number(document.querySelector('#weight-cache-canvas')?.dataset.marks) > 0, null, { timeout: 10000 });
    const d = await page.evaluate(() => ({ ...document.querySelector('#weight-cache-canvas').dataset }));
    check(Number(d.marks) === wc.total && Number(d.total) === wc.total, `Weight cache view: a mark per load (${d.marks} = ${wc.total})`);
    check(d.over === '0' && Number(d.occupancyTopY) >= Number(d.budgetY),
      `Weight cache view: the occupancy never rises above the budget line (top y ${d.occupancyTopY} ≥ budget y ${d.budgetY})`);
    check((await inkOf(page, '#weight-cache-canvas')) > 1000, 'Weight cache view: the chart has content');
    const [mx, my] = d.firstMiss.split(',').map(Number);
    const box = await page.locator('#weight-cache-canvas').boundingBox();
    await page.mouse.move(box.x + mx, box.y + my);
    await page.waitForSelector('#tooltip', { state: 'visible' });
    const tip = await page.textContent('#tooltip');
    const first = wc.loads.find((l) => !l[10] && !l[11]);
    check(tip.includes('demand miss') && tip.includes('wait') && tip.includes(first[3]),
      `Weight cache view: hovering a miss names its load (${tip.slice(0, 90)})`);
    await page.mouse.move(0, 0);
    await page.locator('#step-slider').focus();
    await page.keyboard.press('End');
    const last = info.derived.steps - 1;
    await page.waitForFunction((s) => document.querySelector('#weight-cache-loads')?.dataset.step === String(s), last, { timeout: 10000 });
    const inStep = wc.loads.filter((l) => l[1] === last).length;
    check(Number(await page.getAttribute('#weight-cache-loads', 'data-rows')) === inStep,
      `Weight cache view: selecting step ${last} lists its ${inStep} loads`);
    await page.locator('#weight-cache').screenshot({ path: join(shots, 'weight-cache.png') });
    check(Number(await page.getAttribute('#heat-canvas', 'data-storage-bins')) > 0,
      'budgeted run: the file heatmap marks the bytes read from storage');
    await get('api/runs/0/weight-cache?step=1&offset=2&limit=3&px=5');
    await get('api/runs/0/weight-cache?px=0');
    await Promise.all(pending);
    check(validator.seen.has('weight-cache'), 'budgeted run: /weight-cache answers validated against web/src/api.ts');
    check(errors.length === 0, `budgeted run: no page errors after hovering and selecting (${errors.join(' | ')})`);
  } finally {
    await browser.close();
    await stopServer(server);
  }
}

main().then(() => (measureDir ? null : moe().then(budgeted))).catch((e) => { console.error(e); failures++; }).finally(() => {
  rmSync(scratch, { recursive: true, force: true });
  console.log(failures ? `${failures} failure(s)` : 'all e2e checks passed');
  process.exit(failures ? 1 : 0);
});
