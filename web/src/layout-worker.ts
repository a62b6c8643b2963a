// Runs layeredLayout off the main thread: every node of a step at once takes ~80 ms on a cold start, which would
// hold up whatever the user does meanwhile. The answer carries the node map as entries (structured clone).
import { layeredLayout, type LayoutInputEdge, type LayoutInputNode } from './layout';

export interface LayoutRequest { id: number; nodes: LayoutInputNode[]; edges: LayoutInputEdge[] }

const scope = self as unknown as { onmessage: ((ev: MessageEvent<LayoutRequest>) => void) | null; postMessage(m: unknown): void };
scope.onmessage = (ev) => {
  const { id, nodes, edges } = ev.data;
  const l = layeredLayout(nodes, edges);
  scope.postMessage({ id, layout: { ...l, nodes: [...l.nodes] } });
};
