// Small DOM helpers shared by the views.

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, any> = {},
  ...children: (Node | string | null | undefined)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'style' && typeof v === 'object') Object.assign(e.style, v);
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k in e && typeof v !== 'string') (e as any)[k] = v;
    else e.setAttribute(k, String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// A canvas sized to its CSS box at the device pixel ratio; returns the 2D context in CSS pixels.
export function fitCanvas(c: HTMLCanvasElement, height: number): CanvasRenderingContext2D {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(50, c.parentElement ? c.parentElement.clientWidth : 800);
  c.style.width = `${w}px`;
  c.style.height = `${height}px`;
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(height * dpr)) {
    c.width = Math.round(w * dpr);
    c.height = Math.round(height * dpr);
  }
  const ctx = c.getContext('2d')!;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

export function cssWidth(c: HTMLCanvasElement): number { return parseFloat(c.style.width) || c.clientWidth; }

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

export function debounce<T extends unknown[]>(fn: (...a: T) => void, ms: number): (...a: T) => void {
  let h: ReturnType<typeof setTimeout> | undefined;
  return (...a: T) => { if (h) clearTimeout(h); h = setTimeout(() => fn(...a), ms); };
}
