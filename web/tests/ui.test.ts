import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { leadingDebounce } from '../src/ui';

describe('leadingDebounce', () => {
  beforeEach(() => { vi.useFakeTimers(); });
  afterEach(() => { vi.useRealTimers(); });

  it('runs a single call at once and not again', () => {
    const fn = vi.fn();
    const f = leadingDebounce(fn, 50);
    f();
    expect(fn).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(200);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it('runs a burst once at its start and once after its end', () => {
    const fn = vi.fn();
    const f = leadingDebounce(fn, 50);
    for (let i = 0; i < 10; i++) { f(); vi.advanceTimersByTime(20); }
    expect(fn).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(50);
    expect(fn).toHaveBeenCalledTimes(2);
    f();  // a new burst starts at once again
    expect(fn).toHaveBeenCalledTimes(3);
  });
});
