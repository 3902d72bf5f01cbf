/**
 * One upstream attempt's CLIENT span (tracing.ts makes it under its request's SERVER span): the
 * call as sent, the answer or the stream's parts as they pass (usage, ids, finish reasons, time to
 * first chunk; with `record_content` the output text), and its end.
 */
import { performance } from 'node:perf_hooks';
import { SpanStatusCode, type Span } from '@opentelemetry/api';
import type { FailureFacts, RequestEndFacts } from './tracing-facts.ts';
import type { ChunkPart, EventPart } from '../protocol/stream-part.ts';
import type { TraceIds } from './logger.ts';

/**
 * Epoch ms on one clock for every span's start, end and event (the SDK's own anchors each span to
 * Date.now(), so a child could end "after" its parent): performance.now() from its time origin.
 */
export const now = (): number => performance.timeOrigin + performance.now();

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

/**
 * One upstream attempt's CLIENT span. The router (router/types.ts's AttemptSpan) and, through the
 * attempt's CallContext, the backend (backends/contract.ts's CallTrace) tell it what happens.
 */
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
    private readonly owner: TraceIds & { readonly recordContent: boolean },
  ) {
    this.headers = headers;
    this.watch = span.isRecording();
  }

  /** The ids its request's log lines carry (the request's SERVER span's). */
  get request(): TraceIds {
    return this.owner;
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
    const s = this.span;
    if (!s.isRecording()) return;
    this.endAt = now();
    if (!isObj(result) || Object.getPrototypeOf(result) !== Object.prototype) return;
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
    if (!this.span.isRecording()) return;
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
    if (this.span.isRecording()) this.span.end(this.endAt ?? now());
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
