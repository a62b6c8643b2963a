// The shared selection: every view listens and highlights what the others selected.
import type { OpRow } from './api';

export interface Selection {
  step: number;
  op: OpRow | null;          // selected op (table, graph, timeline)
  tensor: string | null;     // selected weight tensor (heatmap, graph leaf)
  range: [number, number] | null;  // selected byte range of the model file
  expert: { layer: number; expert: number } | null;  // selected expert of a mixture-of-experts model (Experts view)
}

type Key = 'step' | 'op' | 'tensor' | 'range' | 'cumulative' | 'expert';

export class Store {
  sel: Selection = { step: 0, op: null, tensor: null, range: null, expert: null };
  cumulative = true;
  private listeners = new Map<Key, Set<() => void>>();

  on(key: Key, fn: () => void) {
    if (!this.listeners.has(key)) this.listeners.set(key, new Set());
    this.listeners.get(key)!.add(fn);
  }
  private emit(key: Key) { for (const fn of this.listeners.get(key) ?? []) fn(); }

  setStep(step: number) {
    if (step === this.sel.step) return;
    this.sel.step = step;
    this.emit('step');
  }
  setOp(op: OpRow | null) {
    this.sel.op = op;
    if (op && op.step !== this.sel.step) { this.sel.step = op.step; this.emit('step'); }
    this.emit('op');
  }
  setTensor(name: string | null, range: [number, number] | null) {
    this.sel.tensor = name;
    this.sel.range = range;
    this.emit('tensor');
  }
  setExpert(e: { layer: number; expert: number } | null) { this.sel.expert = e; this.emit('expert'); }
  setCumulative(c: boolean) { this.cumulative = c; this.emit('cumulative'); }
}
