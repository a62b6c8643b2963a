// What every view of a run is to the page (main.ts): its element, how it starts loading, and how it ends.

export interface View {
  readonly element: HTMLElement;
  // Fetches and draws the view's first content (the page waits for it to tell when the view is ready).
  start?(): Promise<void> | void;
  // Ends everything the view keeps running outside its own elements (window and document listeners, timers,
  // workers, observers, requests), so a run switch leaves nothing of the old run's views behind.
  dispose(): void;
}

// What a view registers outside its own elements, ended together: listeners take `signal`
// (addEventListener(type, fn, { signal })), anything else adds its teardown.
export class Lifetime {
  private readonly controller = new AbortController();
  private readonly teardowns: (() => void)[] = [];
  readonly signal: AbortSignal = this.controller.signal;

  add(teardown: () => void): void {
    if (this.signal.aborted) teardown(); else this.teardowns.push(teardown);
  }

  dispose(): void {
    if (this.signal.aborted) return;
    this.controller.abort();
    for (const t of this.teardowns.splice(0)) t();
  }
}
