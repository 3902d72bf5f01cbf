/**
 * OpenTelemetry traces with the GenAI semantic conventions, through OpenTelemetry's own SDK
 * (BatchSpanProcessor, OTLP/HTTP exporters). Off unless configured: the standard `OTEL_*`
 * variables, or `telemetry.tracing` in providers.yaml (the variables win).
 *
 * Spans: a SERVER span per API request (continuing the client's `traceparent` / `tracestate`), and
 * a CLIENT span per upstream attempt under it, named `{gen_ai.operation.name} {gen_ai.request.model}`,
 * whose context goes upstream as `traceparent`. A stream's attempt span ends when the stream ends.
 *
 * Hot path: while tracing is off a generation has no `Tracing` and a request no trace, and every
 * hook is one call behind that check; nothing else (no span objects, no context work) happens on a
 * request. Contexts are passed explicitly (no global context manager, no AsyncLocalStorage, no
 * lookup by request id): the listener starts a request's trace on its exchange, the route request
 * carries it to the router (router/types.ts's RouteTrace), and each attempt's span rides on the
 * attempt's CallContext to the backend and the upstream client (backends/contract.ts's CallTrace).
 * Only the server and HTTP layers import this module (.dependency-cruiser.cjs).
 */
import {
  defaultTextMapGetter,
  isSpanContextValid,
  ROOT_CONTEXT,
  SamplingDecision,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type IdGenerator, type Sampler } from '@opentelemetry/sdk-trace-base';
import type { TracingConfig } from '../config/schema.ts';
import { randomHex } from '../lib/random-id.ts';
import { GENAI_PROVIDER } from './metrics.ts';
import { ReportingExporter, resolveTracing, type Env, type TracingSetup, type Warn } from './tracing-setup.ts';

export { resolveTracing, type TracingSetup } from './tracing-setup.ts';
export type { AttemptFacts, FailureFacts, RequestEndFacts } from './tracing-facts.ts';
import type { AttemptFacts, RequestEndFacts } from './tracing-facts.ts';
import { AttemptTrace, now } from './tracing-attempt.ts';

export { AttemptTrace, MAX_CONTENT_CHARS } from './tracing-attempt.ts';

const propagator = new W3CTraceContextPropagator();

/** A new trace id: 16 random bytes as hex, never all zero (an invalid id). */
function newTraceId(): string {
  for (;;) {
    const id = randomHex(16);
    if (id !== '00000000000000000000000000000000') return id;
  }
}

/** A new span id: 8 random bytes as hex, never all zero. */
function newSpanId(): string {
  for (;;) {
    const id = randomHex(8);
    if (id !== '0000000000000000') return id;
  }
}

/** A new trace id and span id from one draw (a request that is not sampled needs both). */
function newIds(): [traceId: string, spanId: string] {
  const hex = randomHex(24);
  const traceId = hex.slice(0, 32);
  const spanId = hex.slice(32);
  return traceId === '00000000000000000000000000000000' || spanId === '0000000000000000' ? [newTraceId(), newSpanId()] : [traceId, spanId];
}

/**
 * The SDK's ids: a root span takes the trace id its request's sampling was decided on (set in
 * `next` right before the span starts), so the SDK's sampler, given the same id, decides alike.
 */
class RequestIds implements IdGenerator {
  next: string | undefined;
  generateTraceId(): string {
    const id = this.next ?? newTraceId();
    this.next = undefined;
    return id;
  }
  generateSpanId(): string {
    return newSpanId();
  }
}

/** `traceparent` (and `tracestate`) of a span context, as the W3C propagator writes them. */
function contextHeaders(c: SpanContext): Record<string, string> {
  const flags = c.traceFlags & 0xff;
  const headers: Record<string, string> = { traceparent: `00-${c.traceId}-${c.spanId}-${flags < 16 ? '0' : ''}${flags.toString(16)}` };
  const state = c.traceState?.serialize();
  if (state) headers.tracestate = state;
  return headers;
}

const NO_ATTRIBUTES: Attributes = {};

/** A request's operation as the GenAI conventions name it. */
const OPERATION: Record<string, string> = {
  chat: 'chat',
  completions: 'text_completion',
  embeddings: 'embeddings',
  responses: 'chat',
  messages: 'chat',
};

/**
 * One API request's SERVER span and its attempts (router/types.ts's RouteTrace); its ids are the
 * ones its log lines carry (logger.ts's TraceIds).
 */
