// Small DOM helpers shared by the views.
import { heatRGB } from './transforms';

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, unknown> = {},
  ...children: (Node | string | null | undefined)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = String(v);
    else if (k === 'style' && typeof v === 'object') Object.assign(e.style, v);
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v as EventListener);
    else if (k in e && typeof v !== 'string') (e as unknown as Record<string, unknown>)[k] = v;
    else e.setAttribute(k, String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// Widths of canvas containers, kept by a ResizeObserver so drawing never forces a synchronous layout (reading
// clientWidth after another view changed the DOM re-lays out the whole page: 5–40 ms per canvas on a step change).
const knownWidth = new WeakMap<Element, number>();
// An element taken out of the page (a run switch replaces the views) is reported once more and let go.
const widthObserver = typeof ResizeObserver === 'undefined' ? null : new ResizeObserver((entries) => {
  for (const e of entries) {
    if (!e.target.isConnected) { widthObserver?.unobserve(e.target); knownWidth.delete(e.target); continue; }
    knownWidth.set(e.target, (e.target as HTMLElement).clientWidth);  // fresh layout here
  }
});
// A window resize invalidates them before the views' own resize handlers redraw.
if (typeof window !== 'undefined') window.addEventListener('resize', () => {
  for (const c of document.querySelectorAll('canvas')) if (c.parentElement) knownWidth.delete(c.parentElement);
});

function containerWidth(c: HTMLCanvasElement): number {
  const parent = c.parentElement;
  if (!parent) return 800;
  let w = knownWidth.get(parent);
  if (w === undefined) {
    w = parent.clientWidth;
    knownWidth.set(parent, w);
    widthObserver?.observe(parent);
  }
  return w;
}

// A canvas sized to its CSS box at the device pixel ratio; returns the 2D context in CSS pixels.
export function fitCanvas(c: HTMLCanvasElement, height: number): CanvasRenderingContext2D {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(50, containerWidth(c));
  const cssW = `${w}px`, cssH = `${height}px`;
  if (c.style.width !== cssW) c.style.width = cssW;
  if (c.style.height !== cssH) c.style.height = cssH;
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(height * dpr)) {
    c.width = Math.round(w * dpr);
    c.height = Math.round(height * dpr);
  }
  const ctx = c.getContext('2d')!;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

// Redraws a view at the next frame while it is on screen; off screen it only remembers that it is out of date and
// redraws when scrolled into view (a step change then costs nothing for the views below the fold). `signal` ends the
// watching (the view's lifetime).
export function whenVisible(root: Element, draw: () => void, signal: AbortSignal): () => void {
  let visible = true, dirty = false, pending = false;
  const frame = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; dirty = false; draw(); });
  };
  if (typeof IntersectionObserver !== 'undefined') {
    const observer = new IntersectionObserver((entries) => {
      visible = entries[entries.length - 1].isIntersecting;
      if (visible && dirty) frame();
    }, { rootMargin: '100px' });
    observer.observe(root);
    signal.addEventListener('abort', () => observer.disconnect());
  }
  return () => {
    if (signal.aborted) return;
    dirty = true;
    if (visible) frame();
  };
}

// Draws one intensity value per bin (heat ramp, 0 transparent) stretched over [x, x + w) × [y, y + h) as a single
// image: thousands of bins cost one drawImage instead of a fillRect and a color string each.
let rowCanvas: HTMLCanvasElement | null = null;
export function drawHeatRow(g: CanvasRenderingContext2D, values: number[], max: number, x: number, y: number, w: number,
  h: number): { nonzero: number; sum: number } {
  let nonzero = 0, sum = 0;
  const n = values.length;
  if (!n) return { nonzero, sum };
  rowCanvas ??= document.createElement('canvas');
  if (rowCanvas.width < n) rowCanvas.width = n;
  rowCanvas.height = 1;
  const rc = rowCanvas.getContext('2d')!;
  const img = rc.createImageData(n, 1);
  for (let i = 0; i < n; i++) {
    const c = heatRGB(values[i], max);
    if (!c) continue;
    nonzero++;
    sum += values[i];
    img.data.set([c[0], c[1], c[2], 255], i * 4);
  }
  rc.putImageData(img, 0, 0);
  const smoothing = g.imageSmoothingEnabled;
  g.imageSmoothingEnabled = false;
  g.drawImage(rowCanvas, 0, 0, n, 1, x, y, w, h);
  g.imageSmoothingEnabled = smoothing;
  return { nonzero, sum };
}

