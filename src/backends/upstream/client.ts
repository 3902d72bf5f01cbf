/**
 * The HTTP client for upstream JSON and SSE APIs: OpenAI-compatible ones (the `openai` and
 * `llamacpp` backends) and Anthropic's native Messages API. On the hot path: `undici`'s
 * `Dispatcher.dispatch` on the backend's pooled keep-alive Agent with handlers of our own
 * (backends/upstream/call.ts), with none of fetch's web-stream machinery (about five times the CPU per request; see bench/upstream-client.ts) nor
 * `Dispatcher.request`'s Readable body: a JSON answer's bytes are collected as they arrive
 * (JsonCall), a stream's are fed straight to the SSE reader (StreamCall, backends/upstream/stream-call.ts),
 * and the end of a body is known in the same turn as its last bytes. What a non-2xx answer means
 * is in backends/upstream/status.ts.
 *
 * - `postJson` → the parsed JSON body of a 2xx answer; `postForBytes` → its bytes; `postStream` →
 *   once the upstream answered 2xx, an async iterator of the `data:` payloads of its event stream
 *   as chunk parts (protocol/stream-part.ts).
 * - Request bodies are serialised once. Headers: the backend's static ones (authorization,
 *   organization, project, configured extras) plus the call's (`x-request-id`) and `accept`.
 * - Every failure is a GatewayError, except aborts: when the call's signal fired, its reason is
 *   thrown as it is, so the router (which knows why it aborted) classifies it.
 * - Bodies are read with caps (success: `maxResponseBytes`, errors: 1 MiB, one SSE event:
 *   `maxResponseBytes`), and always either read to the end (so the connection goes back to the
 *   pool) or aborted (so it closes) — including when a stream's consumer stops early.
 *
 * SSE is parsed in backends/upstream/sse-reader.ts with eventsource-parser (spec-complete, fast on whole-event chunks). `data: [DONE]`
 * ends a stream; `data: {"error":…}` raises the backend's mid-stream error; servers with other
 * error framings plug in an `SseFraming`.
 */
import { Agent } from 'undici';
import { bodyPool } from './body-pool.ts';
import { JsonCall, type UpstreamCall } from './call.ts';
import { StreamCall } from './stream-call.ts';
import { upstreamMalformed } from '../../errors/upstream.ts';
import type { CallOptions, UpstreamClientOptions } from './types.ts';
import type { ChunkPart, EventPart } from '../../protocol/stream-part.ts';
import type { EventDecoder } from './sse-reader.ts';
import type { CallTrace } from '../contract.ts';

/**
 * The pooled keep-alive dispatcher of one backend's upstream: at most `connections` sockets. Its
 * header and body timeouts are off: the router enforces its own deadlines, and undici's defaults
 * (300 s) would be a second, hidden one.
 */
export function upstreamAgent(connections: number | undefined): Agent {
  return new Agent({ connections, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, headersTimeout: 0, bodyTimeout: 0 });
}

/** One backend's calls to its upstream (its base URL, static headers and pooled dispatcher). */
export class UpstreamClient {
  private readonly origin: string;
  private readonly prefix: string;
  private readonly headers: Record<string, string>;
  private readonly flatHeaders: string[] = [];

  constructor(private readonly o: UpstreamClientOptions) {
    const u = new URL(o.baseUrl);
    this.origin = u.origin;
    this.prefix = u.pathname.replace(/\/+$/, '');
    this.headers = {};
    for (const [k, v] of Object.entries(o.headers)) this.headers[k.toLowerCase()] = v;
    // Bodies are read as they come: no content coding (fetch would have decoded gzip/br).
    this.headers['accept-encoding'] = 'identity';
    for (const k in this.headers) this.flatHeaders.push(k, this.headers[k] as string);
  }

  /** POST a JSON body, answer the parsed JSON of the 2xx response. */
  async postJson(path: string, body: unknown, opts: CallOptions): Promise<unknown> {
    return parseJsonOnce(this.o.backend, await this.call('POST', path, JSON.stringify(body), opts, body));
  }

  /**
   * POST a JSON body, answer the bytes of the 2xx JSON response as they came (for answers that are
   * forwarded without being rebuilt; the caller checks them).
   */
  postForBytes(path: string, body: unknown, opts: CallOptions): Promise<Buffer<ArrayBuffer>> {
    return this.call('POST', path, JSON.stringify(body), opts, body);
  }

