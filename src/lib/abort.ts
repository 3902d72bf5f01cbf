/**
 * The client's abort: fired when the client goes away before its answer is complete. What the
 * gateway needs of it is small (`aborted`, `reason`, and abort listeners), so `AbortLike` is that
 * much, and `ClientAbort` implements it with a plain array of listeners: in Node 20 creating an
 * AbortSignal and listening to it is costly (about 5% of a small request's CPU for the two each
 * request used to make). An AbortSignal fits `AbortLike` too (a coalesced flight's, or the
 * request's own in tests that call the app without a Node server).
 */
export interface AbortLike {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

export class ClientAbort implements AbortLike {
  aborted = false;
  reason: unknown = undefined;
  private listeners: Array<() => void> = [];

  /** As on an AbortSignal: a listener added after the abort is never called. */
  addEventListener(_type: 'abort', listener: () => void, _options?: { once?: boolean }): void {
    if (!this.aborted) this.listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const i = this.listeners.indexOf(listener);
    if (i >= 0) this.listeners.splice(i, 1);
  }

  /** Fires every listener once; one that throws is reported as uncaught, as an EventTarget does. */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = [];
    for (const l of listeners) {
      try {
        l();
      } catch (err) {
        process.nextTick(() => {
          throw err;
        });
      }
    }
  }
}

/** Resolves after `ms`; rejects with the abort's reason when `signal` fires first. */
export function sleepUnlessAborted(ms: number, signal: AbortLike): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
