import { describe, expect, it } from 'vitest';
import { RunInfo, Spans, StepRow } from '../src/api';
import { array, bool, literal, nullable, num, object, openObject, optional, record, str, tagged, tuple, tupleWithOptionalTail, validate } from '../src/schema';

describe('schema validation', () => {
  const S = object({ a: num, b: nullable(str), c: optional(array(bool)), d: tuple(num, str), e: record(num) });
  it('accepts what matches, optional keys absent or present', () => {
    expect(validate(S, { a: 1, b: null, d: [1, 'x'], e: {} })).toEqual([]);
    expect(validate(S, { a: 1, b: 'y', c: [true], d: [1, 'x'], e: { k: 2 } })).toEqual([]);
  });
  it('names each missing key, wrong type and key not in the schema by its path', () => {
    expect(validate(S, { b: 1, c: [1], d: [1], e: { k: 'v' }, extra: 0 })).toEqual([
      '$.a: missing', '$.b: expected string or null, got number', '$.c[0]: expected boolean, got number',
      '$.d: expected 2 elements, got 1', '$.e.k: expected number, got string', '$.extra: not in the schema']);
    expect(validate(S, [])).toEqual(['$: expected object, got array']);
  });
  it('lets an open object carry other keys, still checking the named ones', () => {
    const O = openObject({ n: optional(num) });
    expect(validate(O, { n: 1, other: 'x' })).toEqual([]);
    expect(validate(O, { n: 'x' })).toEqual(['$.n: expected number, got string']);
  });
  it('tells tagged variants apart and takes optional tuple tails', () => {
    const T = tagged('mode', { a: object({ mode: literal('a'), x: num }), b: object({ mode: literal('b') }) });
    expect(validate(T, { mode: 'a', x: 1 })).toEqual([]);
    expect(validate(T, { mode: 'b', x: 1 })).toEqual(['$.x: not in the schema']);
    expect(validate(T, { mode: 'c' })).toEqual(['$.mode: expected one of a, b, got "c"']);
    const R = tupleWithOptionalTail([str, num], [num]);
    expect(validate(R, ['x', 1])).toEqual([]);
    expect(validate(R, ['x', 1, 2])).toEqual([]);
    expect(validate(R, ['x'])).toEqual(['$: expected 2 or 3 elements, got 1']);
  });
  it('holds the API: a run info lacking step_graph, a spans answer of an unknown mode, a step without its number', () => {
    const derived = { dir: 'd', steps: 1, ops: 2, spans: 3, threads: 1, t_end_ns: 9, complete: true, stop_reason: '', graphs: 1,
      buffers: [], file_size: 10, routed: false, weight_budget: false, step_times: [[0, 9, 'PROMPT']], step_graph: [0] };
    expect(validate(RunInfo, { run: {}, derived })).toEqual([]);
    const { step_graph: _, ...old } = derived;
    expect(validate(RunInfo, { run: {}, derived: old })).toEqual(['$.derived.step_graph: missing']);
    expect(validate(Spans, { t0: 0, t1: 1, threads: 1, count: 0, mode: 'lines' })).toHaveLength(1);
    expect(validate(StepRow, { token: 3 })).toEqual(['$.step: missing']);
  });
});
