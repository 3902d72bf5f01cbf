/**
 * Streams and the commit point. `openCommitted` opens an upstream stream and reads until the first
 * part that carries content (buffering the empty role chunk before it), and marks that part
 * `flush` for the writer. Anything that goes wrong until then throws, so the router can fail over
 * with nothing sent. After it, the returned iterable yields the buffered parts and then the rest
 * as they arrive, with an idle timeout between parts; a failure there is thrown from the iterator
 * (the SSE writer turns it into an error event), and a stream that ends without a part proving
 * completion is reported truncated. The target's breaker and latency stats learn the outcome when
 * the stream ends. What a part says is the hooks' business (gateway/operations.ts).
 */
import type { AbortLike } from '../lib/abort.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { DONE, pollable, type Pollable } from '../lib/pollable.ts';
import type { PartBase } from '../protocol/stream-part.ts';
import type { Attempt } from './attempt.ts';
import type { TargetHealth } from './health-state.ts';
import type { AttemptSpan, Clock, ResolvedTarget } from './types.ts';

/** What the router asks of a stream's parts (protocol/stream-part.ts); it knows nothing else of them. */
export interface StreamHooks<P> {
  /** true once a part carries something the client must not lose (content, tool call, finish, usage) */
  commits(part: P): boolean;
  /** true for a part that proves the answer completed (a finish_reason) */
  completes(part: P): boolean;
}

/** Most chunks buffered while waiting for the commit point. */
const MAX_PRECOMMIT_CHUNKS = 32;

export interface OpenCommittedArgs<T extends PartBase> {
  attempt: Attempt;
  clientSignal: AbortLike;
  target: ResolvedTarget;
  health: TargetHealth;
  clock: Clock;
  firstTokenTimeoutMs: number;
  idleTimeoutMs: number;
  open: () => Promise<AsyncIterable<T>>;
  hooks: StreamHooks<T>;
  classify: (err: unknown) => GatewayError;
  /** the attempt's span while tracing is on */
  trace?: AttemptSpan | undefined;
}

export function truncated(backend: string): GatewayError {
  return new GatewayError('upstream_stream_truncated', `Backend "${backend}" ended the stream before the answer was complete.`, { backend });
}

/** Why the upstream iterator ended early, when it ended because we aborted it. */
function endedByAbort(a: Attempt, classify: (err: unknown) => GatewayError): GatewayError | undefined {
  if (a.timedOut || a.abort.aborted) return classify(new Error('aborted'));
  return undefined;
}

export async function openCommitted<T extends PartBase>(args: OpenCommittedArgs<T>): Promise<AsyncIterable<T>> {
  const { attempt: a, target: t, hooks, clock } = args;
  const started = clock.now();
  a.arm(args.firstTokenTimeoutMs, 'send its first token');
  let it: AsyncIterator<T> | undefined;
  try {
    const stream = await args.open();
    it = stream[Symbol.asyncIterator]();
    // a chunk already read is taken without a promise (lib/pollable.ts): the first token sooner
    const ready = pollable(it);
    const buffered: T[] = [];
    let completed = false;
    for (;;) {
      const r = ready?.poll() ?? (await it.next());
      if (r.done) {
        const aborted = endedByAbort(a, args.classify);
        if (aborted) throw aborted;
        if (!buffered.some((c) => hooks.completes(c))) throw truncated(t.backend);
        completed = true;
        break;
      }
      buffered.push(r.value);
      if (args.trace !== undefined && args.trace.watch) args.trace.part(r.value);
      if (hooks.completes(r.value)) {
        completed = true;
        if (args.trace !== undefined) args.trace.finished(r.value);
      }
      if (hooks.commits(r.value) || buffered.length >= MAX_PRECOMMIT_CHUNKS) break;
    }
    // the client's first write: the buffered parts up to this one leave together
    (buffered[buffered.length - 1] as T).flush = true;
    const ttft = clock.now() - started;
    if (args.trace !== undefined) args.trace.committed(ttft, buffered[0]);
    a.arm(args.idleTimeoutMs, 'send the next chunk within the stream idle timeout');
    return new Committed(args, it, buffered, completed, started, ttft);
  } catch (err) {
    void it?.return?.(undefined)?.catch(() => {});
    throw err;
  }
}

/**
 * The stream after the commit point: the buffered chunks, then the rest as they arrive, with the
 * idle timeout re-armed on each. The target's breaker and stats learn the outcome exactly once —
 * on a clean end, a failure, or the consumer returning early (neutral: the client went away).
 */
class Committed<T extends PartBase> implements AsyncIterableIterator<T>, Pollable<T> {
  private next_ = 0;
  private settled = false;

  constructor(
    private readonly args: OpenCommittedArgs<T>,
    private readonly it: AsyncIterator<T>,
    private buffered: T[],
    private completed: boolean,
    private readonly started: number,
    private readonly ttft: number,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<T> | undefined {
    if (this.settled) return DONE;
    if (this.next_ < this.buffered.length) return this.take();
    const p = pollable(this.it);
    if (!p) return undefined;
    let r: IteratorResult<T> | undefined;
    try {
      r = p.poll();
    } catch (err) {
      throw this.failed(err);
    }
    return r === undefined ? undefined : this.handle(r);
  }

  async next(): Promise<IteratorResult<T>> {
    if (this.settled) return DONE;
    if (this.next_ < this.buffered.length) return this.take();
    let r: IteratorResult<T>;
    try {
      r = await this.it.next();
    } catch (err) {
      throw this.failed(err);
    }
    return this.handle(r);
  }

  /** The consumer stopped early (the client went away): neutral for the target. */
  async return(): Promise<IteratorResult<T>> {
    this.settle('neutral');
    return DONE;
  }

  private take(): IteratorResult<T> {
    const value = this.buffered[this.next_++] as T;
    if (this.next_ === this.buffered.length) {
      this.buffered = [];
      this.next_ = 0;
    }
    return { done: false, value };
  }

  private handle(r: IteratorResult<T>): IteratorResult<T> {
    if (r.done) {
      const aborted = endedByAbort(this.args.attempt, this.args.classify);
      if (aborted) {
        this.settle(aborted.status === 499 ? 'neutral' : 'failure', aborted);
        throw aborted;
      }
      if (!this.completed) {
        const e = truncated(this.args.target.backend);
        this.settle('failure', e);
        throw e;
      }
      this.settle('success');
      return DONE;
    }
    this.args.attempt.refresh();
    const tr = this.args.trace;
    if (tr !== undefined && tr.watch) tr.part(r.value);
    if (!this.completed && this.args.hooks.completes(r.value)) {
      this.completed = true;
      if (this.args.trace !== undefined) this.args.trace.finished(r.value);
    }
    return r;
  }

  private failed(err: unknown): GatewayError {
    const e = this.args.classify(err);
    this.settle(e.status === 499 ? 'neutral' : 'failure', e);
    return e;
  }

  private settle(outcome: 'success' | 'failure' | 'neutral', err?: GatewayError): void {
    if (this.settled) return;
    this.settled = true;
    this.buffered = [];
    const { attempt: a, health, clock } = this.args;
    a.done(outcome !== 'success');
    if (this.args.trace !== undefined) this.args.trace.streamEnded(outcome, err);
    if (outcome !== 'success') void this.it.return?.(undefined)?.catch(() => {});
    const now = clock.now();
    health.breaker.record(outcome, now);
    if (outcome === 'success') health.stats.observeSuccess(now, now - this.started, this.ttft);
    else if (outcome === 'failure') health.stats.observeFailure(now, err);
  }
}