export class RequestTrace {
  private ctx_: Context | undefined;
  /** a request that is not sampled: the trace context all its attempts pass upstream */
  private unsampled: Record<string, string> | undefined;
  private readonly attempts: AttemptTrace[] = [];
  private ended = false;

  constructor(
    readonly span: Span,
    private readonly parent: Context,
    private readonly owner: Tracing,
    readonly recordContent: boolean,
    /** the route the span started with (`http.route`) */
    private readonly route: string,
  ) {}

  /** The trace id of this request's span, for its log lines. */
  get traceId(): string {
    return this.span.spanContext().traceId;
  }

  /** The span id of this request's span, for its log lines. */
  get spanId(): string {
    return this.span.spanContext().spanId;
  }

  /** The context of this request's span (its attempts' parent). */
  get ctx(): Context {
    return (this.ctx_ ??= trace.setSpan(this.parent, this.span));
  }

  /**
   * A CLIENT span for one upstream attempt, child of this request's span. A request that is not
   * sampled has no sampled attempt (every sampler here decides by the trace, or by its parent: the
   * request's span): its attempts make no span, and pass the request span's context upstream, in
   * the same trace and not sampled, as a span that records nothing would.
   */
  attempt(f: AttemptFacts): AttemptTrace {
    let a: AttemptTrace;
    if (this.span.isRecording()) {
      const op = OPERATION[f.op] ?? f.op;
      const span = this.owner.tracer.startSpan(`${op} ${f.model}`, { kind: SpanKind.CLIENT, startTime: now() }, this.ctx);
      // the samplers decide by the trace alone: the attributes are built only for a span that records
      if (span.isRecording()) span.setAttributes(attemptAttributes(op, f));
      a = new AttemptTrace(span, contextHeaders(span.spanContext()), this);
    } else {
      this.unsampled ??= contextHeaders(this.span.spanContext());
      a = new AttemptTrace(this.span, this.unsampled, this);
    }
    this.attempts.push(a);
    return a;
  }

  /** The request's answer has finished (or the client went away): both spans end. */
  finish(status: number, f: RequestEndFacts): void {
    if (this.ended) return;
    this.ended = true;
    // asked before the attempts end (an ended span no longer records)
    const carried = this.attempts.some(servedRecording);
    for (const a of this.attempts) a.settle(f);
    const s = this.span;
    if (s.isRecording()) {
      s.setAttribute('http.response.status_code', status);
      if (f.route !== this.route) s.setAttribute('http.route', f.route);
      if (f.model !== undefined) s.setAttribute('switchyard.model', f.model);
      if (f.attempts !== undefined) s.setAttribute('switchyard.attempts', f.attempts);
      if (f.cache !== undefined) s.setAttribute('switchyard.cache', f.cache);
      if (f.stream !== undefined) s.setAttribute('switchyard.stream', f.stream);
      if (f.key !== undefined) s.setAttribute('switchyard.key', f.key);
      // an answer an attempt served: its backend, model, usage, cost and first chunk are on that
      // attempt's span (each attribute once per trace); a cache hit has no attempt to carry them
      if (!carried) {
        if (f.backend !== undefined) s.setAttribute('switchyard.backend', f.backend);
        if (f.upstreamModel !== undefined) s.setAttribute('gen_ai.request.model', f.upstreamModel);
        if (f.promptTokens !== undefined) s.setAttribute('gen_ai.usage.input_tokens', f.promptTokens);
        if (f.completionTokens !== undefined) s.setAttribute('gen_ai.usage.output_tokens', f.completionTokens);
        if (f.costUsd !== undefined) s.setAttribute('switchyard.cost_usd', f.costUsd);
        if (f.ttftMs !== undefined) s.setAttribute('switchyard.ttft_ms', Math.round(f.ttftMs * 100) / 100);
      }
      if (f.errorCode) s.setAttribute('switchyard.error.code', f.errorCode);
      if (status >= 500) {
        s.setAttribute('error.type', f.errorCode ?? String(status));
        s.setStatus({ code: SpanStatusCode.ERROR });
      }
    }
    if (s.isRecording()) s.end(now());
  }
}

/** An attempt that served the answer on a span that records (its span carries the answer's facts). */
const servedRecording = (a: AttemptTrace): boolean => a.served && a.span.isRecording();

