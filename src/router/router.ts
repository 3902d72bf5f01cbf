/**
 * The attempt loop. A public model's targets are put in order by its policy (policies.ts), then
 * tried in turn: each target may be retried after a backoff on transient failures (retry.ts),
 * targets whose circuit breaker is open are skipped (circuit-breaker.ts), and one deadline bounds
 * the whole chain. Client-fault errors return at once; everything else moves on until a target
 * answers or none is left, and then one error lists every attempt.
 *
 * Streams have a commit point: the first chunk that carries content. Failures before it fail over
 * with nothing sent to the client; after it the stream ends with an error (never with a clean end
 * that hides the loss).
 */
import { sleepUnlessAborted, type AbortLike } from '../lib/abort.ts';
import type { BaseLLM, CallContext } from '../backends/contract.ts';
import type { BackendRegistry } from '../backends/registry.ts';
import { clientClosed, upstreamTimeout } from '../errors/upstream.ts';
import type { Config, PolicyName } from '../config/schema.ts';
import { ModelRoutes, targetModel, type ModelRoute } from './model-routes.ts';
import { GatewayError, modelNotFound } from '../errors/gateway-error.ts';
import { Attempt } from './attempt.ts';
import { HealthState, type TargetHealth } from './health-state.ts';
import { deadlineExceeded, exhausted, finalize, skipReason, type AttemptRecord } from './outcomes.ts';
import { orderTargets, type PolicyCandidate } from './policies.ts';
import { backoffMs, blamesTarget, disposition } from './retry.ts';
import { openCommitted, type StreamHooks } from './stream.ts';
import type { PartBase } from '../protocol/stream-part.ts';
import type { AttemptFacts } from '../telemetry/tracing-facts.ts';

export type { StreamHooks };
export type { AttemptOutcome, AttemptSpan, Clock, Operation, ResolvedTarget, RouteRequest, RouteTrace, Routed, RouterObserver } from './types.ts';
import type { AttemptSpan, Clock, Operation, ResolvedTarget, RouteRequest, Routed, RouterObserver } from './types.ts';

const quietObserver: RouterObserver = { attempt() {}, retry() {}, failover() {} };

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: sleepUnlessAborted,
};

const OP_NAME: Record<Operation, string> = {
  chat: 'chat completions',
  completions: 'legacy completions',
  embeddings: 'embeddings',
  responses: 'the Responses API',
  messages: 'the Messages API',
};

/** Whether a backend can serve `op`: a native protocol method, or chat to translate through. */
function serves(llm: BaseLLM, op: Operation): boolean {
  switch (op) {
    case 'chat':
    case 'completions':
    case 'embeddings':
      return llm.capabilities[op];
    case 'responses':
      return llm.capabilities.chat || llm.responses !== undefined;
    case 'messages':
      return llm.capabilities.chat || llm.messages !== undefined;
    default: {
      const never: never = op;
      throw new Error(`unhandled operation ${String(never)}`);
    }
  }
}

export class Router {
  constructor(
    private readonly config: Config,
    private readonly registry: BackendRegistry,
    readonly health: HealthState = new HealthState(config.routing.breaker),
    private readonly clock: Clock = systemClock,
    private readonly rand: () => number = Math.random,
    private readonly observer: RouterObserver = quietObserver,
  ) {
    this.routes = new ModelRoutes(config.models);
  }

  private readonly routes: ModelRoutes;

  /** The names clients can list (patterns are not listed). */
  publicModels(): string[] {
    return this.routes.concrete();
  }

  /** The `models:` key that serves `name` (a pattern's key for a name it matched), or undefined. */
  modelKey(name: string): string | undefined {
    return this.routes.keyOf(name);
  }

  private model(publicModel: string): ModelRoute {
    const m = this.routes.match(publicModel);
    if (!m) throw modelNotFound(publicModel);
    return m;
  }

