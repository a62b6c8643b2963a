// What every view of one run gets: its API, run info, memory map and the shared selection.
import type { MemoryMap, OpRow, RunApi, RunInfo } from './api';
import type { Store } from './state';
import type { MapTensor } from './transforms';

export interface IndexedTensor extends MapTensor { idx: number }

export interface Ctx {
  api: RunApi;
  info: RunInfo;
  map: MemoryMap;
  store: Store;
  nLayers: number;
  stepTimes: [number, number, string][];  // per step: start_ns, end_ns, phase
  tensors: IndexedTensor[];               // sorted by offset
  tensorByName: Map<string, IndexedTensor>;
  opByIndex(i: number): Promise<OpRow>;
  // the timeline's visible time window, shared with the buffers chart
  timeWindow: [number, number];
  onTimeWindow: Set<() => void>;
}

export function makeCtx(api: RunApi, info: RunInfo, map: MemoryMap, store: Store): Ctx {
  const tensors = map.tensors.map((t, idx) => ({ ...t, idx })).sort((a, b) => a.offset_start - b.offset_start);
  const nLayers = info.run?.model?.config?.n_layer ??
    (Math.max(-1, ...map.tensors.map((t) => t.layer ?? -1)) + 1);
  const cache = new Map<number, Promise<OpRow>>();
  const stepTimes = info.derived.step_times;
  return {
    api, info, map, store, nLayers, stepTimes, tensors,
    tensorByName: new Map(tensors.map((t) => [t.name, t])),
    opByIndex(i: number) {
      if (!cache.has(i)) cache.set(i, api.ops({ i }).then((p) => p.rows[0]));
      return cache.get(i)!;
    },
    timeWindow: [0, Math.max(1, info.derived.t_end_ns)],
    onTimeWindow: new Set(),
  };
}
