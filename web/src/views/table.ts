// Trace table: every op record, virtualized (only visible rows exist in the DOM; pages fetched on demand),
// filtered server-side by step, phase, layer, op kind and name.
import type { OpRow, Query } from '../api';
import type { Ctx } from '../context';
import { formatBytes, OP_COLORS, OP_KINDS, shapeString } from '../transforms';
import { debounce, el, panel } from '../ui';
import type { View } from '../view';

const ROW_H = 22, PAGE = 200;

export function tableView(ctx: Ctx): View {
  const scope = el('select', { id: 'tf-scope', 'aria-label': 'steps' }, el('option', { value: 'all' }, 'all steps'),
    el('option', { value: 'step' }, 'selected step'));
  const phase = el('select', { id: 'tf-phase', 'aria-label': 'phase' }, el('option', { value: '' }, 'any phase'),
    el('option', { value: 'PROMPT' }, 'PROMPT'), el('option', { value: 'GENERATE' }, 'GENERATE'));
  const layer = el('select', { id: 'tf-layer', 'aria-label': 'layer' }, el('option', { value: '' }, 'any layer'),
    el('option', { value: '-1' }, 'no layer'),
    ...Array.from({ length: ctx.nLayers }, (_, l) => el('option', { value: String(l) }, `layer ${l}`)));
  const op = el('select', { id: 'tf-op', 'aria-label': 'op kind' }, el('option', { value: '' }, 'any op'),
    ...OP_KINDS.map((k) => el('option', { value: k }, k)));
  const name = el('input', { id: 'tf-name', type: 'search', placeholder: 'name contains…', 'aria-label': 'name' });
  const count = el('span', { class: 'muted', id: 'table-count' });
  const { root, body } = panel('table', 'Trace table', scope, phase, layer, op, name, count);
  const head = el('div', { class: 'trow thead' }, ...['step', 'node', 'phase', 'layer', 'op', 'name', 'thr', 'start µs', 'dur µs', 'shape', 'type', 'file', 'buffers'].map((h) => el('span', {}, h)));
  const spacer = el('div', { class: 'spacer' });
  const scroller = el('div', { class: 'tscroll', tabindex: 0, id: 'table-scroll' }, spacer);
  body.append(head, scroller);

  let total = 0;
  let pages = new Map<number, Promise<OpRow[]> | OpRow[]>();
  let selectedPos = -1;
  let gen = 0;

  function filter(): Query {
    const f: Query = {};
    if (scope.value === 'step') f.step = ctx.store.sel.step;
    if (phase.value) f.phase = phase.value;
    if (layer.value !== '') f.layer = layer.value;
    if (op.value) f.op = op.value;
    if (name.value) f.name = name.value;
    return f;
  }

  async function reset() {
    const my = ++gen;
    pages = new Map();
    const first = await ctx.api.ops({ ...filter(), offset: 0, limit: PAGE });
    if (my !== gen) return;
    total = first.total;
    pages.set(0, first.rows);
    spacer.style.height = `${total * ROW_H}px`;
    count.textContent = `${total.toLocaleString()} ops`;
    selectedPos = -1;
    const sel = ctx.store.sel.op;
    if (sel) await locate(sel.i, false);
    render();
  }

  function page(p: number): OpRow[] | null {
    const v = pages.get(p);
    if (Array.isArray(v)) return v;
    if (!v) {
      const my = gen;
      const pr = ctx.api.ops({ ...filter(), offset: p * PAGE, limit: PAGE }).then((r) => {
        if (my === gen) { pages.set(p, r.rows); render(); }
        return r.rows;
      });
      pages.set(p, pr);
    }
    return null;
  }
  function rowAt(pos: number): OpRow | null {
    const p = page(Math.floor(pos / PAGE));
    return p ? p[pos % PAGE] ?? null : null;
  }

  const pool: HTMLElement[] = [];
  function render() {
    const top = scroller.scrollTop, h = scroller.clientHeight || 400;
    const first = Math.max(0, Math.floor(top / ROW_H) - 5);
    const last = Math.min(total, Math.ceil((top + h) / ROW_H) + 5);
    let k = 0;
    for (let pos = first; pos < last; pos++, k++) {
      let row = pool[k];
      if (!row) { row = el('div', { class: 'trow' }); pool.push(row); spacer.append(row); }
      row.style.transform = `translateY(${pos * ROW_H}px)`;
      row.style.display = '';
      const r = rowAt(pos);
      row.dataset.pos = String(pos);
      row.classList.toggle('selected', pos === selectedPos);
      if (!r) { row.dataset.i = ''; row.textContent = '…'; continue; }
      if (row.dataset.i === String(r.i)) continue;
      row.dataset.i = String(r.i);
      row.dataset.node = String(r.node);
      row.dataset.step = String(r.step);
      const cells = [r.step, r.node, r.phase, r.layer ?? '—', r.op, r.name, r.n_threads ? r.thread : '—',
        (r.start_ns / 1e3).toFixed(1), ((r.end_ns - r.start_ns) / 1e3).toFixed(1), shapeString(r.shape), r.type,
        r.file_bytes ? formatBytes(r.file_bytes) : '', r.buffer_bytes ? formatBytes(r.buffer_bytes) : ''];
      row.replaceChildren(...cells.map((c, j) => {
        const s = el('span', {}, String(c));
        if (j === 4) s.style.color = OP_COLORS[r.op] ?? '';
        return s;
      }));
    }
    for (; k < pool.length; k++) pool[k].style.display = 'none';
  }

  async function select(pos: number) {
    if (pos < 0 || pos >= total) return;
    selectedPos = pos;
    ensureVisible(pos);
    let r = rowAt(pos);
    if (!r) { await pages.get(Math.floor(pos / PAGE)); r = rowAt(pos); }
    render();
    if (r) { ignoreOp = true; ctx.store.setOp(r); ignoreOp = false; }
  }
  function ensureVisible(pos: number) {
    const y = pos * ROW_H, h = scroller.clientHeight;
    if (y < scroller.scrollTop) scroller.scrollTop = y;
    else if (y + ROW_H > scroller.scrollTop + h) scroller.scrollTop = y + ROW_H - h;
  }
  async function locate(i: number, center = true) {
    const r = await ctx.api.ops({ ...filter(), limit: 0, locate: i });
    if (r.located === null || r.located === undefined) { selectedPos = -1; render(); return; }
    selectedPos = r.located;
    if (center) scroller.scrollTop = Math.max(0, selectedPos * ROW_H - scroller.clientHeight / 2);
    else ensureVisible(selectedPos);
    render();
  }

  scroller.addEventListener('scroll', () => requestAnimationFrame(render));
  scroller.addEventListener('click', (ev) => {
    const row = (ev.target as HTMLElement).closest('.trow') as HTMLElement | null;
    if (row?.dataset.pos) { select(Number(row.dataset.pos)); scroller.focus(); }
  });
  scroller.addEventListener('keydown', (ev) => {
    const vis = Math.max(1, Math.floor(scroller.clientHeight / ROW_H) - 1);
    const moves: Record<string, number> = { ArrowDown: 1, ArrowUp: -1, PageDown: vis, PageUp: -vis, j: 1, k: -1 };
    let to = -1;
    if (ev.key in moves) to = Math.max(0, Math.min(total - 1, (selectedPos < 0 ? 0 : selectedPos) + moves[ev.key]));
    else if (ev.key === 'Home') to = 0;
    else if (ev.key === 'End') to = total - 1;
    else return;
    ev.preventDefault();
    ev.stopPropagation();
    select(to);
  });
  for (const c of [scope, phase, layer, op]) c.addEventListener('change', reset);
  name.addEventListener('input', debounce(reset, 200));
  let ignoreOp = false;
  ctx.store.on('op', () => { if (!ignoreOp && ctx.store.sel.op) locate(ctx.store.sel.op.i); });
  ctx.store.on('step', () => { if (scope.value === 'step') reset(); });
  // Listens only to its own elements and the run's store, which go with the run.
  return { element: root, start: reset, dispose: () => {} };
}
