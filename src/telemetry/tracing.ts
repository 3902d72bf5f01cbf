/**
 * OpenTelemetry traces with the GenAI semantic conventions, through OpenTelemetry's own SDK
 * (BatchSpanProcessor, OTLP/HTTP exporters). Off unless configured: the standard `OTEL_*`
 * variables, or `telemetry.tracing` in providers.yaml (the variables win).
 *
 * Spans: a SERVER span per API request (continuing the client's `traceparent` / `tracestate`), and
 * a CLIENT span per upstream attempt under it, named `{gen_ai.operation.name} {gen_ai.request.model}`,
 * whose context goes upstream as `traceparent`. A stream's attempt span ends when the stream ends.
 *
 * Hot path: `tracing` is null while tracing is off, and every hook is one call behind that null
 * check; nothing else (no span objects, no context work) happens on a request. Contexts are passed
 * explicitly (no global context manager, no AsyncLocalStorage): the router finds a request's trace
 * by its request id, the upstream client an attempt's by the attempt's abort object.
 */
import { performance } from 'node:perf_hooks';
import { defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { TracingConfig } from '../config/schema.ts';
import { GENAI_PROVIDER } from './metrics.ts';
import { ReportingExporter, resolveTracing, type Env, type TracingSetup, type Warn } from './tracing-setup.ts';

export { resolveTracing, type TracingSetup } from './tracing-setup.ts';
export type { AttemptFacts, FailureFacts, RequestEndFacts } from './tracing-facts.ts';
import type { AttemptFacts, FailureFacts, RequestEndFacts } from './tracing-facts.ts';
import type { ChunkPart, EventPart } from '../protocol/stream-part.ts';

const propagator = new W3CTraceContextPropagator();

/**
 * Epoch ms on one clock for every span's start, end and event (the SDK's own anchors each span to
 * Date.now(), so a child could end "after" its parent): performance.now() from its time origin.
 */
const now = (): number => performance.timeOrigin + performance.now();

/** A request's operation as the GenAI conventions name it. */
const OPERATION: Record<string, string> = {
  chat: 'chat',
  completions: 'text_completion',
  embeddings: 'embeddings',
  responses: 'chat',
  messages: 'chat',
};

/**
 * Most characters of recorded content per attribute (`record_content`): a prompt, a JSON answer's
 * output, a stream's accumulated text. Longer values are cut there.
 */
export const MAX_CONTENT_CHARS = 64 * 1024;

const bounded = (text: string): string => (text.length > MAX_CONTENT_CHARS ? text.slice(0, MAX_CONTENT_CHARS) : text);

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Upstream origins' host and port, parsed once per origin (a gateway calls a handful). */
const servers = new Map<string, { address: string; port: number } | undefined>();

function serverOf(origin: string): { address: string; port: number } | undefined {
  if (servers.has(origin)) return servers.get(origin);
  let server: { address: string; port: number } | undefined;
  try {
    const u = new URL(origin);
    server = { address: u.hostname, port: u.port !== '' ? Number(u.port) : u.protocol === 'https:' ? 443 : 80 };
  } catch {
    server = undefined;
  }
  if (servers.size < 256) servers.set(origin, server);
  return server;
}

/** One upstream attempt's CLIENT span. */
export class AttemptTrace {
  /** `traceparent` (and `tracestate`) of this span, for the upstream call */
  readonly headers: Record<string, string>;
  private endAt: number | undefined;
  private ended = false;
  /** the attempt that served the answer: usage and cost come from the request's end */
  served = false;
  /**
   * A stream's parts are shown to `part()`: only while the span records (its cache token counts,
   * and with `record_content` its text); the router asks this before each call.
   */
  readonly watch: boolean;
  /** a stream's text so far, by choice index (`record_content` only) */
  private texts: string[] | undefined;
  /** characters in `texts` */
  private textChars = 0;
  /** the shape the stream's output is recorded in: chat choices, Messages content, Responses output */
  private textShape: 'choices' | 'content' | 'output' = 'choices';

  /**
   * @param span the attempt's span; for a request that is not sampled, the request's own
   *   (non-recording) span
   * @param headers the trace context the upstream call carries (see RequestTrace.attempt)
   */
  constructor(
    readonly span: Span,
    headers: Record<string, string>,
    /** its request (what the attempt needs of it) */
    private readonly owner: { readonly recordContent: boolean },
  ) {
    this.headers = headers;
    this.watch = span.isRecording();
  }

  /** The call as sent upstream: server address, request parameters, and (opted in) the messages. */
  call(origin: string, body: unknown): void {
    const s = this.span;
    if (!s.isRecording()) return;
    const server = serverOf(origin);
    if (server !== undefined) {
      s.setAttribute('server.address', server.address);
      s.setAttribute('server.port', server.port);
    }
    if (!isObj(body)) return;
    const maxTokens = num(body.max_completion_tokens) ?? num(body.max_tokens) ?? num(body.max_output_tokens);
    if (maxTokens !== undefined) s.setAttribute('gen_ai.request.max_tokens', maxTokens);
    const temperature = num(body.temperature);
    if (temperature !== undefined) s.setAttribute('gen_ai.request.temperature', temperature);
    const topP = num(body.top_p);
    if (topP !== undefined) s.setAttribute('gen_ai.request.top_p', topP);
    if (this.owner.recordContent) {
      const input = body.messages ?? body.input ?? body.prompt;
      if (input !== undefined) s.setAttribute('gen_ai.input.messages', bounded(JSON.stringify(input)));
    }
  }

  /** A JSON answer (chat completion, completion, embeddings, native Responses / Messages object). */
  answer(result: unknown): void {
    this.served = true;
    this.endAt = now();
    const s = this.span;
    if (!s.isRecording() || !isObj(result) || Object.getPrototypeOf(result) !== Object.prototype) return;
    const id = str(result.id);
    if (id !== undefined) s.setAttribute('gen_ai.response.id', id);
    const model = str(result.model);
    if (model !== undefined) s.setAttribute('gen_ai.response.model', model);
    const reasons: string[] = [];
    if (Array.isArray(result.choices)) {
      for (const c of result.choices as unknown[]) if (isObj(c) && typeof c.finish_reason === 'string') reasons.push(c.finish_reason);
    }
    const stop = str(result.stop_reason) ?? (result.object === 'response' ? str(result.status) : undefined);
    if (stop !== undefined) reasons.push(stop);
    if (reasons.length > 0) s.setAttribute('gen_ai.response.finish_reasons', reasons);
    this.usage(result.usage);
    if (this.owner.recordContent) {
      const out = result.choices ?? result.content ?? result.output;
      if (out !== undefined) s.setAttribute('gen_ai.output.messages', bounded(JSON.stringify(out)));
    }
  }

  private usage(u: unknown): void {
    if (!isObj(u)) return;
    const s = this.span;
    const input = num(u.prompt_tokens) ?? num(u.input_tokens);
    const output = num(u.completion_tokens) ?? num(u.output_tokens);
    if (input !== undefined) s.setAttribute('gen_ai.usage.input_tokens', input);
    if (output !== undefined) s.setAttribute('gen_ai.usage.output_tokens', output);
    const details = isObj(u.prompt_tokens_details) ? u.prompt_tokens_details : isObj(u.input_tokens_details) ? u.input_tokens_details : undefined;
    const cacheRead = num(u.cache_read_input_tokens) ?? num(details?.cached_tokens);
    if (cacheRead !== undefined) s.setAttribute('gen_ai.usage.cache_read.input_tokens', cacheRead);
    const cacheCreation = num(u.cache_creation_input_tokens) ?? num(details?.cache_creation_tokens);
    if (cacheCreation !== undefined) s.setAttribute('gen_ai.usage.cache_creation.input_tokens', cacheCreation);
  }

  /** A stream reached its commit point: time to first chunk, and the response's id and model. */
  committed(ttftMs: number, first: ChunkPart<object> | EventPart | object | undefined): void {
    const s = this.span;
    this.served = true;
    if (!s.isRecording()) return;
    s.setAttribute('switchyard.ttft_ms', Math.round(ttftMs * 100) / 100);
    s.addEvent('gen_ai.first_chunk', { 'switchyard.ttft_ms': Math.round(ttftMs * 100) / 100 }, now());
    const head = headOf(first);
    if (head === undefined) return;
    const id = str(head.id);
    if (id !== undefined) s.setAttribute('gen_ai.response.id', id);
    const model = str(head.model);
    if (model !== undefined) s.setAttribute('gen_ai.response.model', model);
  }

  /** A stream part that finishes the answer: its finish reasons. */
  finished(part: object): void {
    const s = this.span;
    if (!s.isRecording()) return;
    const head = headOf(part);
    if (head === undefined) return;
    const reasons: string[] = [];
    if (Array.isArray(head.choices)) for (const c of head.choices as unknown[]) if (isObj(c) && typeof c.finish_reason === 'string') reasons.push(c.finish_reason);
    if (isObj(head.delta) && typeof head.delta.stop_reason === 'string') reasons.push(head.delta.stop_reason);
    if (reasons.length > 0) s.setAttribute('gen_ai.response.finish_reasons', reasons);
  }

  /**
   * A stream part as the upstream sent it (only while `watch`): its usage (the cache token counts;
   * input and output come from the request's end) and, with `record_content`, its text.
   */
  part(p: object): void {
    const part = p as ChunkPart<Obj> | EventPart;
    if (part.kind === 'chunk') {
      // a plain part carries no usage, by its grammar
      if (!part.plain) {
        const u = part.usage();
        if (u) this.usage(u);
      }
      if (this.owner.recordContent) this.chunkText(part.chunk as Obj);
      return;
    }
    if (part.usage !== undefined) this.usage(part.usage);
    if (this.owner.recordContent) this.eventText(part);
  }

  private addText(i: number, t: string): void {
    if (this.textChars >= MAX_CONTENT_CHARS || t === '') return;
    const cut = t.length > MAX_CONTENT_CHARS - this.textChars ? t.slice(0, MAX_CONTENT_CHARS - this.textChars) : t;
    this.texts ??= [];
    while (this.texts.length <= i) this.texts.push('');
    this.texts[i] += cut;
    this.textChars += cut.length;
  }

  private chunkText(chunk: Obj): void {
    if (!Array.isArray(chunk.choices)) return;
    for (const c of chunk.choices as unknown[]) {
      if (!isObj(c)) continue;
      const i = num(c.index) ?? 0;
      const t = isObj(c.delta) ? str(c.delta.content) : str(c.text);
      if (t !== undefined && i >= 0 && i < 128) this.addText(i, t);
    }
  }

  /** A native stream's text deltas: Messages `content_block_delta` (text_delta), Responses `response.output_text.delta`. */
  private eventText(e: EventPart): void {
    const messages = e.event === 'content_block_delta';
    if (!messages && e.event !== 'response.output_text.delta') return;
    let v: unknown;
    try {
      v = JSON.parse(e.data);
    } catch {
      return;
    }
    if (!isObj(v)) return;
    this.textShape = messages ? 'content' : 'output';
    const t = messages ? (isObj(v.delta) && v.delta.type === 'text_delta' ? str(v.delta.text) : undefined) : str(v.delta);
    if (t !== undefined) this.addText(0, t);
  }

  /** The stream's text as `gen_ai.output.messages`, in the shape its protocol's JSON answer has. */
  private recordText(): void {
    const texts = this.texts;
    if (texts === undefined || !this.span.isRecording()) return;
    const t = texts.join('');
    const out =
      this.textShape === 'content'
        ? [{ type: 'text', text: t }]
        : this.textShape === 'output'
          ? [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: t }] }]
          : texts.map((content, index) => ({ index, message: { role: 'assistant', content } }));
    this.span.setAttribute('gen_ai.output.messages', JSON.stringify(out));
  }

  /** A stream ended (after its commit point): the span ends now, its usage filled in at the request's end. */
  streamEnded(outcome: 'success' | 'failure' | 'neutral', err?: FailureFacts): void {
    this.endAt = now();
    if (this.texts !== undefined) this.recordText();
    if (outcome === 'neutral') this.span.setAttribute('switchyard.client_closed', true);
    if (outcome === 'failure' && err !== undefined) this.markFailed(err);
  }

  /** The attempt failed (before a commit point, or a JSON call): the span ends with the error. */
  fail(err: FailureFacts): void {
    if (this.ended) return;
    if (err.status === 499) this.span.setAttribute('switchyard.client_closed', true);
    else this.markFailed(err);
    this.end();
  }

  private markFailed(err: FailureFacts): void {
    const s = this.span;
    s.setAttribute('error.type', err.code ?? err.type);
    s.setAttribute('switchyard.error.status', err.status);
    s.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
  }

  /** Usage and cost of the request, on the attempt that served it. */
  settle(f: RequestEndFacts): void {
    if (this.ended) return;
    const s = this.span;
    if (this.served && s.isRecording()) {
      if (f.promptTokens !== undefined) s.setAttribute('gen_ai.usage.input_tokens', f.promptTokens);
      if (f.completionTokens !== undefined) s.setAttribute('gen_ai.usage.output_tokens', f.completionTokens);
      if (f.costUsd !== undefined) s.setAttribute('switchyard.cost_usd', f.costUsd);
    }
    this.end();
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end(this.endAt ?? now());
  }
}

