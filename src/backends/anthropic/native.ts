/**
 * The `anthropic` backend's native Messages API path: a `/v1/messages` client's body goes to
 * `POST {base_url}/v1/messages` as it came (the router replaced `model`; `cache_control`, thinking
 * signatures, server tools and beta-only fields survive), and the answer comes back in Anthropic's
 * own shape: the Message JSON parsed, or the stream's events forwarded as their text (EventPart)
 * with usage, the commit point and the end read on the way.
 *
 * One change to the body: thinking blocks the gateway signed (translated from another backend's
 * reasoning earlier in the conversation, protocol/messages/signature.ts) are left out of the
 * history, since Anthropic answers 400 to a signature it did not make. Anthropic-signed thinking
 * and redacted_thinking blocks pass as they are; a body without gateway-signed blocks is sent
 * unchanged. The route names the drop in the request's warnings.
 *
 * No SDK here: the gateway's undici client (backends/upstream/client.ts) on the backend's pooled
 * keep-alive Agent, in event mode. Headers: `x-api-key` (the backend's key), `anthropic-version`
 * (the client's, else the configured one, else 2023-06-01 — the version every Messages client
 * can speak, which still takes temperature/top_p), `anthropic-beta` (the client's and the
 * configured ones), `content-type`. Error answers are mapped as on the translated path
 * (anthropic/errors.ts).
 *
 * Stream events: only `message_start` and `message_delta` (usage), `error` and events without an
 * `event:` name are parsed; every other event's data is checked to be a JSON object's text by its
 * braces only and forwarded untouched (the hot path is one content_block_delta per token).
 */
import type { Dispatcher } from 'undici';
import { isContentEvent, NativeUsageReader, USAGE_EVENTS } from '../../protocol/messages/usage.ts';
import { withoutGatewayThinking } from '../../protocol/messages/signature.ts';
import { EventPart } from '../../protocol/stream-part.ts';
import type { CallContext, JsonObject, NativeCall } from '../contract.ts';
import { UpstreamClient } from '../upstream/client.ts';
import type { EventDecoder } from '../upstream/sse-reader.ts';
import { upstreamMalformed } from '../../errors/upstream.ts';
import type { CallOptions } from '../upstream/types.ts';
import { fromAnthropicStatus } from './errors.ts';
import { streamError } from './response.ts';

/** `anthropic-version` sent when neither the client nor the configuration names one. */
export const NATIVE_FALLBACK_VERSION = '2023-06-01';

export interface NativeMessagesOptions {
  backend: string;
  /** the API's root without `/v1` (normalizeBaseURL) */
  baseUrl: string;
  dispatcher: Dispatcher;
  apiKey: string;
  /** the configured `anthropic_version` (or an `anthropic-version` in `headers`), if any */
  version: string | undefined;
  /** configured extra headers, sent on every request (an `anthropic-beta` here joins the client's) */
  headers: Record<string, string>;
  secrets: ReadonlyArray<string>;
  maxResponseBytes: number;
}

export class NativeMessages {
  private readonly http: UpstreamClient;
  private readonly version: string;
  /** configured betas, sent with the client's */
  private readonly betas: string[];

