/**
 * One attempt against one target: its own abort, linked to the client's signal, with a re-armable
 * deadline. When the deadline fires the attempt is aborted and remembers why, so the router can
 * report a timeout rather than whatever the SDK made of the abort.
 *
 * The abort is an `AttemptAbort` (an EventEmitter with `aborted` and `reason`), which undici takes
 * in place of an AbortSignal. Hot path: no AbortSignal per attempt (in Node 20 one is costly to
 * create and to listen to). A real
 * AbortSignal is made only for a backend that asks for `ctx.signal` (the vendor SDKs, fetch).
 */
import { EventEmitter } from 'node:events';
import type { AbortLike } from '../lib/abort.ts';
import type { CallContext, CallTrace } from '../backends/contract.ts';

export class AttemptAbort extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}

export class Attempt {
  readonly abort = new AttemptAbort();
  /** What the target failed to do in time, once the deadline fired. */
  timedOut: string | null = null;
  timeoutMs = 0;
  private timer: NodeJS.Timeout | undefined;
  /** performance.now() when the deadline was last (re)started */
  private refreshedAt = 0;
  private controller: AbortController | undefined;
  private readonly onClientAbort = (): void => this.abort.abort(this.clientSignal.reason);

  constructor(private readonly clientSignal: AbortLike) {
    if (clientSignal.aborted) this.abort.abort(clientSignal.reason);
    else clientSignal.addEventListener('abort', this.onClientAbort, { once: true });
  }

  /** A real AbortSignal that follows this attempt's abort, made on first use. */
  get signal(): AbortSignal {
    if (!this.controller) {
      const c = new AbortController();
      if (this.abort.aborted) c.abort(this.abort.reason);
      else this.abort.once('abort', () => c.abort(this.abort.reason));
      this.controller = c;
    }
    return this.controller.signal;
  }

  /** (Re)arms the deadline. */
  arm(ms: number, what: string): void {
    this.timedOut = null;
    this.timeoutMs = ms;
    this.refreshedAt = performance.now();
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timedOut = what;
      this.abort.abort(new DOMException(`attempt deadline: ${what}`, 'TimeoutError'));
    }, Math.max(1, ms));
    this.timer.unref?.();
  }

  /**
   * Restarts the current deadline (stream idle timeout after each chunk). At most once per
   * millisecond: the chunks of one upstream read are handed over together, and re-inserting the
   * timer for each of them was measurable (the deadline may end up to 1 ms early).
   */
  refresh(): void {
    const now = performance.now();
    if (now - this.refreshedAt < 1) return;
    this.refreshedAt = now;
    this.timer?.refresh();
  }

  /** The backend's view of this attempt: its abort, the request id and the attempt's span (while traced). */
  ctx(requestId: string, trace: CallTrace | undefined): CallContext {
    return new AttemptContext(this, requestId, trace);
  }

  done(abortUpstream: boolean): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.clientSignal.removeEventListener('abort', this.onClientAbort);
    if (abortUpstream && !this.abort.aborted) this.abort.abort(new DOMException('attempt finished', 'AbortError'));
  }
}

/** The backend's view of an attempt (a class: an object literal with a getter is slow to create). */
class AttemptContext implements CallContext {
  readonly abort: AttemptAbort;

  constructor(
    private readonly attempt: Attempt,
    readonly requestId: string,
    readonly trace: CallTrace | undefined,
  ) {
    this.abort = attempt.abort;
  }

  get signal(): AbortSignal {
    return this.attempt.signal;
  }
}
