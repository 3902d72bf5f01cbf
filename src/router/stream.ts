/**
 * Streams and the commit point. `openCommitted` opens an upstream stream and reads until the first
 * chunk that carries content (buffering the empty role chunk before it). Anything that goes wrong
 * until then throws, so the router can fail over with nothing sent. After it, the returned
 * iterable yields the buffered chunks and then the rest as they arrive, with an idle timeout
 * between chunks; a failure there is thrown from the iterator (the SSE writer turns it into an
 * error event), and a stream that ends without a chunk proving completion is reported truncated.
 * The target's breaker and latency stats learn the outcome when the stream ends.
 */
import { GatewayError } from '../errors.ts';
import type { Attempt } from './attempt.ts';
import type { TargetHealth } from './health-state.ts';
import type { Clock, ResolvedTarget } from './router.ts';

export interface StreamHooks<T> {
  /** true once a chunk carries something the client must not lose (content, tool call, finish, usage). */
  commits(chunk: T): boolean;
  /** true for a chunk that proves the answer completed (a finish_reason). */
  completes(chunk: T): boolean;
}

/** Most chunks buffered while waiting for the commit point. */
const MAX_PRECOMMIT_CHUNKS = 32;

export interface OpenCommittedArgs<T> {
  attempt: Attempt;
  clientSignal: AbortSignal;
  target: ResolvedTarget;
  health: TargetHealth;
  clock: Clock;
  firstTokenTimeoutMs: number;
  idleTimeoutMs: number;
  open: () => Promise<AsyncIterable<T>>;
  hooks: StreamHooks<T>;
  classify: (err: unknown) => GatewayError;
}

export function truncated(backend: string): GatewayError {
  return new GatewayError(`Backend "${backend}" ended the stream before the answer was complete.`, {
    status: 502,
    type: 'upstream_error',
    code: 'upstream_stream_truncated',
    retryable: true,
    backend,
  });
}

/** Why the upstream iterator ended early, when it ended because we aborted it. */
function endedByAbort(a: Attempt, classify: (err: unknown) => GatewayError): GatewayError | undefined {
  if (a.timedOut || a.controller.signal.aborted) return classify(new Error('aborted'));
  return undefined;
}

export async function openCommitted<T>(args: OpenCommittedArgs<T>): Promise<AsyncIterable<T>> {
  const { attempt: a, target: t, hooks, clock } = args;
  const started = clock.now();
  a.arm(args.firstTokenTimeoutMs, 'send its first token');
  let it: AsyncIterator<T> | undefined;
  try {
    const stream = await args.open();
    it = stream[Symbol.asyncIterator]();
    const buffered: T[] = [];
    let completed = false;
    for (;;) {
      const r = await it.next();
      if (r.done) {
        const aborted = endedByAbort(a, args.classify);
        if (aborted) throw aborted;
        if (!buffered.some((c) => hooks.completes(c))) throw truncated(t.backend);
        completed = true;
        break;
      }
      buffered.push(r.value);
      if (hooks.completes(r.value)) completed = true;
      if (hooks.commits(r.value) || buffered.length >= MAX_PRECOMMIT_CHUNKS) break;
    }
    const ttft = clock.now() - started;
    a.arm(args.idleTimeoutMs, 'send the next chunk within the stream idle timeout');
    return committed(args, it, buffered, completed, started, ttft);
  } catch (err) {
    void it?.return?.(undefined)?.catch(() => {});
    throw err;
  }
}

async function* committed<T>(
  args: OpenCommittedArgs<T>,
  it: AsyncIterator<T>,
  buffered: T[],
  completedAlready: boolean,
  started: number,
  ttft: number,
): AsyncGenerator<T> {
  const { attempt: a, hooks, health, clock } = args;
  let completed = completedAlready;
  let outcome: 'success' | 'failure' | 'neutral' = 'neutral';
  try {
    for (const c of buffered) yield c;
    buffered.length = 0;
    for (;;) {
      let r: IteratorResult<T>;
      try {
        r = await it.next();
      } catch (err) {
        const e = args.classify(err);
        outcome = e.status === 499 ? 'neutral' : 'failure';
        throw e;
      }
      if (r.done) {
        const aborted = endedByAbort(a, args.classify);
        if (aborted) {
          outcome = aborted.status === 499 ? 'neutral' : 'failure';
          throw aborted;
        }
        if (!completed) {
          outcome = 'failure';
          throw truncated(args.target.backend);
        }
        outcome = 'success';
        return;
      }
      a.refresh();
      if (!completed && hooks.completes(r.value)) completed = true;
      yield r.value;
    }
  } finally {
    // Reached on a clean end, an error, or the client going away (the consumer's return()).
    a.done(outcome !== 'success');
    if (outcome !== 'success') void it.return?.(undefined)?.catch(() => {});
    const now = clock.now();
    health.breaker.record(outcome, now);
    if (outcome === 'success') health.stats.observeSuccess(now, now - started, ttft);
    else if (outcome === 'failure') health.stats.observeFailure(now);
  }
}
