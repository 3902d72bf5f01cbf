import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Batcher, BatcherClosedError, type BatchTimer } from './batcher.ts';

/** Timers fired by hand: no sleeps. */
function manualTimers() {
  const pending: Array<{ fn: () => void; ms: number; cancelled: boolean }> = [];
  return {
    setTimer(fn: () => void, ms: number): BatchTimer {
      const t = { fn, ms, cancelled: false };
      pending.push(t);
      return { cancel: () => void (t.cancelled = true) };
    },
    /** the window lengths of the timers still armed */
    armed(): number[] {
      return pending.filter((t) => !t.cancelled).map((t) => t.ms);
    },
    fire(): void {
      for (const t of pending.splice(0)) if (!t.cancelled) t.fn();
    },
  };
}

/** A runner whose batches finish when the test says so. */
function controlledRunner<I, O>(f: (i: I) => O) {
  const calls: Array<{ items: I[]; finish: () => void; fail: (e: unknown) => void }> = [];
  return {
    calls,
    run(items: I[]): Promise<O[]> {
      return new Promise((resolve, reject) => {
        calls.push({ items, finish: () => resolve(items.map(f)), fail: reject });
      });
    },
  };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('Batcher', () => {
  it('gathers what arrives within the window into one run and splits the results back in order', async () => {
    const timers = manualTimers();
    const r = controlledRunner((x: number) => x * 10);
    const b = new Batcher<number, number>({ windowMs: 5, maxBatchSize: 8, run: (i) => r.run(i), setTimer: timers.setTimer });
    const p1 = b.submit(1);
    const p23 = b.submitAll([2, 3]);
    const p4 = b.submit(4);
    assert.equal(r.calls.length, 0, 'nothing runs before the window ends');
    assert.deepEqual(timers.armed(), [5], 'one window, started by the first item');
    timers.fire();
    assert.equal(r.calls.length, 1);
    assert.deepEqual(r.calls[0]?.items, [1, 2, 3, 4]);
    r.calls[0]?.finish();
    assert.equal(await p1, 10);
    assert.deepEqual(await p23, [20, 30]);
    assert.equal(await p4, 40);
    assert.deepEqual(b.stats, { batches: 1, items: 4, largest: 4, dropped: 0 });
  });

  it('goes at once when max_batch_size items wait, and the rest go next', async () => {
    const timers = manualTimers();
    const r = controlledRunner((x: number) => -x);
    const b = new Batcher<number, number>({ windowMs: 1000, maxBatchSize: 3, run: (i) => r.run(i), setTimer: timers.setTimer });
    const all = b.submitAll([1, 2, 3, 4, 5]);
    assert.equal(r.calls.length, 1, 'a full batch does not wait for the window');
    assert.deepEqual(r.calls[0]?.items, [1, 2, 3]);
    r.calls[0]?.finish();
    await tick();
    assert.equal(r.calls.length, 2, 'the rest has waited as long as the first batch: it goes as soon as the runner is free');
    assert.deepEqual(r.calls[1]?.items, [4, 5]);
    r.calls[1]?.finish();
    assert.deepEqual(await all, [-1, -2, -3, -4, -5]);
  });

  it('lets items pile up while a batch runs and sends them together when it finishes', async () => {
    const timers = manualTimers();
    const r = controlledRunner((x: string) => x.toUpperCase());
    const b = new Batcher<string, string>({ windowMs: 2, maxBatchSize: 32, run: (i) => r.run(i), setTimer: timers.setTimer });
    const first = b.submit('a');
    timers.fire();
    assert.equal(r.calls.length, 1);
    const later = ['b', 'c', 'd'].map((x) => b.submit(x));
    timers.fire(); // their window passes while the runner is busy
    assert.equal(r.calls.length, 1, 'one batch at a time');
    assert.equal(b.waiting, 3);
    r.calls[0]?.finish();
    assert.equal(await first, 'A');
    await tick();
    assert.equal(r.calls.length, 2);
    assert.deepEqual(r.calls[1]?.items, ['b', 'c', 'd']);
    r.calls[1]?.finish();
    assert.deepEqual(await Promise.all(later), ['B', 'C', 'D']);
  });

  it("with window_ms 0 runs at once (one request's inputs still go together)", async () => {
    const r = controlledRunner((x: number) => x + 1);
    const b = new Batcher<number, number>({ windowMs: 0, maxBatchSize: 4, run: (i) => r.run(i) });
    const p = b.submitAll([1, 2, 3]);
    assert.equal(r.calls.length, 1);
    assert.deepEqual(r.calls[0]?.items, [1, 2, 3]);
    r.calls[0]?.finish();
    assert.deepEqual(await p, [2, 3, 4]);
  });

  it('drops the items of a caller that aborts while they wait', async () => {
    const timers = manualTimers();
    const r = controlledRunner((x: number) => x);
    const b = new Batcher<number, number>({ windowMs: 5, maxBatchSize: 8, run: (i) => r.run(i), setTimer: timers.setTimer });
    const ac = new AbortController();
    const kept = b.submit(1);
    const aborted = b.submitAll([2, 3], ac.signal);
    ac.abort(new Error('client went away'));
    await assert.rejects(aborted, /client went away/);
    timers.fire();
    assert.deepEqual(r.calls[0]?.items, [1], 'the aborted items never reach the runner');
    r.calls[0]?.finish();
    assert.equal(await kept, 1);
    assert.equal(b.stats.dropped, 2);
  });

  it('cancels the window when every waiting item was aborted', async () => {
    const timers = manualTimers();
    const b = new Batcher<number, number>({ windowMs: 5, maxBatchSize: 8, run: async (i) => i, setTimer: timers.setTimer });
    const ac = new AbortController();
    const p = b.submit(1, ac.signal);
    ac.abort(new Error('gone'));
    await assert.rejects(p, /gone/);
    assert.deepEqual(timers.armed(), []);
    assert.equal(b.waiting, 0);
  });

  it('rejects at once for a signal that is already aborted', async () => {
    const b = new Batcher<number, number>({ windowMs: 5, maxBatchSize: 8, run: async (i) => i });
    await assert.rejects(b.submit(1, AbortSignal.abort(new Error('already'))), /already/);
    assert.equal(b.waiting, 0);
  });

  it('an item already running is not pulled out by a late abort', async () => {
    const r = controlledRunner((x: number) => x);
    const b = new Batcher<number, number>({ windowMs: 0, maxBatchSize: 8, run: (i) => r.run(i) });
    const ac = new AbortController();
    const p = b.submit(7, ac.signal);
    ac.abort(new Error('late'));
    r.calls[0]?.finish();
    assert.equal(await p, 7);
    assert.equal(b.stats.dropped, 0);
  });

  it("gives a failed run's error to every member of that batch", async () => {
    const timers = manualTimers();
    const r = controlledRunner((x: number) => x);
    const b = new Batcher<number, number>({ windowMs: 5, maxBatchSize: 8, run: (i) => r.run(i), setTimer: timers.setTimer });
    const ps = [b.submit(1), b.submitAll([2, 3])];
    timers.fire();
    const boom = new Error('session.run failed');
    r.calls[0]?.fail(boom);
    for (const p of ps) await assert.rejects(p, (e) => e === boom);
    // and the batcher keeps working
    const next = b.submit(4);
    timers.fire();
    r.calls[1]?.finish();
    assert.equal(await next, 4);
  });

  it('fails the batch when the runner returns the wrong number of results, or throws synchronously', async () => {
    const b = new Batcher<number, number>({ windowMs: 0, maxBatchSize: 8, run: async () => [1] });
    await assert.rejects(b.submitAll([1, 2]), /returned 1 results for 2 items/);
    const c = new Batcher<number, number>({
      windowMs: 0,
      maxBatchSize: 8,
      run: () => {
        throw new Error('sync');
      },
    });
    await assert.rejects(c.submit(1), /sync/);
  });

  it('idle() resolves once the running batch has finished', async () => {
    const r = controlledRunner((x: number) => x);
    const b = new Batcher<number, number>({ windowMs: 0, maxBatchSize: 8, run: (i) => r.run(i) });
    await b.idle();
    const p = b.submit(1);
    let idle = false;
    const done = b.idle().then(() => (idle = true));
    b.close();
    await tick();
    assert.equal(idle, false, 'close() does not wait for the running batch; idle() does');
    r.calls[0]?.finish();
    await done;
    assert.equal(await p, 1);
  });

  it('close() rejects what waits and refuses new work', async () => {
    const timers = manualTimers();
    const b = new Batcher<number, number>({ windowMs: 5, maxBatchSize: 8, run: async (i) => i, setTimer: timers.setTimer });
    const p = b.submit(1);
    b.close();
    await assert.rejects(p, BatcherClosedError);
    await assert.rejects(b.submit(2), BatcherClosedError);
    assert.deepEqual(timers.armed(), []);
  });

  it('runs up to maxConcurrent batches at once', async () => {
    const r = controlledRunner((x: number) => x);
    const b = new Batcher<number, number>({ windowMs: 0, maxBatchSize: 1, maxConcurrent: 2, run: (i) => r.run(i) });
    const ps = [1, 2, 3].map((x) => b.submit(x));
    assert.equal(r.calls.length, 2);
    assert.equal(b.running, 2);
    r.calls[0]?.finish();
    await tick();
    assert.equal(r.calls.length, 3);
    r.calls[1]?.finish();
    r.calls[2]?.finish();
    assert.deepEqual(await Promise.all(ps), [1, 2, 3]);
  });

  it('uses real timers by default', async () => {
    let runs = 0;
    const b = new Batcher<number, number>({
      windowMs: 5,
      maxBatchSize: 100,
      run: async (i) => {
        runs++;
        return i;
      },
    });
    const out = await Promise.all(Array.from({ length: 20 }, (_, i) => b.submit(i)));
    assert.deepEqual(out, Array.from({ length: 20 }, (_, i) => i));
    assert.equal(runs, 1);
  });
});
