/**
 * The attempt loop. A public model has an ordered list of targets; each is tried in turn until one
 * succeeds. Retryable failures (connection errors, timeouts, 408/409/429/5xx, an unconfigured
 * backend) pass to the next target; client-fault errors (400, 404, 413, 422…) return at once.
 * Every attempt has its own abort signal, linked to the client's, and a deadline.
 *
 * Streams have a commit point: the first chunk that carries content. Failures before it fail
 * over; after it the stream ends with an error (never with a clean end that hides the loss).
 */
import type { BackendEntry, BackendRegistry } from '../backends/registry.ts';
import type { CallContext } from '../backends/base-llm.ts';
import { clientClosed, upstreamMalformed, upstreamTimeout } from '../backends/upstream-errors.ts';
import type { Config, TargetConfig } from '../config/schema.ts';
import { GatewayError, asGatewayError, modelNotFound } from '../errors.ts';

export type Operation = 'chat' | 'completions' | 'embeddings';

export interface ResolvedTarget {
  publicModel: string;
  backend: string;
  /** Model name sent upstream. */
  model: string;
  target: TargetConfig;
  entry: BackendEntry;
}

export interface Routed<T> {
  result: T;
  target: ResolvedTarget;
  attempts: number;
}

export interface StreamHooks<T> {
  /** true once a chunk carries something the client must not lose (content, tool call, finish). */
  commits(chunk: T): boolean;
  /** true for a chunk that proves the answer completed (a finish_reason). */
  completes(chunk: T): boolean;
}

const CAPABILITY: Record<Operation, 'chat' | 'completions' | 'embeddings'> = {
  chat: 'chat',
  completions: 'completions',
  embeddings: 'embeddings',
};

/** Most chunks buffered while waiting for the commit point. */
const MAX_PRECOMMIT_CHUNKS = 32;

class Attempt {
  readonly controller = new AbortController();
  timedOut: string | null = null;
  private timer: NodeJS.Timeout | undefined;
  private readonly onClientAbort = (): void => this.controller.abort(this.clientSignal.reason);

  constructor(private readonly clientSignal: AbortSignal) {
    if (clientSignal.aborted) this.controller.abort(clientSignal.reason);
    else clientSignal.addEventListener('abort', this.onClientAbort, { once: true });
  }

  /** (Re)arms the deadline: when it fires the attempt is aborted and marked timed out. */
  arm(ms: number, what: string): void {
    this.timedOut = null;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timedOut = what;
      this.controller.abort(new DOMException(`attempt deadline: ${what}`, 'TimeoutError'));
    }, ms);
    this.timer.unref?.();
  }

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

export class Router {
  constructor(
    private readonly config: Config,
    private readonly registry: BackendRegistry,
  ) {}

  publicModels(): string[] {
    return Object.keys(this.config.models);
  }

  resolve(publicModel: string): ResolvedTarget[] {
    const m = Object.hasOwn(this.config.models, publicModel) ? this.config.models[publicModel] : undefined;
    if (!m) throw modelNotFound(publicModel);
    const out: ResolvedTarget[] = [];
    for (const t of m.targets) {
      const entry = this.registry.get(t.backend);
      if (entry) out.push({ publicModel, backend: t.backend, model: t.model, target: t, entry });
    }
    return out;
  }

  /** Runs `call` against each target in order until one succeeds. */
  async run<T>(
    publicModel: string,
    op: Operation,
    requestId: string,
    clientSignal: AbortSignal,
    call: (t: ResolvedTarget, ctx: CallContext) => Promise<T>,
  ): Promise<Routed<T>> {
    const targets = this.usable(publicModel, op);
    let attempts = 0;
    const failures: GatewayError[] = [];
    for (const t of targets) {
      if (t.entry.unconfigured) {
        failures.push(notConfigured(t));
        continue;
      }
      attempts++;
      const a = new Attempt(clientSignal);
      a.arm(t.entry.config.timeout_ms, 'respond');
      try {
        const result = await call(t, a.ctx(requestId));
        a.done(false);
        return { result, target: t, attempts };
      } catch (err) {
        a.done(false);
        const e = this.classify(err, a, t, clientSignal);
        if (!e.retryable) throw finalize(e, attempts);
        failures.push(e);
      }
    }
    throw finalize(pickError(failures, publicModel), attempts);
  }

  /**
   * Opens a stream on each target in order until one reaches its commit point, then hands the
   * client a stream that yields the buffered chunks and the rest as they arrive.
   */
  async runStream<T>(
    publicModel: string,
    op: Operation,
    requestId: string,
    clientSignal: AbortSignal,
    open: (t: ResolvedTarget, ctx: CallContext) => Promise<AsyncIterable<T>>,
    hooks: StreamHooks<T>,
  ): Promise<Routed<AsyncIterable<T>>> {
    const targets = this.usable(publicModel, op);
    let attempts = 0;
    const failures: GatewayError[] = [];
    for (const t of targets) {
      if (t.entry.unconfigured) {
        failures.push(notConfigured(t));
        continue;
      }
      attempts++;
      const a = new Attempt(clientSignal);
      a.arm(t.entry.config.timeout_ms, 'send its first chunk');
      let it: AsyncIterator<T> | undefined;
      try {
        const stream = await open(t, a.ctx(requestId));
        it = stream[Symbol.asyncIterator]();
        const buffered: T[] = [];
        let completed = false;
        for (;;) {
          const r = await it.next();
          if (r.done) {
            if (a.timedOut || a.controller.signal.aborted) throw abortedError(a, t, clientSignal);
            if (buffered.length === 0 || !buffered.some((c) => hooks.completes(c))) {
              throw upstreamMalformed(t.backend, 'the stream ended before any content');
            }
            completed = true;
            break;
          }
          buffered.push(r.value);
          if (hooks.completes(r.value)) completed = true;
          if (hooks.commits(r.value) || buffered.length >= MAX_PRECOMMIT_CHUNKS) break;
        }
        const idle = t.entry.config.stream_idle_timeout_ms;
        a.arm(idle, `send the next chunk within the stream idle timeout`);
        return { result: this.committed(it, buffered, completed, a, t, clientSignal, hooks), target: t, attempts };
      } catch (err) {
        a.done(true);
        void it?.return?.(undefined)?.catch(() => {});
        const e = this.classify(err, a, t, clientSignal);
        if (!e.retryable) throw finalize(e, attempts);
        failures.push(e);
      }
    }
    throw finalize(pickError(failures, publicModel), attempts);
  }