  resolve(publicModel: string): ResolvedTarget[] {
    const out: ResolvedTarget[] = [];
    const route = this.model(publicModel);
    for (const t of route.config.targets) {
      const entry = this.registry.get(t.backend);
      if (entry) out.push({ publicModel, modelKey: route.key, backend: t.backend, model: targetModel(t.model, route.captures), target: t, entry });
    }
    return out;
  }

  /** The targets to try, in order: capability and pin filters, then the policy, then capacity. */
  plan(req: RouteRequest): ResolvedTarget[] {
    const m = this.model(req.publicModel).config;
    let targets = this.resolve(req.publicModel).filter((t) => serves(t.entry.llm, req.op));
    if (targets.length === 0) {
      throw new GatewayError('model_not_supported', `The model '${req.publicModel}' does not support ${OP_NAME[req.op]}.`, { param: 'model' });
    }
    if (req.pinBackend !== undefined) {
      const pinned = targets.filter((t) => t.backend === req.pinBackend);
      if (pinned.length === 0) {
        throw new GatewayError(
          'invalid_pin',
          `The model '${req.publicModel}' has no target on backend '${req.pinBackend}' (it has: ${[...new Set(targets.map((t) => t.backend))].join(', ')}).`,
          { param: 'x-switchyard-backend' },
        );
      }
      targets = pinned;
    }
    const now = this.clock.now();
    const cands: PolicyCandidate[] = targets.map((t) => {
      const h = this.health.get(t.backend, t.target.model);
      return { weight: t.target.weight, price: t.target.price, failureRate: h.breaker.failureRate(now), latency: h.stats.estimate() };
    });
    const order = orderTargets(m.policy as PolicyName, cands, {
      promptTokens: req.promptTokens,
      maxOutputTokens: req.maxOutputTokens ?? this.config.routing.default_max_tokens_estimate,
      stream: req.stream,
      rand: this.rand,
      stickyKey: m.sticky && req.stickyKey !== undefined ? `${req.stickyKey}\u0000${this.model(req.publicModel).key}` : undefined,
      exploreRate: this.config.routing.explore_rate,
      now,
      staleMs: this.config.routing.stale_ms,
    });
    if (order.length === 0 && req.pinBackend !== undefined) {
      // weighted leaves out weight-0 targets; config guarantees a live one, so only a pin gets here
      throw new GatewayError('invalid_pin', `The model '${req.publicModel}' takes no traffic on backend '${req.pinBackend}': its target there has weight 0 (drained).`, {
        param: 'x-switchyard-backend',
      });
    }
    const planned = byCapacity(order.map((i) => targets[i] as ResolvedTarget));
    return req.preferTarget === undefined ? planned : preferred(planned, req.preferTarget);
  }

  /** Runs `call` on the planned targets until one succeeds. */
  run<T>(req: RouteRequest, call: (t: ResolvedTarget, ctx: CallContext) => Promise<T>): Promise<Routed<T>> {
    return this.chain(req, async (t, a, h, remaining, at) => {
      const started = this.clock.now();
      a.arm(Math.min(this.timeoutFor(t), remaining), 'respond');
      const result = await call(t, a.ctx(req.requestId, at));
      a.done(false);
      if (at !== undefined) at.answer(result);
      const now = this.clock.now();
      h.breaker.record('success', now);
      h.stats.observeSuccess(now, now - started);
      return result;
    });
  }

  /**
   * Opens a stream on the planned targets until one reaches its commit point, then hands the client
   * a stream of the buffered chunks and the rest as they arrive.
   */
  runStream<T extends PartBase>(
    req: RouteRequest,
    open: (t: ResolvedTarget, ctx: CallContext) => Promise<AsyncIterable<T>>,
    hooks: StreamHooks<T>,
  ): Promise<Routed<AsyncIterable<T>>> {
    return this.chain(req, (t, a, h, remaining, at) =>
      openCommitted({
        trace: at,
        attempt: a,
        clientSignal: req.signal,
        target: t,
        health: h,
        clock: this.clock,
        firstTokenTimeoutMs: Math.min(this.firstTokenTimeoutFor(t), remaining),
        idleTimeoutMs: t.entry.config.stream_idle_timeout_ms,
        open: () => open(t, a.ctx(req.requestId, at)),
        hooks,
        classify: (err) => this.classify(err, a, t, req.signal),
      }),
    );
  }

