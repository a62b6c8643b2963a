// A small runtime schema for JSON: each shape is written once as a value, its TypeScript type is derived from it
// (Infer), and validate() checks a live answer against it (the e2e test does, for every answer of the server), so
// the client's types cannot drift from what the server sends. Objects are exact: a key the schema does not name is
// an error unless the object is declared open.

export interface Schema<T> {
  readonly describe: string;
  check(value: unknown, path: string, errors: string[]): void;
  readonly __type?: T;  // carries T for Infer; never set
}
export type Infer<S> = S extends Schema<infer T> ? T : never;

interface Optional<T> extends Schema<T> { readonly optional: true }
type Shape = Record<string, Schema<unknown>>;
type OptionalKeys<P extends Shape> = { [K in keyof P]: P[K] extends Optional<unknown> ? K : never }[keyof P];
type Flatten<T> = { [K in keyof T]: T[K] } & {};
export type ObjectOf<P extends Shape> = Flatten<{ [K in Exclude<keyof P, OptionalKeys<P>>]: Infer<P[K]> } &
  { [K in OptionalKeys<P>]?: Infer<P[K]> }>;

const kind = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function leaf<T>(describe: string, ok: (v: unknown) => boolean): Schema<T> {
  return { describe, check(v, path, errors) { if (!ok(v)) errors.push(`${path}: expected ${describe}, got ${kind(v)}`); } };
}

export const num = leaf<number>('number', (v) => typeof v === 'number');
export const str = leaf<string>('string', (v) => typeof v === 'string');
export const bool = leaf<boolean>('boolean', (v) => typeof v === 'boolean');

export function literal<const L extends string>(value: L): Schema<L> {
  return leaf<L>(JSON.stringify(value), (v) => v === value);
}

export function nullable<T>(s: Schema<T>): Schema<T | null> {
  return {
    describe: `${s.describe} or null`,
    check(v, path, errors) {
      if (v === null) return;
      const own: string[] = [];
      s.check(v, path, own);
      // a mismatch of the value itself names both choices; those inside it stay as they are
      for (const e of own) errors.push(e.startsWith(`${path}: `) ? `${path}: expected ${this.describe}, got ${kind(v)}` : e);
    },
  };
}

// A key that may be absent (not the same as null).
export function optional<T>(s: Schema<T>): Optional<T> {
  return { describe: `${s.describe} (optional)`, optional: true, check: s.check.bind(s) };
}

export function array<T>(s: Schema<T>): Schema<T[]> {
  return {
    describe: `array of ${s.describe}`,
    check(v, path, errors) {
      if (!Array.isArray(v)) { errors.push(`${path}: expected ${this.describe}, got ${kind(v)}`); return; }
      v.forEach((x, i) => s.check(x, `${path}[${i}]`, errors));
    },
  };
}

export function tuple<const S extends readonly Schema<unknown>[]>(...items: S):
  Schema<{ -readonly [K in keyof S]: Infer<S[K]> }> {
  return {
    describe: `[${items.map((s) => s.describe).join(', ')}]`,
    check(v, path, errors) {
      if (!Array.isArray(v) || v.length !== items.length) {
        errors.push(`${path}: expected ${items.length} elements, got ${Array.isArray(v) ? v.length : kind(v)}`);
        return;
      }
      items.forEach((s, i) => s.check(v[i], `${path}[${i}]`, errors));
    },
  };
}

// A tuple whose last elements may be missing.
export function tupleWithOptionalTail<const S extends readonly Schema<unknown>[], const T extends readonly Schema<unknown>[]>(
  head: S, tail: T): Schema<[...{ -readonly [K in keyof S]: Infer<S[K]> }, ...Partial<{ -readonly [K in keyof T]: Infer<T[K]> }>]> {
  const all = [...head, ...tail];
  return {
    describe: `[${head.map((s) => s.describe).join(', ')}(, ${tail.map((s) => s.describe).join(', ')})]`,
    check(v, path, errors) {
      if (!Array.isArray(v) || (v.length !== head.length && v.length !== all.length)) {
        errors.push(`${path}: expected ${head.length} or ${all.length} elements, got ${Array.isArray(v) ? v.length : kind(v)}`);
        return;
      }
      v.forEach((x, i) => all[i].check(x, `${path}[${i}]`, errors));
    },
  };
}

export function record<T>(s: Schema<T>): Schema<Record<string, T>> {
  return {
    describe: `object of ${s.describe}`,
    check(v, path, errors) {
      if (kind(v) !== 'object') { errors.push(`${path}: expected ${this.describe}, got ${kind(v)}`); return; }
      for (const [k, x] of Object.entries(v as object)) s.check(x, `${path}.${k}`, errors);
    },
  };
}

function objectSchema<P extends Shape>(shape: P, open: boolean): Schema<ObjectOf<P>> {
  return {
    describe: 'object',
    check(v, path, errors) {
      if (kind(v) !== 'object') { errors.push(`${path}: expected object, got ${kind(v)}`); return; }
      const o = v as Record<string, unknown>;
      for (const [k, s] of Object.entries(shape)) {
        if (k in o) s.check(o[k], `${path}.${k}`, errors);
        else if (!('optional' in s)) errors.push(`${path}.${k}: missing`);
      }
      if (!open) for (const k of Object.keys(o)) if (!(k in shape)) errors.push(`${path}.${k}: not in the schema`);
    },
  };
}
// Exactly these keys (the optional ones may be absent).
export const object = <P extends Shape>(shape: P) => objectSchema(shape, false);
// These keys and any others (a document the viewer reads only parts of).
export const openObject = <P extends Shape>(shape: P) => objectSchema(shape, true);

// One of several object shapes told apart by the string value of `key` (the variants' own literal).
export function tagged<V extends Record<string, Schema<unknown>>>(key: string, variants: V): Schema<Infer<V[keyof V]>> {
  const names = Object.keys(variants).join(', ');
  return {
    describe: `object by ${key} (${names})`,
    check(v, path, errors) {
      const tag = kind(v) === 'object' ? (v as Record<string, unknown>)[key] : undefined;
      const s = typeof tag === 'string' && Object.hasOwn(variants, tag) ? variants[tag] : undefined;
      if (!s) { errors.push(`${path}.${key}: expected one of ${names}, got ${JSON.stringify(tag)}`); return; }
      s.check(v, path, errors);
    },
  };
}

// Every mismatch of `value` against `s`, as "path: problem" lines (empty: it matches).
export function validate<T>(s: Schema<T>, value: unknown, path = '$'): string[] {
  const errors: string[] = [];
  s.check(value, path, errors);
  return errors;
}