  constructor(private readonly o: NativeMessagesOptions) {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'switchyard' };
    let beta = '';
    for (const [k, v] of Object.entries(o.headers)) {
      const name = k.toLowerCase();
      // per call: the client may name its own version, and its betas join the configured ones
      if (name === 'anthropic-version') continue;
      if (name === 'anthropic-beta') beta = v;
      else headers[name] = v;
    }
    headers['x-api-key'] = o.apiKey;
    this.version = o.version ?? NATIVE_FALLBACK_VERSION;
    this.betas = splitBetas(beta);
    this.http = new UpstreamClient({
      backend: o.backend,
      baseUrl: o.baseUrl,
      dispatcher: o.dispatcher,
      headers,
      secrets: o.secrets,
      maxResponseBytes: o.maxResponseBytes,
      statusError: (info) =>
        fromAnthropicStatus({
          backend: o.backend,
          status: info.status,
          type: info.error?.type,
          message: info.error?.message,
          errorCode: errorCodeOf(info.error),
          retryAfter: info.retryAfter,
          secrets: o.secrets,
        }),
    });
  }

  /** A non-streaming call: the upstream's Message object. */
  async messages(call: NativeCall, ctx: CallContext): Promise<JsonObject> {
    const res = await this.http.postJson('/v1/messages', withoutGatewayThinking(call.body).body, this.opts(call, ctx));
    if (typeof res !== 'object' || res === null || Array.isArray(res) || (res as { type?: unknown }).type !== 'message') {
      throw upstreamMalformed(this.o.backend, 'not a Messages API message');
    }
    return res as JsonObject;
  }

  /** `POST /v1/messages/count_tokens`: the upstream's own count (`{"input_tokens": n}`). */
  async countTokens(call: NativeCall, ctx: CallContext): Promise<JsonObject> {
    const res = await this.http.postJson('/v1/messages/count_tokens', withoutGatewayThinking(call.body).body, this.opts(call, ctx));
    if (typeof res !== 'object' || res === null || typeof (res as { input_tokens?: unknown }).input_tokens !== 'number') {
      throw upstreamMalformed(this.o.backend, 'not a count_tokens answer');
    }
    return res as JsonObject;
  }

  /** A streaming call: resolves once the upstream answered 2xx; its events as they come. */
  messagesStream(call: NativeCall, ctx: CallContext): Promise<AsyncIterable<EventPart>> {
    const sent = withoutGatewayThinking(call.body).body;
    const body = sent.stream === true ? sent : { ...sent, stream: true };
    return this.http.postEventStream('/v1/messages', body, this.opts(call, ctx), this.decoder());
  }

  /** One stream's decoder: its events → parts, with the stream's usage so far. */
  decoder(): EventDecoder {
    const usage = new NativeUsageReader();
    const backend = this.o.backend;
    const secrets = this.o.secrets;
    return (event, data) => {
      let name = event;
      let parsed: unknown;
      if (name === '' || name === 'error' || USAGE_EVENTS.has(name)) {
        parsed = parseObject(backend, data);
        if (name === '') {
          const type = (parsed as { type?: unknown }).type;
          name = typeof type === 'string' ? type : '';
        }
      } else if (!looksLikeObject(data)) {
        throw upstreamMalformed(backend, `a "${name.slice(0, 50)}" event of the stream is not a JSON object`);
      }
      if (name === 'error') {
        const error = (parsed as { error?: { type?: unknown; message?: unknown } }).error;
        throw streamError(backend, error?.type, error?.message, secrets);
      }
      const part = new EventPart(event, data, isContentEvent(name), name === 'message_stop');
      if (USAGE_EVENTS.has(name)) {
        usage.add(parsed);
        part.usage = usage.usage;
      }
      return part;
    };
  }

  /** Per-call options: the attempt's abort, the request id, the protocol headers and the attempt's trace. */
  private opts(call: NativeCall, ctx: CallContext): CallOptions {
    let version: string | undefined;
    let beta: string | undefined;
    for (const k in call.headers) {
      const name = k.toLowerCase();
      if (name === 'anthropic-version') version = call.headers[k];
      else if (name === 'anthropic-beta') beta = call.headers[k];
    }
    const headers: Record<string, string> = { 'x-request-id': ctx.requestId, 'anthropic-version': version || this.version };
    const betas = this.betas.length === 0 ? beta : [...new Set([...splitBetas(beta ?? ''), ...this.betas])].join(',');
    if (betas) headers['anthropic-beta'] = betas;
    // the attempt's light abort when there is one (undici takes it; ctx.signal would make an AbortSignal)
    return { signal: ctx.abort ?? ctx.signal, headers, trace: ctx.trace };
  }
}

function splitBetas(v: string): string[] {
  return v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

function errorCodeOf(error: unknown): unknown {
  const details = typeof error === 'object' && error !== null ? (error as { details?: unknown }).details : undefined;
  return typeof details === 'object' && details !== null ? (details as { error_code?: unknown }).error_code : undefined;
}

function parseObject(backend: string, data: string): object {
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch {
    throw upstreamMalformed(backend, 'an event of the stream is not JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw upstreamMalformed(backend, 'an event of the stream is not a JSON object');
  return v;
}

/** A JSON object's text by its first and last non-blank characters (not parsed). */
function looksLikeObject(data: string): boolean {
  let i = 0;
  let j = data.length - 1;
  while (i <= j && isBlank(data.charCodeAt(i))) i++;
  while (j >= i && isBlank(data.charCodeAt(j))) j--;
  return j > i && data.charCodeAt(i) === 0x7b && data.charCodeAt(j) === 0x7d;
}

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}