  /** GET, answer the parsed JSON of the 2xx response. */
  async getJson(path: string, opts: CallOptions): Promise<unknown> {
    return parseJsonOnce(this.o.backend, await this.call('GET', path, undefined, opts));
  }

  /**
   * POST a JSON body asking for an event stream. Resolves once the upstream answered 2xx; the
   * iterator yields each `data:` payload as a chunk part (its `C`, as the caller vouches), ends at
   * `data: [DONE]` (or at the end of the body), and aborts the read (closing its connection) when
   * abandoned early (`return()`).
   */
  async postStream<C extends object = object>(path: string, body: unknown, opts: CallOptions): Promise<AsyncIterableIterator<ChunkPart<C>>> {
    const headers = this.headersFor('text/event-stream', opts);
    if (opts.trace !== undefined) this.traced(headers, opts.trace, body);
    return new Promise((resolve, reject) => this.dispatch('POST', path, headers, JSON.stringify(body), new StreamCall<C>(this.o, opts.signal, resolve, reject)));
  }

  /**
   * POST a JSON body asking for another protocol's event stream (a native Responses or Messages
   * stream): as postStream, but every event becomes the part `decode` makes of its name and data
   * (which throws for an error event); no `[DONE]`, the body's end ends it.
   */
  async postEventStream(path: string, body: unknown, opts: CallOptions, decode: EventDecoder): Promise<AsyncIterableIterator<EventPart>> {
    const headers = this.headersFor('text/event-stream', opts);
    if (opts.trace !== undefined) this.traced(headers, opts.trace, body);
    return new Promise((resolve, reject) =>
      this.dispatch('POST', path, headers, JSON.stringify(body), new StreamCall<object, EventPart>(this.o, opts.signal, resolve, reject, decode)),
    );
  }

  /** A JSON call: the bytes of its 2xx answer, within `maxResponseBytes` (JsonCall). */
  private call(method: 'GET' | 'POST', path: string, body: string | undefined, opts: CallOptions, value?: unknown): Promise<Buffer<ArrayBuffer>> {
    const headers = this.headersFor('application/json', opts);
    if (opts.trace !== undefined) this.traced(headers, opts.trace, value);
    return new Promise((resolve, reject) => this.dispatch(method, path, headers, body, new JsonCall(this.o, opts.signal, resolve, reject)));
  }

  /** A traced attempt: its `traceparent` goes upstream, and its span learns the call. */
  private traced(headers: string[], at: CallTrace, body: unknown): void {
    for (const k in at.headers) {
      const i = headers.indexOf(k);
      if (i >= 0 && i % 2 === 0) headers[i + 1] = at.headers[k] as string;
      else headers.push(k, at.headers[k] as string);
    }
    at.call(this.origin, body);
  }

  private dispatch(method: 'GET' | 'POST', path: string, headers: string[], body: string | undefined, handler: UpstreamCall): void {
    try {
      this.o.dispatcher.dispatch({ origin: this.origin, path: this.prefix + path, method, headers, body }, handler);
    } catch (err) {
      handler.onResponseError(undefined, err instanceof Error ? err : new Error(String(err)));
    }
  }

  /**
   * The request's headers as undici's flat [name, value, …] list (which it takes without listing an
   * object's keys): the static ones, `accept`, then the call's, which replace a static one of the
   * same name.
   */
  private headersFor(accept: string, opts: CallOptions): string[] {
    const call = opts.headers;
    const flat = this.flatHeaders.slice();
    let clash = false;
    for (const k in call) {
      const name = k.toLowerCase();
      if (name === 'accept' || this.headers[name] !== undefined) clash = true;
    }
    if (!clash) {
      flat.push('accept', accept);
      for (const k in call) flat.push(k.toLowerCase(), call[k] as string);
      return flat;
    }
    // rare: the call sets a header the backend also sets — one value per name, the call's
    const merged: Record<string, string> = { ...this.headers, accept };
    for (const k in call) merged[k.toLowerCase()] = call[k] as string;
    const out: string[] = [];
    for (const k in merged) out.push(k, merged[k] as string);
    return out;
  }
}

/**
 * A JSON answer's bytes → its value, or the backend's `upstream_malformed` error. For bytes read
 * only to be parsed: once parsed (the text is a copy), a buffer the body pool lent (answers ≥ 64 KiB
 * of a known length) goes back to it; others are left alone.
 */
export function parseJsonOnce(backend: string, bytes: Buffer<ArrayBuffer>): unknown {
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw upstreamMalformed(backend, 'invalid JSON');
  } finally {
    bodyPool.give(bytes);
  }
}
