/**
 * The hot path to an OpenAI-compatible upstream: `undici`'s `Dispatcher.request` on the backend's
 * pooled keep-alive Agent, with none of fetch's web-stream machinery (which costs about five times
 * the CPU per request; see bench/upstream-client.ts). Streams go one level lower, through
 * `Dispatcher.dispatch` with a handler of our own (StreamCall, openai-stream-call.ts) that feeds
 * the body's bytes straight to the SSE reader: no Readable, no async iterator, no promise per
 * read, and the end of the body known in the same turn as its last bytes (about 7% of the
 * gateway's CPU per stream). What a non-2xx answer means is in openai-status.ts.
 *
 * - `postJson` → the parsed JSON body of a 2xx answer; `postStream` → once the upstream answered
 *   2xx, an async iterator of the parsed `data:` payloads of its event stream.
 * - Request bodies are serialised once. Headers: the backend's static ones (authorization,
 *   organization, project, configured extras) plus the call's (`x-request-id`) and `accept`.
 * - Every failure is a GatewayError, except aborts: when the call's signal fired, its reason is
 *   thrown as it is, so the router (which knows why it aborted) classifies it.
 * - Bodies are read with caps (success: `maxResponseBytes`, errors: 1 MiB, one SSE event:
 *   `maxResponseBytes`), and always either read to the end (so the connection goes back to the
 *   pool) or destroyed (so it closes) — including when a stream's consumer stops early.
 *
 * SSE is parsed in openai-sse.ts with eventsource-parser (spec-complete, fast on whole-event chunks). `data: [DONE]`
 * ends a stream; `data: {"error":…}` raises the backend's mid-stream error; servers with other
 * error framings plug in an `SseFraming`.
 */
import type { EventSourceMessage } from 'eventsource-parser';
import type { Dispatcher } from 'undici';
import { GatewayError } from '../errors.ts';
import type { UpstreamAbort } from './base-llm.ts';
import { abortReason, discard, errorCode, responseTooLarge } from './openai-sse.ts';
import { encodingError, MAX_ERROR_BYTES, statusErrorOf } from './openai-status.ts';
import { StreamCall } from './openai-stream-call.ts';
import { redact, upstreamMalformed, upstreamUnreachable, type UpstreamErrorInfo } from './upstream-errors.ts';

/** What a non-2xx answer said. */
export interface StatusErrorInfo extends UpstreamErrorInfo {
  /** The body as text when it was not JSON (capped), else undefined. */
  bodyText: string | undefined;
}

/**
 * Error framings beyond `data: {"error":…}`. Each hook returns the `data:` payload to handle in
 * place of what it was given (an error payload is one with an "error" key), or null to drop it.
 */
export interface SseFraming {
  /** An event; `ev.event` is its `event:` name, if any. */
  event?(ev: EventSourceMessage): string | null;
  /** A line whose field is not an SSE field (`error: {…}`): handled as an event of its own. */
  unknownField?(field: string, value: string): string | null;
}

export interface OpenAIHttpOptions {
  backend: string;
  /** e.g. https://api.openai.com/v1 (paths are appended to it) */
  baseUrl: string;
  dispatcher: Dispatcher;
  /** sent on every request; names are lower-cased */
  headers: Record<string, string>;
  secrets: ReadonlyArray<string>;
  maxResponseBytes: number;
  /** A non-2xx answer → the error to throw (default: fromUpstreamStatus). */
  statusError?: ((info: StatusErrorInfo) => GatewayError) | undefined;
  /** The `error` value of a `data: {"error":…}` event → the error to throw. */
  streamError?: ((error: unknown) => GatewayError) | undefined;
  sseFraming?: SseFraming | undefined;
}

/** An AbortSignal, or the router attempt's cheaper EventEmitter abort (undici takes either). */
export type CallSignal = AbortSignal | UpstreamAbort;

export interface CallOptions {
  signal: CallSignal;
  headers?: Record<string, string> | undefined;
}

type Response = Dispatcher.ResponseData;