  private timeoutFor(t: ResolvedTarget): number {
    return t.target.timeout_ms ?? t.entry.config.timeout_ms;
  }

  private firstTokenTimeoutFor(t: ResolvedTarget): number {
    return t.target.first_token_timeout_ms ?? t.entry.config.first_token_timeout_ms ?? this.timeoutFor(t);
  }

  private async chain<T>(
    req: RouteRequest,
    exec: (t: ResolvedTarget, a: Attempt, h: TargetHealth, remainingMs: number, at: AttemptSpan | undefined) => Promise<T>,
  ): Promise<Routed<T>> {
    const route = this.model(req.publicModel);
    const m = route.config;
    const targets = this.plan(req);
    const retryCfg = m.retry ?? this.config.routing.retry;
    const budget = Math.min(m.deadline_ms ?? this.config.routing.deadline_ms, req.deadlineMs ?? Number.POSITIVE_INFINITY);
    const deadline = this.clock.now() + budget;
    const records: AttemptRecord[] = [];
    const skips: GatewayError[] = [];
    let attempts = 0;
    let last: GatewayError | undefined;
    let soonest = Number.POSITIVE_INFINITY;
    const rt = req.trace;

    let upstreamMs = 0;
    let previous: string | undefined;
    for (const t of targets) {
      if (previous !== undefined) this.observer.failover(route.key, previous);
      previous = t.backend;
      const name = `${t.backend}/${t.model}`;
      const skip = skipReason(t);
      if (skip) {
        records.push({ target: name, outcome: `skipped: ${skip.message}` });
        skips.push(skip);
        continue;
      }
      // breakers and statistics per configured target (a pattern's template, not each name it matched)
      const h = this.health.get(t.backend, t.target.model);
      for (let retry = 0; ; retry++) {
        if (req.signal.aborted) throw finalize(clientClosed(), attempts);
        const now = this.clock.now();
        const remaining = deadline - now;
        if (remaining <= 0) throw finalize(deadlineExceeded(req.publicModel, budget, records), attempts);
        if (!h.breaker.tryAcquire(now)) {
          const wait = h.breaker.retryInMs(now);
          soonest = Math.min(soonest, wait);
          records.push({ target: name, outcome: `skipped: circuit open (retry in ${Math.ceil(wait / 1000)} s)` });
          break;
        }
        attempts++;
        const a = new Attempt(req.signal);
        const at = rt === undefined ? undefined : rt.attempt(attemptFacts(req, t, m.policy, attempts, retry, targets[0] !== t, h.breaker.stateAt(now)));
        const started = this.clock.now();
        try {
          const result = await exec(t, a, h, remaining, at);
          const took = this.clock.now() - started;
          upstreamMs += took;
          this.observer.attempt(t.backend, 'success', took);
          return { result, target: t, attempts, upstreamMs };
        } catch (err) {
          a.done(true);
          const took = this.clock.now() - started;
          upstreamMs += took;
          const e = this.classify(err, a, t, req.signal);
          if (at !== undefined) at.fail(e);
          const d = disposition(e);
          this.observer.attempt(
            t.backend,
            e.status === 499 ? 'client_closed' : e.code === 'upstream_timeout' ? 'timeout' : d === 'fatal' ? 'fatal' : 'retryable',
            took,
          );
          // A timeout that only happened because the client's own deadline was shorter than the
          // target's timeout says nothing about the target: it must not trip the breaker for everyone.
          const cutByClient = a.timedOut !== null && a.timeoutMs >= remaining;
          const blame = !blamesTarget(e) || cutByClient ? 'neutral' : 'failure';
          h.breaker.record(blame, this.clock.now());
          if (blame === 'failure') h.stats.observeFailure(this.clock.now(), e);
          if (d === 'fatal') throw finalize(e, attempts);
          last = e;
          records.push({ target: name, outcome: `${e.status} ${e.code ?? e.type}: ${e.message}` });
          if (d === 'failover' || retry >= retryCfg.max_retries) break;
          const wait = backoffMs(retry + 1, retryCfg, this.rand, e.retryAfter);
          if (wait > this.config.routing.max_retry_wait_ms || this.clock.now() + wait >= deadline) break;
          try {
            await this.clock.sleep(wait, req.signal);
          } catch {
            throw finalize(clientClosed(), attempts);
          }
          this.observer.retry(route.key, t.backend);
        }
      }
    }
    throw finalize(exhausted(req.publicModel, records, last, skips, soonest), attempts);
  }

