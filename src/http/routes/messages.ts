/**
 * Anthropic's Messages API: `POST /v1/messages` (JSON or `stream: true`, `?beta=true` alike) and
 * `POST /v1/messages/count_tokens`.
 *
 * The handler reads and validates the body, then hands it to a MessagesOperation, which routes it
 * and returns either the finished Message or a stream of ready SSE frames. The translated
 * operation (every backend today) turns the request into the canonical chat request and sends it
 * through the gateway's chat operation, so routing, failover before the commit point, breaker,
 * limits, cache, coalescing, metrics, logs and cost apply as for chat. A native operation (bytes
 * passed through to `anthropic` backends) plugs in as another MessagesOperation.
 *
 * Streams: the head and `message_start` are written only once the operation has resolved (the
 * router's commit point: failures before it failed over or became a normal error answer). A
 * failure after it ends the stream with one `error` event and no `message_stop`, so the loss is
 * visible. A client that goes away stops the pull and aborts the upstream (the request's signal).
 * `ping` is written when nothing else was for PING_MS.
 *
 * What a translated backend cannot take is dropped with a warning: into the log line and the
 * answer's `x-switchyard-warnings` header (ASCII, bounded). Errors thrown here are answered in
 * Anthropic's envelope by the route table (api.ts: the `/v1/messages` area).
 */
import type { ServerResponse } from 'node:http';
import type { Deps } from '../deps.ts';
import type { Exchange } from '../exchange.ts';
import type { Gateway, RequestInfo } from '../../gateway/operations.ts';
import type { Routed } from '../../router/router.ts';
import type { ChatCompletionChunk } from '../../protocol/chat/schema.ts';
import {
  chatToMessage,
  ChatToMessagesStream,
  countTokensResponse,
  errorFrame,
  messagesPrompt,
  messagesToChat,
  parseCountTokensRequest,
  parseMessagesRequest,
  sse,
  type MessagesMessage,
  type MessagesRequest,
  type ToChatOptions,
} from '../../protocol/messages/index.ts';
import { clientClosed } from '../../backends/upstream/errors.ts';
import { asGatewayError, type GatewayError } from '../../errors/gateway-error.ts';
import { costUsd, type TokenUsage } from '../../telemetry/cost.ts';
import { readJsonBody } from '../body.ts';
import { abandonIfStuck, answerHeaders, sendJson } from '../direct.ts';
import { markRouted, markUsage, requestInfo } from '../respond.ts';

/** A keep-alive `ping` after this long without a write. */
const PING_MS = 15_000;
const WARNINGS_HEADER = 'x-switchyard-warnings';
const WARNINGS_MAX = 1024;

/** A finished answer: the Message as the client gets it, who served it, its usage for cost. */
export interface MessagesOnce {
  routed: Routed<unknown>;
  message: MessagesMessage;
  usage: TokenUsage | null | undefined;
  warnings: readonly string[];
}

/** A stream past its commit point: the SSE frames to write, in order; usage once it ended. */
export interface MessagesStream {
  routed: Routed<unknown>;
  frames: AsyncIterable<string>;
  usage: { readonly value: TokenUsage | undefined };
  /** known before the first frame (the header); more may come with the stream (the log only) */
  warnings: readonly string[];
  /** everything dropped on the way, read once the stream ended */
  allWarnings(): readonly string[];
}

/** How a Messages request is served. Throws what becomes an error answer (before the commit point). */
export interface MessagesOperation {
  once(deps: Deps, req: MessagesRequest, info: RequestInfo): Promise<MessagesOnce>;
  stream(deps: Deps, req: MessagesRequest, info: RequestInfo): Promise<MessagesStream>;
}

/** An element of the gateway's chat stream. */
type ChatStreamItem = Awaited<ReturnType<Gateway['chatStream']>>['result'] extends AsyncIterable<infer I> ? I : never;

/**
 * The one place a chat stream element becomes a chat chunk (ours to keep: it is never forwarded):
 * a stream part's chunk taken for editing (stream-part.ts `chunkOf`), or the chunk itself.
 */
function asChunk(item: ChatStreamItem): ChatCompletionChunk {
  const i = item as unknown as { kind?: unknown; edit?: () => ChatCompletionChunk };
  return i.kind === 'chunk' && typeof i.edit === 'function' ? i.edit() : (item as unknown as ChatCompletionChunk);
}

/** Translation options from the backend types the model's targets have. */
function toChatOptions(deps: Deps, model: string): ToChatOptions {
  const targets = Object.hasOwn(deps.config.models, model) ? (deps.config.models[model]?.targets ?? []) : [];
  const types = targets.map((t) => deps.config.backends[t.backend]?.type);
  const allLlama = types.length > 0 && types.every((t) => t === 'llamacpp');
  // reasoning history and top_k only where every target reads them (OpenAI's API refuses top_k)
  return { reasoningContent: allLlama, topK: allLlama };
}

async function* framesOf(src: AsyncIterable<ChatStreamItem>, conv: ChatToMessagesStream): AsyncGenerator<string> {
  yield conv.start().map(sse).join('');
  for await (const item of src) {
    const events = conv.push(asChunk(item));
    if (events.length > 0) yield events.map(sse).join('');
  }
  yield conv.finish().map(sse).join('');
}

