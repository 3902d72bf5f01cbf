/**
 * A generic dynamic batcher. Items submitted by concurrent callers are gathered for a short window
 * (`windowMs`, counted from the first waiting item) or until `maxBatchSize` are waiting, then one
 * `run(items)` call serves them all and each caller gets its own result back.
 *
 * - At most `maxConcurrent` batches run at once (default 1). Items that arrive while the runner is
 *   busy wait, and go out together as soon as it is free: under load the batch size grows on its
 *   own, with no extra wait.
 * - A caller whose signal aborts while its items are still waiting has them removed from the queue
 *   (they never reach `run`); the promise rejects with the signal's reason.
 * - If `run` fails, every member of that batch gets the same error.
 * - Timers come from `setTimer`, so tests can drive the window by hand.
 */

export interface BatchTimer {
  cancel(): void;
}

export interface BatcherOptions<I, O> {
  /** How long the first waiting item waits for company (0: only batch what queued while busy). */
  windowMs: number;
  /** Most items in one `run` call. */
  maxBatchSize: number;
  /** Most `run` calls in flight at once (default 1). */
  maxConcurrent?: number;
  /** Serves one batch; must return one result per item, in order. */
  run(items: I[]): Promise<O[]>;
  setTimer?(fn: () => void, ms: number): BatchTimer;
}

export interface BatcherStats {
  /** `run` calls made */
  batches: number;
  /** items that went through `run` */
  items: number;
  /** largest batch so far */
  largest: number;
  /** items removed from the queue because their caller aborted */
  dropped: number;
}

interface Waiting<I, O> {
  item: I;
  /** queued: may still be aborted out of the queue; running: in the runner's hands */
  state: 'queued' | 'running' | 'settled';
  resolve(o: O): void;
  reject(err: unknown): void;
}

const defaultTimer = (fn: () => void, ms: number): BatchTimer => {
  const t = setTimeout(fn, ms);
  return { cancel: () => clearTimeout(t) };
};

export class BatcherClosedError extends Error {
  constructor() {
    super('the batcher is closed');
    this.name = 'BatcherClosedError';
  }
}

export class Batcher<I, O> {
  readonly stats: BatcherStats = { batches: 0, items: 0, largest: 0, dropped: 0 };
  private queue: Array<Waiting<I, O>> = [];
  private timer: BatchTimer | undefined;
  /** the window of the oldest waiting item has passed */
  private due = false;
  private inflight = 0;
  private closed = false;
  private idleWaiters: Array<() => void> = [];
  private readonly maxConcurrent: number;
  private readonly setTimer: (fn: () => void, ms: number) => BatchTimer;

  constructor(private readonly opts: BatcherOptions<I, O>) {
    if (!(opts.maxBatchSize >= 1)) throw new RangeError('maxBatchSize must be at least 1');
    if (!(opts.windowMs >= 0)) throw new RangeError('windowMs must be 0 or more');
    this.maxConcurrent = Math.max(1, opts.maxConcurrent ?? 1);
    this.setTimer = opts.setTimer ?? defaultTimer;
  }

  /** Items waiting for a batch. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Batches running now. */
  get running(): number {
    return this.inflight;
  }

  submit(item: I, signal?: AbortSignal): Promise<O> {
    return this.submitAll([item], signal).then((r) => r[0] as O);
  }

  /**
   * Queues several items at once (one request's inputs): they may be served by one batch or split
   * over several, and the results come back in order.
   */
  submitAll(items: readonly I[], signal?: AbortSignal): Promise<O[]> {
    if (this.closed) return Promise.reject(new BatcherClosedError());
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (items.length === 0) return Promise.resolve([]);
    const mine: Array<Waiting<I, O>> = [];
    const onAbort = (): void => {
      const gone = mine.filter((w) => w.state === 'queued');
      if (gone.length === 0) return;
      const set = new Set(gone);
      this.queue = this.queue.filter((w) => !set.has(w));
      this.stats.dropped += gone.length;
      if (this.queue.length === 0) this.resetWindow();
      for (const w of gone) w.reject(signal?.reason);
    };
    const promises = items.map(
      (item) =>
        new Promise<O>((resolve, reject) => {
          const w: Waiting<I, O> = {
            item,
            state: 'queued',
            resolve: (o) => {
              if (w.state === 'settled') return;
              w.state = 'settled';
              resolve(o);
            },
            reject: (e) => {
              if (w.state === 'settled') return;
              w.state = 'settled';
              reject(e);
            },
          };
          mine.push(w);
        }),
    );
    signal?.addEventListener('abort', onAbort, { once: true });
    this.queue.push(...mine);
    this.pump();
    // Once every item has settled, the signal no longer concerns this batcher.
    if (signal) void Promise.allSettled(promises).then(() => signal.removeEventListener('abort', onAbort));
    return Promise.all(promises);
  }

  /** Resolves once no batch is running (after close(): once the last one has finished). */
  idle(): Promise<void> {
    if (this.inflight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Rejects everything still waiting; batches already running finish (see idle()). */
  close(): void {
    this.closed = true;
    const waiting = this.queue;
    this.queue = [];
    this.resetWindow();
    for (const w of waiting) w.reject(new BatcherClosedError());
  }

  private resetWindow(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.due = false;
  }

  private pump(): void {
    const { maxBatchSize, windowMs } = this.opts;
    while (this.queue.length > 0 && this.inflight < this.maxConcurrent && (this.due || windowMs <= 0 || this.queue.length >= maxBatchSize)) {
      const batch = this.queue.splice(0, maxBatchSize);
      if (this.queue.length === 0) this.resetWindow();
      else {
        // What is left arrived while this batch formed: it goes as soon as a runner is free.
        this.timer?.cancel();
        this.timer = undefined;
        this.due = true;
      }
      this.start(batch);
    }
    if (this.queue.length > 0 && !this.due && this.timer === undefined && windowMs > 0) {
      this.timer = this.setTimer(() => {
        this.timer = undefined;
        this.due = true;
        this.pump();
      }, windowMs);
    }
  }

  private start(batch: Array<Waiting<I, O>>): void {
    this.inflight++;
    this.stats.batches++;
    this.stats.items += batch.length;
    this.stats.largest = Math.max(this.stats.largest, batch.length);
    // Members may no longer be aborted out of the batch: it is in the runner's hands now.
    for (const w of batch) w.state = 'running';
    let result: Promise<O[]>;
    try {
      result = this.opts.run(batch.map((w) => w.item));
    } catch (err) {
      result = Promise.reject(err);
    }
    result
      .then(
        (out) => {
          if (!Array.isArray(out) || out.length !== batch.length) {
            const err = new Error(`batch runner returned ${Array.isArray(out) ? out.length : 'no'} results for ${batch.length} items`);
            for (const w of batch) w.reject(err);
            return;
          }
          batch.forEach((w, i) => w.resolve(out[i] as O));
        },
        (err: unknown) => {
          for (const w of batch) w.reject(err);
        },
      )
      .finally(() => {
        this.inflight--;
        this.pump();
        if (this.inflight === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
      });
  }
}