  private async *committed<T>(
    it: AsyncIterator<T>,
    buffered: T[],
    completedAlready: boolean,
    a: Attempt,
    t: ResolvedTarget,
    clientSignal: AbortSignal,
    hooks: StreamHooks<T>,
  ): AsyncGenerator<T> {
    let completed = completedAlready;
    let finished = false;
    try {
      for (const c of buffered) yield c;
      buffered.length = 0;
      for (;;) {
        let r: IteratorResult<T>;
        try {
          r = await it.next();
        } catch (err) {
          throw this.classify(err, a, t, clientSignal);
        }
        if (r.done) {
          if (a.timedOut || a.controller.signal.aborted) throw abortedError(a, t, clientSignal);
          if (!completed) throw truncated(t);
          finished = true;
          return;
        }
        a.refresh();
        if (!completed && hooks.completes(r.value)) completed = true;
        yield r.value;
      }
    } finally {
      a.done(!finished);
      if (!finished) void it.return?.(undefined)?.catch(() => {});
    }
  }

  private usable(publicModel: string, op: Operation): ResolvedTarget[] {
    const all = this.resolve(publicModel);
    const cap = CAPABILITY[op];
    const ok = all.filter((t) => t.entry.llm.capabilities[cap]);
    if (ok.length === 0) {
      const what = op === 'chat' ? 'chat completions' : op === 'completions' ? 'legacy completions' : 'embeddings';
      throw new GatewayError(`The model '${publicModel}' does not support ${what}.`, {
        status: 400,
        type: 'invalid_request_error',
        param: 'model',
        code: 'model_not_supported',
      });
    }
    return ok;
  }

  private classify(err: unknown, a: Attempt, t: ResolvedTarget, clientSignal: AbortSignal): GatewayError {
    if (clientSignal.aborted) return clientClosed();
    if (a.timedOut) return upstreamTimeout(t.backend, timeoutMsFor(a, t), a.timedOut);
    const e = asGatewayError(err);
    if (e.status === 500 && e.code === 'internal_error' && !(err instanceof GatewayError)) {
      // An error the backend did not classify: treat as an upstream failure worth failing over.
      const g = new GatewayError(`Backend "${t.backend}" failed: ${err instanceof Error ? err.message : 'unknown error'}.`, {
        status: 502,
        type: 'upstream_error',
        code: 'upstream_error',
        retryable: true,
        cause: err,
      });
      g.backend = t.backend;
      return g;
    }
    e.backend ??= t.backend;
    return e;
  }
}

function timeoutMsFor(a: Attempt, t: ResolvedTarget): number {
  return a.timedOut?.includes('idle') ? t.entry.config.stream_idle_timeout_ms : t.entry.config.timeout_ms;
}

function abortedError(a: Attempt, t: ResolvedTarget, clientSignal: AbortSignal): GatewayError {
  if (clientSignal.aborted) return clientClosed();
  if (a.timedOut) return upstreamTimeout(t.backend, timeoutMsFor(a, t), a.timedOut);
  return truncated(t);
}

function truncated(t: ResolvedTarget): GatewayError {
  const e = new GatewayError(`Backend "${t.backend}" ended the stream before the answer was complete.`, {
    status: 502,
    type: 'upstream_error',
    code: 'upstream_stream_truncated',
    retryable: true,
  });
  e.backend = t.backend;
  return e;
}

function notConfigured(t: ResolvedTarget): GatewayError {
  const e = new GatewayError(`Backend "${t.backend}" is not configured (its api_key is empty).`, {
    status: 503,
    type: 'service_unavailable_error',
    code: 'backend_not_configured',
    retryable: true,
  });
  e.backend = t.backend;
  return e;
}

/** The error that best explains why nothing served the request. */
function pickError(failures: GatewayError[], publicModel: string): GatewayError {
  const real = failures.filter((f) => f.code !== 'backend_not_configured');
  const last = real[real.length - 1];
  if (last) return last;
  const names = failures.map((f) => `"${f.backend ?? '?'}"`).join(', ');
  return new GatewayError(
    `No backend of model '${publicModel}' is configured: ${names} ${failures.length > 1 ? 'have' : 'has'} no API key. Set the key's environment variable and restart the gateway.`,
    { status: 503, type: 'service_unavailable_error', code: 'backend_not_configured', retryAfter: 60 },
  );
}

function finalize(e: GatewayError, attempts: number): GatewayError {
  e.attempts = attempts;
  if (e.status !== 499) e.exhausted = e.status >= 500 || e.status === 429 || e.status === 409;
  return e;
}