/** Through the canonical chat form and the gateway's chat operation: every backend type. */
export const translated: MessagesOperation = {
  async once(deps, req, info) {
    const { chat, warnings } = messagesToChat(req, toChatOptions(deps, req.model));
    const r = await deps.gateway.chat(chat, info);
    const m = chatToMessage(r.result, { model: req.model, stopSequences: req.stop_sequences });
    return { routed: r, message: m.message, usage: r.result.usage, warnings: [...warnings, ...m.warnings] };
  },
  async stream(deps, req, info) {
    const { chat, warnings } = messagesToChat(req, toChatOptions(deps, req.model));
    const s = await deps.gateway.chatStream(chat, info);
    const conv = new ChatToMessagesStream({ model: req.model, stopSequences: req.stop_sequences });
    return {
      routed: s,
      frames: framesOf(s.result, conv),
      usage: s.usage,
      warnings,
      allWarnings: () => [...warnings, ...conv.warnings],
    };
  },
};

/** The warnings as one header value: printable ASCII, at most WARNINGS_MAX characters. */
function warningsHeader(warnings: readonly string[]): string {
  // eslint-disable-next-line no-control-regex
  const v = warnings.join('; ').replace(/[^\x20-\x7e]/g, '?');
  return v.length <= WARNINGS_MAX ? v : `${v.slice(0, WARNINGS_MAX - 3)}...`;
}

function noteWarnings(x: Exchange, warnings: readonly string[], header: boolean): void {
  if (warnings.length === 0) return;
  x.log.warnings = [...warnings];
  if (header) x.out[WARNINGS_HEADER] = warningsHeader(warnings);
}

export function messagesHandler(deps: Deps, op: MessagesOperation = translated) {
  return async (x: Exchange): Promise<void> => {
    const body = await readJsonBody(x, deps.config.server.max_body_bytes);
    const req = parseMessagesRequest(body);
    const log = x.log;
    log.model = req.model;
    log.stream = req.stream === true;
    x.out['request-id'] = x.requestId;
    const info = requestInfo(x);
    if (req.stream === true) {
      const s = await op.stream(deps, req, info);
      markRouted(x, s.routed);
      noteWarnings(x, s.warnings, true);
      writeFrames(x.outgoing, answerHeaders(x), s.frames, deps.config.server.send_timeout_ms, {
        onFirst: () => {
          log.ttftMs = performance.now() - log.startedAt;
        },
        onEnd: (err) => {
          const u = log.cache === 'hit' ? undefined : s.usage.value;
          log.promptTokens = u?.prompt_tokens ?? undefined;
          log.completionTokens = u?.completion_tokens ?? undefined;
          log.costUsd = log.cache === 'hit' ? 0 : costUsd(u, log.price);
          noteWarnings(x, s.allWarnings(), false);
          if (err) log.errorCode = err.code ?? err.type;
        },
      });
      return;
    }
    const r = await op.once(deps, req, info);
    markRouted(x, r.routed);
    markUsage(x, r.usage);
    noteWarnings(x, r.warnings, true);
    sendJson(x, 200, r.message, deps.config.server.send_timeout_ms);
  };
}

/**
 * count_tokens, counted here for every backend: an estimate with the gateway's tokenizer
 * (docs/api.md). The model must exist and be one the key may use (else 404).
 */
export function countTokensHandler(deps: Deps) {
  return async (x: Exchange): Promise<void> => {
    const body = await readJsonBody(x, deps.config.server.max_body_bytes);
    const req = parseCountTokensRequest(body);
    x.log.model = req.model;
    x.out['request-id'] = x.requestId;
    const n = await deps.gateway.countTokens(req.model, messagesPrompt(req), x.keyName);
    sendJson(x, 200, countTokensResponse(n), deps.config.server.send_timeout_ms);
  };
}

const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
};
const PING = sse({ type: 'ping' });

/**
 * Writes the head (200 + SSE headers) and every frame of `src`, pulling no more while Node's
 * buffer for the client is full; a client that takes nothing for `sendTimeoutMs` is disconnected.
 * A failure of `src` ends the stream with an `error` event. `onEnd` is called exactly once: null
 * after the last frame, else the error that ended it (499 client_closed when the client went away).
 */
function writeFrames(
  res: ServerResponse,
  headers: Record<string, string>,
  src: AsyncIterable<string>,
  sendTimeoutMs: number,
  hooks: { onFirst(): void; onEnd(err: GatewayError | null): void },
): void {
  for (const k in SSE_HEADERS) headers[k] = SSE_HEADERS[k] as string;
  res.writeHead(200, headers);
  const it = src[Symbol.asyncIterator]();
  let ended = false;
  let gone = false;
  let first = true;
  let lastWrite = performance.now();
  const end = (err: GatewayError | null): void => {
    if (ended) return;
    ended = true;
    clearInterval(pinger);
    hooks.onEnd(err);
  };
  const write = (text: string): void => {
    if (gone || text === '') return;
    res.write(text);
    lastWrite = performance.now();
    if (first) {
      first = false;
      hooks.onFirst();
    }
  };
  const pinger = setInterval(() => {
    if (!ended && !gone && !res.writableNeedDrain && performance.now() - lastWrite >= PING_MS) write(PING);
  }, PING_MS / 3);
  pinger.unref();
  res.once('close', () => {
    if (res.writableFinished) return;
    gone = true;
    end(clientClosed());
    void it.return?.(undefined)?.catch(() => {});
  });
  void (async () => {
    try {
      for (;;) {
        if (res.writableNeedDrain) await abandonIfStuck(res, 'drain', sendTimeoutMs);
        if (gone) return;
        const r = await it.next();
        if (gone) return;
        if (r.done) {
          res.end();
          end(null);
          return;
        }
        write(r.value);
      }
    } catch (err) {
      if (gone) return;
      const e = asGatewayError(err);
      res.end(e.status !== 499 ? errorFrame(e) : '');
      end(e);
    }
  })();
}