const JSON_TYPE = /^application\/(?:[\w!#$%&*.^`|~+-]+\+)?json\s*(?:;|$)/i;

export class OpenAIHttpClient {
  private readonly origin: string;
  private readonly prefix: string;
  private readonly headers: Record<string, string>;
  private readonly flatHeaders: string[] = [];

  constructor(private readonly o: OpenAIHttpOptions) {
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
    const res = await this.send('POST', path, JSON.stringify(body), 'application/json', opts);
    return this.readJson(res, opts.signal);
  }

  /**
   * POST a JSON body, answer the bytes of the 2xx JSON response as they came (for answers that are
   * forwarded without being rebuilt; the caller checks them).
   */
  async postForBytes(path: string, body: unknown, opts: CallOptions): Promise<Buffer<ArrayBuffer>> {
    const res = await this.send('POST', path, JSON.stringify(body), 'application/json', opts);
    return this.readJsonBytes(res, opts.signal);
  }

  /** GET, answer the parsed JSON of the 2xx response. */
  async getJson(path: string, opts: CallOptions): Promise<unknown> {
    const res = await this.send('GET', path, undefined, 'application/json', opts);
    return this.readJson(res, opts.signal);
  }

  /**
   * POST a JSON body asking for an event stream. Resolves once the upstream answered 2xx; the
   * iterator yields each `data:` payload parsed, ends at `data: [DONE]` (or at the end of the body),
   * and aborts the read (closing its connection) when abandoned early (`return()`).
   */
  async postStream(path: string, body: unknown, opts: CallOptions): Promise<AsyncIterableIterator<unknown>> {
    const headers = this.headersFor('text/event-stream', opts);
    return new Promise((resolve, reject) => {
      const call = new StreamCall(this.o, opts.signal, resolve, reject);
      try {
        this.o.dispatcher.dispatch({ origin: this.origin, path: this.prefix + path, method: 'POST', headers, body: JSON.stringify(body) }, call);
      } catch (err) {
        call.onResponseError(undefined, err instanceof Error ? err : new Error(String(err)));
      }
    });
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

  private async send(method: 'GET' | 'POST', path: string, body: string | undefined, accept: string, opts: CallOptions): Promise<Response> {
    const headers = this.headersFor(accept, opts);
    try {
      return await this.o.dispatcher.request({ origin: this.origin, path: this.prefix + path, method, headers, body, signal: opts.signal });
    } catch (err) {
      if (opts.signal.aborted) throw abortReason(opts.signal);
      throw upstreamUnreachable(this.o.backend, errorCode(err) ?? redact(err instanceof Error ? err.message : 'connection failed', this.o.secrets));
    }
  }

  private async readJson(res: Response, signal: CallSignal): Promise<unknown> {
    return parseJsonBytes(this.o.backend, await this.readJsonBytes(res, signal));
  }

  /** The body of a 2xx JSON answer, within `maxResponseBytes`. */
  private async readJsonBytes(res: Response, signal: CallSignal): Promise<Buffer<ArrayBuffer>> {
    if (res.statusCode < 200 || res.statusCode > 299) throw await this.statusError(res, signal);
    this.checkEncoding(res);
    const type = header(res, 'content-type');
    if (type !== undefined && !JSON_TYPE.test(type)) {
      discard(res.body);
      throw upstreamMalformed(this.o.backend, `expected JSON, got content-type "${redact(type.slice(0, 100), this.o.secrets)}"`);
    }
    const bytes = await this.readBytes(res, this.o.maxResponseBytes, signal);
    if (bytes === null) throw responseTooLarge(this.o.backend, this.o.maxResponseBytes);
    return bytes;
  }

  /** A body in a content coding despite `accept-encoding: identity` cannot be read. */
  private checkEncoding(res: Response): void {
    const err = encodingError(this.o.backend, header(res, 'content-encoding'));
    if (err === undefined) return;
    discard(res.body);
    throw err;
  }

  private async statusError(res: Response, signal: CallSignal): Promise<GatewayError> {
    let text = '';
    try {
      text = (await this.readBytes(res, MAX_ERROR_BYTES, signal, true))?.toString('utf8') ?? '';
    } catch (err) {
      // The status says enough when the body cannot be read; an abort is still an abort.
      if (signal.aborted) throw err;
    }
    return statusErrorOf(this.o, res.statusCode, (n) => header(res, n), text);
  }

  /**
   * The body; null when it is longer than `limit`, or, with `truncate`, its first `limit` bytes.
   * Either way the body ends read to its end or destroyed (leaving the for-await early destroys it).
   */
  private async readBytes(res: Response, limit: number, signal: CallSignal, truncate = false): Promise<Buffer<ArrayBuffer> | null> {
    const body = res.body;
    const length = Number(header(res, 'content-length') ?? Number.NaN);
    try {
      // A known length within the cap (the HTTP framing bounds the body to it): a large body is
      // copied into one buffer as it arrives, a small one taken by undici's own consumer.
      if (Number.isFinite(length) && length <= limit) return length > LARGE_BODY ? await copyKnownLength(body, length) : Buffer.from(await body.arrayBuffer());
      if (Number.isFinite(length) && !truncate) {
        discard(body);
        return null;
      }
      const chunks: Buffer[] = [];
      let n = 0;
      for await (const c of body as AsyncIterable<Buffer>) {
        if (n + c.length > limit) {
          if (!truncate) return null; // leaving the loop destroys the body
          chunks.push(c.subarray(0, limit - n));
          n = limit;
          break;
        }
        chunks.push(c);
        n += c.length;
      }
      return Buffer.concat(chunks, n);
    } catch (err) {
      if (signal.aborted) throw abortReason(signal);
      throw upstreamUnreachable(this.o.backend, `connection lost (${errorCode(err) ?? redact(err instanceof Error ? err.message : 'read failed', this.o.secrets)})`);
    }
  }
}

/** Bodies larger than this, with a known length, are copied as they arrive (copyKnownLength). */
const LARGE_BODY = 64 * 1024;

/**
 * A body of a known length, copied into one buffer as its chunks arrive, so each chunk can go at
 * once: undici's `arrayBuffer()` holds every chunk until the end and then copies them, twice the
 * body at the peak (with 64 embeddings answers of 312 KB in flight, ~20 MB more). Rejects with
 * the body's error (an abort, a lost connection); a body that ends short is the connection's fault.
 */
function copyKnownLength(body: Response['body'], length: number): Promise<Buffer<ArrayBuffer>> {
  const out = Buffer.allocUnsafeSlow(length);
  let n = 0;
  return new Promise((resolve, reject) => {
    body.on('data', (c: Buffer) => {
      // the framing keeps a body within its content-length; a chunk past it is not copied
      n += c.copy(out, n);
    });
    body.once('error', reject);
    // after 'end' (settled already) or instead of it (destroyed without an error)
    body.once('close', () => (n === length ? resolve(out) : reject(new Error(`body ended after ${n} of ${length} bytes`))));
  });
}

/** A JSON answer's bytes → its value, or the backend's `upstream_malformed` error. */
export function parseJsonBytes(backend: string, bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw upstreamMalformed(backend, 'invalid JSON');
  }
}

function header(res: Response, name: string): string | undefined {
  const v = res.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