// The canvas's width in CSS pixels; before its first draw, the width fitCanvas will give it (a canvas's own default
// is 300 px: the first heatmap and timeline were fetched at that resolution).
export function cssWidth(c: HTMLCanvasElement): number { return parseFloat(c.style.width) || Math.max(50, containerWidth(c)); }

// A canvas background that depends only on the canvas size, rendered once per size into an offscreen copy and
// blitted on every redraw (a step change then only draws its marker on top). paint() clears `g`, copies the layer
// and leaves `g` scaled to CSS pixels (W x H) for what the caller draws next.
export class CachedLayer {
  private layer: HTMLCanvasElement | null = null;

  paint(canvas: HTMLCanvasElement, g: CanvasRenderingContext2D, W: number, H: number,
        render: (bg: CanvasRenderingContext2D) => void): void {
    if (!this.layer || this.layer.width !== canvas.width || this.layer.height !== canvas.height) {
      this.layer = document.createElement('canvas');
      this.layer.width = canvas.width;
      this.layer.height = canvas.height;
      const bg = this.layer.getContext('2d')!;
      bg.setTransform(canvas.width / W, 0, 0, canvas.height / H, 0, 0);
      render(bg);
    }
    g.setTransform(1, 0, 0, 1, 0, 0);
    g.clearRect(0, 0, canvas.width, canvas.height);
    g.drawImage(this.layer, 0, 0);
    g.setTransform(canvas.width / W, 0, 0, canvas.height / H, 0, 0);
  }
}

const tip = () => document.getElementById('tooltip') as HTMLDivElement;

export function showTip(x: number, y: number, html: string, owner: string) {
  const t = tip();
  t.innerHTML = html;
  t.dataset.owner = owner;
  t.style.display = 'block';
  const r = t.getBoundingClientRect();
  const left = Math.min(window.innerWidth - r.width - 8, x + 14);
  const top = y + 16 + r.height > window.innerHeight ? y - r.height - 8 : y + 16;
  t.style.left = `${Math.max(4, left)}px`;
  t.style.top = `${Math.max(4, top)}px`;
}

export function hideTip(owner?: string) {
  const t = tip();
  if (owner && t.dataset.owner !== owner) return;
  t.style.display = 'none';
}

export function esc(s: unknown): string {
  return String(s ?? '').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]!));
}

// Visible token text: spaces and control bytes shown.
export function tokenText(s: string | null | undefined): string {
  if (s === null || s === undefined) return '∅';
  return s.replace(/\n/g, '⏎').replace(/ /g, '·');
}

export function panel(id: string, title: string, ...controls: (Node | string)[]): { root: HTMLElement; body: HTMLElement } {
  const body = el('div', { class: 'panel-body' });
  const root = el('section', { class: 'panel', id }, el('header', {}, el('h2', {}, title), ...controls), body);
  return { root, body };
}

// Runs fn at most once per animation frame.
export function rafThrottle(fn: () => void): () => void {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; fn(); });
  };
}

// Runs fn at once for the first call of a burst (a single wheel notch answers without waiting), then once more
// `ms` after the burst's last call if there were more (continuous wheeling or dragging: one trailing run).
export function leadingDebounce(fn: () => void, ms: number): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let more = false;
  const settle = () => {
    timer = undefined;
    if (more) { more = false; fn(); }
  };
  return () => {
    if (timer === undefined) fn(); else { more = true; clearTimeout(timer); }
    timer = setTimeout(settle, ms);
  };
}

export function debounce<T extends unknown[]>(fn: (...a: T) => void, ms: number): (...a: T) => void {
  let h: ReturnType<typeof setTimeout> | undefined;
  return (...a: T) => { if (h) clearTimeout(h); h = setTimeout(() => fn(...a), ms); };
}