/** The first JSON object of a part: a chunk, or a native event's data (its `message` / `response` for id and model). */
function headOf(part: unknown): Obj | undefined {
  if (!isObj(part)) return undefined;
  // read, not edited: the part keeps the text it is forwarded as
  if (part.kind === 'chunk') return (part as unknown as ChunkPart<Obj>).chunk as Obj;
  if (part.kind === 'event' && typeof part.data === 'string') {
    try {
      const v: unknown = JSON.parse(part.data);
      if (!isObj(v)) return undefined;
      if (isObj(v.message)) return v.message;
      if (isObj(v.response)) return v.response;
      return v;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** One API request's SERVER span and its attempts. */
export class RequestTrace {
  private ctx_: Context | undefined;
  /** a request that is not sampled: the trace context all its attempts pass upstream */
  private unsampled: Record<string, string> | undefined;
  private readonly attempts: AttemptTrace[] = [];
  /** the attempts' keys in Tracing.byAbort */
  private readonly keys: object[] = [];
  private ended = false;

  constructor(
    readonly span: Span,
    private readonly parent: Context,
    private readonly owner: Tracing,
    readonly requestId: string,
    readonly recordContent: boolean,
  ) {}

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
      const headers: Record<string, string> = {};
      propagator.inject(trace.setSpan(this.ctx, span), headers, defaultTextMapSetter);
      a = new AttemptTrace(span, headers, this);
    } else {
      if (this.unsampled === undefined) {
        this.unsampled = {};
        propagator.inject(this.ctx, this.unsampled, defaultTextMapSetter);
      }
      a = new AttemptTrace(this.span, this.unsampled, this);
    }
    this.attempts.push(a);
    const key = f.abortKey ?? a;
    this.keys.push(key);
    this.owner.byAbort.set(key, a);
    return a;
  }

  /** The request's answer has finished (or the client went away): both spans end. */
  finish(status: number, f: RequestEndFacts): void {
    if (this.ended) return;
    this.ended = true;
    this.owner.forget(this);
    for (const k of this.keys) this.owner.byAbort.delete(k);
    for (const a of this.attempts) a.settle(f);
    const s = this.span;
    if (s.isRecording()) {
      s.setAttribute('http.response.status_code', status);
      s.setAttribute('http.route', f.route);
      if (f.model !== undefined) s.setAttribute('switchyard.model', f.model);
      if (f.backend !== undefined) s.setAttribute('switchyard.backend', f.backend);
      if (f.upstreamModel !== undefined) s.setAttribute('gen_ai.request.model', f.upstreamModel);
      if (f.attempts !== undefined) s.setAttribute('switchyard.attempts', f.attempts);
      if (f.cache !== undefined) s.setAttribute('switchyard.cache', f.cache);
      if (f.stream !== undefined) s.setAttribute('switchyard.stream', f.stream);
      if (f.key !== undefined) s.setAttribute('switchyard.key', f.key);
      if (f.promptTokens !== undefined) s.setAttribute('gen_ai.usage.input_tokens', f.promptTokens);
      if (f.completionTokens !== undefined) s.setAttribute('gen_ai.usage.output_tokens', f.completionTokens);
      if (f.costUsd !== undefined) s.setAttribute('switchyard.cost_usd', f.costUsd);
      if (f.ttftMs !== undefined) s.setAttribute('switchyard.ttft_ms', Math.round(f.ttftMs * 100) / 100);
      if (f.errorCode) s.setAttribute('switchyard.error.code', f.errorCode);
      if (status >= 500) {
        s.setAttribute('error.type', f.errorCode ?? String(status));
        s.setStatus({ code: SpanStatusCode.ERROR });
      }
    }
    s.end(now());
  }
}

/** An attempt span's attributes at its start. */
function attemptAttributes(op: string, f: AttemptFacts): Attributes {
  const attributes: Attributes = {
    'gen_ai.operation.name': op,
    'gen_ai.provider.name': GENAI_PROVIDER[f.backendType] ?? f.backendType,
    'gen_ai.request.model': f.model,
    'switchyard.model': f.publicModel,
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

/** The tracer of this process while tracing is on. */
export class Tracing {
  readonly tracer: Tracer;
  /** requests in flight by request id (the router's way to its request's span) */
  private readonly requests = new Map<string, RequestTrace>();
  /**
   * attempts in flight by their abort object (the upstream client's way to its attempt's span),
   * until their request finishes (a Map: a WeakMap's entries cost the garbage collector more)
   */
  readonly byAbort = new Map<object, AttemptTrace>();

  constructor(
    private readonly provider: BasicTracerProvider,
    readonly setup: TracingSetup,
  ) {
    this.tracer = provider.getTracer('switchyard');
  }

  /** A SERVER span for an API request, continuing the client's trace context. */
  startRequest(requestId: string, method: string, path: string, route: string, headers: Readonly<Record<string, string | string[] | undefined>>): RequestTrace {
    const parent = headers.traceparent !== undefined ? propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter) : ROOT_CONTEXT;
    const span = this.tracer.startSpan(route === 'unmatched' ? method : `${method} ${route}`, { kind: SpanKind.SERVER, startTime: now() }, parent);
    // built only for a span that records (the samplers decide by the trace alone)
    if (span.isRecording()) span.setAttributes({ 'http.request.method': method, 'url.path': path, 'http.route': route, 'switchyard.request_id': requestId });
    const r = new RequestTrace(span, parent, this, requestId, this.setup.recordContent);
    this.requests.set(requestId, r);
    return r;
  }

  request(requestId: string): RequestTrace | undefined {
    return this.requests.get(requestId);
  }

  forget(r: RequestTrace): void {
    if (this.requests.get(r.requestId) === r) this.requests.delete(r.requestId);
  }

  /** The attempt an upstream call belongs to, by the abort it was given. */
  attemptOf(abort: object): AttemptTrace | undefined {
    return this.byAbort.get(abort);
  }

  /** trace_id and span_id of a request's server span, for its log lines. */
  ids(requestId: string): { trace_id: string; span_id: string } | undefined {
    const r = this.requests.get(requestId);
    if (r === undefined) return undefined;
    const c = r.span.spanContext();
    return { trace_id: c.traceId, span_id: c.spanId };
  }

  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}

/** The process's tracing while it is on; null while off (the one check on the request path). */
export let tracing: Tracing | null = null;

/**
 * Starts tracing as configured (replacing a tracer already running), or leaves it off. Returns
 * the tracer, or null when off.
 */
export function startTracing(cfg: TracingConfig | undefined, logger: Warn, version: string, env: Env = process.env): Tracing | null {
  const setup = resolveTracing(cfg, env);
  if (setup === null) return null;
  const options = { url: setup.url, headers: setup.headers };
  const exporter = setup.protocol === 'http/json' ? new OtlpJsonExporter(options) : new OtlpProtoExporter(options);
  const attrs: Attributes = { 'service.name': setup.serviceName ?? 'switchyard', 'service.version': version };
  for (const [k, v] of Object.entries(cfg?.resource_attributes ?? {})) attrs[k] = v;
  // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME win over the block
  let resource = resourceFromAttributes(attrs).merge(detectResources({ detectors: [envDetector] }));
  if (setup.serviceName !== undefined) resource = resource.merge(resourceFromAttributes({ 'service.name': setup.serviceName }));
  const provider = new BasicTracerProvider({
    resource,
    sampler: setup.sampler,
    spanProcessors: [new BatchSpanProcessor(new ReportingExporter(exporter, logger, setup.url))],
  });
  const previous = tracing;
  tracing = new Tracing(provider, setup);
  if (previous !== null) void previous.shutdown().catch(() => {});
  logger.info('tracing on', { endpoint: setup.url, protocol: setup.protocol });
  return tracing;
}

/** Longest a gateway's close waits for the last spans to leave (an unreachable collector's retries take longer). */
const SHUTDOWN_WAIT_MS = 3000;

/** Flushes what is pending and turns tracing off (gateway close), waiting at most SHUTDOWN_WAIT_MS. */
export async function stopTracing(t: Tracing | null): Promise<void> {
  if (t === null) return;
  if (tracing === t) tracing = null;
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