/** An attempt span's attributes at its start. */
function attemptAttributes(op: string, f: AttemptFacts): Attributes {
  const attributes: Attributes = {
    'gen_ai.operation.name': op,
    'gen_ai.provider.name': GENAI_PROVIDER[f.backendType] ?? f.backendType,
    'gen_ai.request.model': f.model,
    'switchyard.backend': f.backend,
    'switchyard.attempt': f.attempt,
    'switchyard.retry': f.retry,
    'switchyard.failover': f.failover,
    'switchyard.policy': f.policy,
    'switchyard.breaker.state': f.breaker,
  };
  if (f.maxTokens !== undefined) attributes['gen_ai.request.max_tokens'] = f.maxTokens;
  return attributes;
}

/** A gateway's tracer while tracing is on (server/generations.ts makes it; GenerationDeps carry it). */
export class Tracing {
  readonly tracer: Tracer;
  private readonly sampler: Sampler;

  constructor(
    private readonly provider: BasicTracerProvider,
    readonly setup: TracingSetup,
    private readonly idGen: RequestIds,
  ) {
    this.tracer = provider.getTracer('switchyard');
    this.sampler = setup.sampler;
  }

  /**
   * A SERVER span for an API request, continuing the client's trace context. Sampling is decided
   * here first, on the request's trace id: a request that is not sampled makes no SDK span at all
   * (a span context of its own for its logs and its upstream calls), which is most of them at a
   * low ratio.
   */
  startRequest(requestId: string, method: string, path: string, route: string, headers: Readonly<Record<string, string | string[] | undefined>>): RequestTrace {
    const continued = headers.traceparent !== undefined;
    const parent = continued ? propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter) : ROOT_CONTEXT;
    const from = continued ? trace.getSpanContext(parent) : undefined;
    const valid = from !== undefined && isSpanContextValid(from);
    const [ownTrace, spanId] = newIds();
    const traceId = valid ? from.traceId : ownTrace;
    const name = route === 'unmatched' ? method : `${method} ${route}`;
    let span: Span;
    if (this.sampler.shouldSample(parent, traceId, name, SpanKind.SERVER, NO_ATTRIBUTES, []).decision === SamplingDecision.NOT_RECORD) {
      span = trace.wrapSpanContext({ traceId, spanId, traceFlags: TraceFlags.NONE, traceState: valid ? from.traceState : undefined });
    } else {
      if (!valid) this.idGen.next = traceId;
      span = this.tracer.startSpan(name, { kind: SpanKind.SERVER, startTime: now() }, parent);
      this.idGen.next = undefined;
      if (span.isRecording()) span.setAttributes({ 'http.request.method': method, 'url.path': path, 'http.route': route, 'switchyard.request_id': requestId });
    }
    return new RequestTrace(span, parent, this, this.setup.recordContent, route);
  }

  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}

/** Starts a tracer as configured, or none (undefined) while tracing is off. */
export function startTracing(cfg: TracingConfig | undefined, logger: Warn, version: string, env: Env = process.env): Tracing | undefined {
  const setup = resolveTracing(cfg, env);
  if (setup === null) return undefined;
  const options = { url: setup.url, headers: setup.headers };
  const exporter = setup.protocol === 'http/json' ? new OtlpJsonExporter(options) : new OtlpProtoExporter(options);
  const attrs: Attributes = { 'service.name': setup.serviceName ?? 'switchyard', 'service.version': version };
  for (const [k, v] of Object.entries(cfg?.resource_attributes ?? {})) attrs[k] = v;
  // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME win over the block
  let resource = resourceFromAttributes(attrs).merge(detectResources({ detectors: [envDetector] }));
  if (setup.serviceName !== undefined) resource = resource.merge(resourceFromAttributes({ 'service.name': setup.serviceName }));
  const idGenerator = new RequestIds();
  const provider = new BasicTracerProvider({
    resource,
    sampler: setup.sampler,
    idGenerator,
    spanProcessors: [new BatchSpanProcessor(new ReportingExporter(exporter, logger, setup.url))],
  });
  const tracing = new Tracing(provider, setup, idGenerator);
  logger.info('tracing on', { endpoint: setup.url, protocol: setup.protocol });
  return tracing;
}

/** Longest a gateway's close waits for the last spans to leave (an unreachable collector's retries take longer). */
const SHUTDOWN_WAIT_MS = 3000;

/** Flushes what is pending and turns tracing off (gateway close), waiting at most SHUTDOWN_WAIT_MS. */
export async function stopTracing(t: Tracing | undefined): Promise<void> {
  if (t === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((r) => {
    timer = setTimeout(r, SHUTDOWN_WAIT_MS);
    timer.unref();
  });
  try {
    await Promise.race([t.shutdown(), bound]);
  } catch {
    // an unreachable collector was reported by the exporter
  } finally {
    clearTimeout(timer);
  }
}