  private classify(err: unknown, a: Attempt, t: ResolvedTarget, clientSignal: AbortLike): GatewayError {
    if (clientSignal.aborted) return clientClosed();
    if (a.timedOut) return upstreamTimeout(t.backend, a.timeoutMs, a.timedOut);
    if (err instanceof GatewayError) {
      err.backend ??= t.backend;
      return err;
    }
    // An error the backend did not classify: an upstream failure worth failing over.
    return new GatewayError('upstream_error', `Backend "${t.backend}" failed: ${err instanceof Error ? err.message : 'unknown error'}.`, {
      cause: err,
      backend: t.backend,
    });
  }
}

/** What an attempt's span says of it (telemetry/tracing.ts). */
function attemptFacts(req: RouteRequest, t: ResolvedTarget, policy: string, attempt: number, retry: number, failover: boolean, breaker: string): AttemptFacts {
  return {
    op: req.op,
    model: t.model,
    publicModel: req.publicModel,
    backend: t.backend,
    backendType: t.entry.llm.type,
    policy,
    attempt,
    retry,
    failover,
    breaker,
    maxTokens: req.maxOutputTokens,
  };
}

/**
 * A session's pinned target first, the others in the policy's order behind it. A pin that names no
 * planned target (drained, unsupported, filtered out) or a full local server changes nothing.
 */
function preferred(order: ResolvedTarget[], want: { backend: string; model: string }): ResolvedTarget[] {
  const i = order.findIndex((t) => t.backend === want.backend && t.model === want.model);
  if (i <= 0) return order;
  const t = order[i] as ResolvedTarget;
  const c = t.entry.llm.capacity?.();
  if (c && c.total > 0 && c.busy >= c.total) return order;
  return [t, ...order.slice(0, i), ...order.slice(i + 1)];
}

/**
 * Local servers report capacity: among consecutive targets that do, the least busy goes first, and a
 * full target moves behind every target that is not full (busy, not broken: still a fallback).
 */
function byCapacity(order: ResolvedTarget[]): ResolvedTarget[] {
  const load = order.map((t) => {
    const c = t.entry.llm.capacity?.();
    return c && c.total > 0 ? c.busy / c.total : undefined;
  });
  if (load.every((l) => l === undefined)) return order;
  const idx = order.map((_, i) => i);
  // least-busy within runs of capacity-reporting targets
  for (let i = 0; i < idx.length; ) {
    if (load[i] === undefined) {
      i++;
      continue;
    }
    let j = i;
    while (j < idx.length && load[j] !== undefined) j++;
    const run = idx.slice(i, j).sort((a, b) => (load[a] as number) - (load[b] as number) || a - b);
    idx.splice(i, j - i, ...run);
    i = j;
  }
  const notFull = idx.filter((i) => (load[i] ?? 0) < 1);
  const full = idx.filter((i) => (load[i] ?? 0) >= 1);
  return [...notFull, ...full].map((i) => order[i] as ResolvedTarget);
}
