/** Types the router's modules and its callers share. */
import type { AbortLike } from '../lib/abort.ts';
import type { CallTrace } from '../backends/contract.ts';
import type { BackendEntry } from '../backends/registry.ts';
import type { TargetConfig } from '../config/schema.ts';
import type { AttemptFacts, FailureFacts } from '../telemetry/tracing-facts.ts';

/** What a request asks for; `responses` and `messages` are served natively or through chat. */
export type Operation = 'chat' | 'completions' | 'embeddings' | 'responses' | 'messages';

export interface ResolvedTarget {
  /** the name the client asked for */
  publicModel: string;
  /** the `models:` entry that serves it (a pattern's key when a pattern matched) */
  modelKey: string;
  backend: string;
  /** Model name sent upstream. */
  model: string;
  target: TargetConfig;
  entry: BackendEntry;
}

export interface Routed<T> {
  result: T;
  target: ResolvedTarget;
  /** upstream calls made, retries included */
  attempts: number;
  /** time spent in upstream calls (streams: until the commit point), failed attempts included */
  upstreamMs: number;
}

/** How one attempt at a target ended. */
export type AttemptOutcome = 'success' | 'retryable' | 'fatal' | 'timeout' | 'client_closed';

/** What the router reports as it works (metrics hang off this). */
export interface RouterObserver {
  attempt(backend: string, outcome: AttemptOutcome, ms: number): void;
  retry(publicModel: string, backend: string): void;
  failover(publicModel: string, fromBackend: string): void;
}

/** What one request asks of the router, besides its body. */
export interface RouteRequest {
  publicModel: string;
  op: Operation;
  requestId: string;
  signal: AbortLike;
  stream: boolean;
  /** only targets on this backend (request header `x-switchyard-backend`) */
  pinBackend?: string | undefined;
  /** the client's own deadline for the whole request, ms from now */
  deadlineMs?: number | undefined;
  /** stable identity for sticky weighted routing (the API key's name) */
  stickyKey?: string | undefined;
  /** session affinity: this target goes first when the plan holds it (gateway/affinity.ts) */
  preferTarget?: { backend: string; model: string } | undefined;
  /** rough prompt size, for the cost policy */
  promptTokens: number;
  maxOutputTokens?: number | undefined;
  /** the request's trace while tracing is on */
  trace?: RouteTrace | undefined;
}

/**
 * A request's trace as the router uses it (telemetry/tracing.ts's RequestTrace while tracing is
 * on): a span for each attempt, which its CallContext carries to the backend.
 */
export interface RouteTrace {
  attempt(facts: AttemptFacts): AttemptSpan;
}

/** One attempt's span as the router and its stream tell it what happened (telemetry/tracing-attempt.ts). */
export interface AttemptSpan extends CallTrace {
  /** whether the stream's parts are to be shown to `part()` (only while the span records) */
  readonly watch: boolean;
  /** a JSON answer */
  answer(result: unknown): void;
  /** the attempt failed (before a stream's commit point, or a JSON call): the span ends */
  fail(err: FailureFacts): void;
  /** a stream reached its commit point after `ttftMs`; `first` is its first part */
  committed(ttftMs: number, first: object | undefined): void;
  /** a stream part that finishes the answer */
  finished(part: object): void;
  /** a stream part as the upstream sent it (only while `watch`) */
  part(p: object): void;
  /** a stream ended after its commit point */
  streamEnded(outcome: 'success' | 'failure' | 'neutral', err?: FailureFacts): void;
}

export interface Clock {
  now(): number;
  /** Resolves after `ms`, rejects when `signal` aborts first. */
  sleep(ms: number, signal: AbortLike): Promise<void>;
}
