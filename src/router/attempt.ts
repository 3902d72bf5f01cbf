/**
 * One attempt against one target: its own AbortController, linked to the client's signal, with a
 * re-armable deadline. When the deadline fires the attempt is aborted and remembers why, so the
 * router can report a timeout rather than whatever the SDK made of the abort.
 */
import type { CallContext } from '../backends/base-llm.ts';

export class Attempt {
  readonly controller = new AbortController();
  /** What the target failed to do in time, once the deadline fired. */
  timedOut: string | null = null;
  timeoutMs = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly onClientAbort = (): void => this.controller.abort(this.clientSignal.reason);

  constructor(private readonly clientSignal: AbortSignal) {
    if (clientSignal.aborted) this.controller.abort(clientSignal.reason);
    else clientSignal.addEventListener('abort', this.onClientAbort, { once: true });
  }

  /** (Re)arms the deadline. */
  arm(ms: number, what: string): void {
    this.timedOut = null;
    this.timeoutMs = ms;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timedOut = what;
      this.controller.abort(new DOMException(`attempt deadline: ${what}`, 'TimeoutError'));
    }, Math.max(1, ms));
    this.timer.unref?.();
  }

  /** Restarts the current deadline (stream idle timeout after each chunk). */
  refresh(): void {
    this.timer?.refresh();
  }

  ctx(requestId: string): CallContext {
    return { signal: this.controller.signal, requestId };
  }

  done(abortUpstream: boolean): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.clientSignal.removeEventListener('abort', this.onClientAbort);
    if (abortUpstream && !this.controller.signal.aborted) this.controller.abort(new DOMException('attempt finished', 'AbortError'));
  }
}
