// Compare mode (two runs): time per op kind and per layer, bytes, and the chosen tokens side by side.
import type { RunEntry, Summary } from '../api';
import { compareBy, compareTokens, formatBytes, formatNs, OP_COLORS } from '../transforms';
import { el, panel, tokenText } from '../ui';
import type { View } from '../view';

export function compareView(runs: RunEntry[], a: Summary, b: Summary, onStep: (s: number) => void): View {
  const { root, body } = panel('compare', `Compare: A = ${runs[0].name} · B = ${runs[1].name}`);
  const pct = (r: number | null) => (r === null ? '—' : `${r >= 1 ? '+' : ''}${((r - 1) * 100).toFixed(1)}%`);
  const diffCls = (r: number | null) => (r === null ? '' : r > 1.05 ? 'worse' : r < 0.95 ? 'better' : '');
  const kinds = compareBy(a.op_kinds.map((k) => ({ key: k.op, value: k.ns })), b.op_kinds.map((k) => ({ key: k.op, value: k.ns })))
    .sort((x, y) => Math.max(y.a, y.b) - Math.max(x.a, x.b));
  const kindTable = el('table', { id: 'compare-ops' }, el('tr', {}, ...['op', 'A', 'B', 'B − A', 'B / A'].map((h) => el('th', {}, h))),
    ...kinds.map((r) => el('tr', {}, el('td', { style: { color: OP_COLORS[r.key] } }, r.key), el('td', {}, formatNs(r.a)), el('td', {}, formatNs(r.b)),
      el('td', {}, formatNs(r.diff)), el('td', { class: diffCls(r.ratio) }, pct(r.ratio)))));
  const lk = (s: Summary) => s.layers.map((l) => ({ key: l.layer === null ? 'no layer' : `L${l.layer}`, value: l.ns }));
  const layerTable = el('table', {}, el('tr', {}, ...['layer', 'A', 'B', 'B / A'].map((h) => el('th', {}, h))),
    ...compareBy(lk(a), lk(b)).map((r) => el('tr', {}, el('td', {}, r.key), el('td', {}, formatNs(r.a)), el('td', {}, formatNs(r.b)),
      el('td', { class: diffCls(r.ratio) }, pct(r.ratio)))));
  const tot = (s: Summary, k: 'file_bytes' | 'buffer_bytes' | 'op_ns') => s.steps.reduce((acc, x) => acc + (x[k] ?? 0), 0);
  const bytes = compareBy([{ key: 'file bytes', value: tot(a, 'file_bytes') }, { key: 'buffer bytes', value: tot(a, 'buffer_bytes') },
    { key: 'peak memory', value: a.peak_buffer_bytes }],
  [{ key: 'file bytes', value: tot(b, 'file_bytes') }, { key: 'buffer bytes', value: tot(b, 'buffer_bytes') }, { key: 'peak memory', value: b.peak_buffer_bytes }]);
  const bytesTable = el('table', {}, el('tr', {}, ...['', 'A', 'B', 'B / A'].map((h) => el('th', {}, h))),
    el('tr', {}, el('td', {}, 'op time'), el('td', {}, formatNs(tot(a, 'op_ns'))), el('td', {}, formatNs(tot(b, 'op_ns'))),
      el('td', {}, pct(tot(a, 'op_ns') ? tot(b, 'op_ns') / tot(a, 'op_ns') : null))),
    ...bytes.map((r) => el('tr', {}, el('td', {}, r.key), el('td', {}, formatBytes(r.a)), el('td', {}, formatBytes(r.b)), el('td', { class: diffCls(r.ratio) }, pct(r.ratio)))));
  const tk = compareTokens(a.steps, b.steps);
  const tokens = el('div', { class: 'tokens', id: 'compare-tokens' },
    ...tk.same.map((same, i) => el('span', { class: `tokpair${same ? '' : ' differ'}`, title: `step ${i}`, onclick: () => onStep(i) },
      el('span', {}, tokenText(a.steps[i]?.token_text)), el('span', {}, same ? '' : tokenText(b.steps[i]?.token_text)))));
  body.append(el('div', { class: 'summary-grid' },
    el('div', { class: 'card' }, el('h3', {}, 'time per op kind'), kindTable),
    el('div', { class: 'card' }, el('h3', {}, 'time per layer'), layerTable),
    el('div', { class: 'card' }, el('h3', {}, 'totals'), bytesTable),
    el('div', { class: 'card wide' }, el('h3', {}, tk.firstDiff < 0 ? 'tokens: identical' : `tokens: first difference at step ${tk.firstDiff} (A above, B below where they differ)`), tokens)));
  return { element: root, dispose: () => {} };  // nothing outside its elements
}
