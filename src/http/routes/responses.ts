/**
 * The OpenAI Responses API: `POST /v1/responses` (JSON or SSE) and the stored responses
 * (`GET /v1/responses/{id}`, `GET …/{id}/input_items`, `DELETE /v1/responses/{id}`).
 *
 * A create request is validated, its `previous_response_id` expanded from the responses store
 * (per API key: another key's id is as unknown as a missing one), and then answered by a
 * ResponsesOperation. Today every backend is reached by the translated one: the request becomes
 * the canonical chat request (protocol/responses toChat) and goes through the gateway's chat
 * operation, so routing, failover, breaker, limits, cache, coalescing, metrics, logs and cost apply
 * as to chat. What the translation left out is listed in the log line and in the
 * `x-switchyard-warnings` header.
 *
 * Streams: the head and `response.created` / `response.in_progress` are written only once the
 * gateway's chat stream resolved (its commit point: failures before it failed over or became a
 * normal error answer). After that a failure ends the stream with the event the protocol layer
 * gives (`error` once output began), never with a clean end. A client that goes away aborts the
 * upstream through the request's signal.
 */
import type { Deps } from '../deps.ts';
import { GatewayError, asGatewayError, invalidRequest } from '../../errors/gateway-error.ts';
import type { ChatCompletionChunk, ChatRequest } from '../../protocol/chat/schema.ts';
import {
  fromChat,
  newResponseId,
  parseResponsesRequest,
  ResponsesStream,
  sse,
  toChat,
  type InputItem,
  type Response,
  type ResponseContext,
  type ResponsesRequest,
  type ResponseStreamEvent,
} from '../../protocol/responses/index.ts';
import { inputItemsOf, listInputItems, nextHistory, type ResponsesStore, type StoredResponse } from '../../gateway/responses-store.ts';
import { chunkOf, type ChunkPart } from '../../protocol/stream-part.ts';
import { costUsd } from '../../telemetry/cost.ts';
import { readJsonBody } from '../body.ts';
import { abandonIfStuck, answerHeaders, sendJson } from '../direct.ts';
import type { Exchange } from '../exchange.ts';
import { markRouted, markUsage, requestInfo } from '../respond.ts';

/** One create request, ready for an operation: validated, its conversation loaded. */
export interface Turn {
  req: ResponsesRequest;
  /** id, creation time, public model name: fixed when the request arrived */
  ctx: ResponseContext;
  /** the stored conversation of `previous_response_id` (oldest first), else empty */
  history: readonly InputItem[];
  /** this request's input as items, each with an id (as `input_items` lists them) */
  inputItems: InputItem[];
  /** keeps the finished response when the request asked to (`store` ≠ false); never throws */
  keep(response: Response): Promise<void>;
}

/** Answers a create request (JSON or SSE) for one way to a backend. */
export type ResponsesOperation = (deps: Deps, x: Exchange, turn: Turn) => Promise<void>;

const OWNER_WITHOUT_KEY = 'anonymous';
/** Bound of the `x-switchyard-warnings` header value. */
const MAX_WARNINGS_HEADER = 1024;

const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
};

/** The chat stream's element as a chat chunk: the only place that reads the stream's item type. */
function asChunk(part: ChunkPart<ChatCompletionChunk>): ChatCompletionChunk {
  return chunkOf(part);
}

function storeOf(deps: Deps): ResponsesStore {
  return deps.responses;
}

const isItem = (v: unknown): v is InputItem => typeof v === 'object' && v !== null && !Array.isArray(v);

function owner(x: Exchange): string {
  return x.keyName ?? OWNER_WITHOUT_KEY;
}

/** The warnings as a header value: printable ASCII, bounded. */
function warningsHeader(warnings: readonly string[]): string {
  const text = warnings.join('; ').replace(/[^\x20-\x7e]/g, '?');
  return text.length <= MAX_WARNINGS_HEADER ? text : `${text.slice(0, MAX_WARNINGS_HEADER - 3)}...`;
}

/** OpenAI's answer for an unknown, expired or another key's `previous_response_id`. */
function previousNotFound(id: string): GatewayError {
  return invalidRequest(`Previous response with id '${id}' not found.`, 'previous_response_id', 'previous_response_not_found');
}

/** OpenAI's answer for an unknown, expired or another key's response id. */
function responseNotFound(id: string): GatewayError {
  return new GatewayError('item_not_found', `Response with id '${id}' not found.`);
}

function idParam(x: Exchange): string {
  return x.params['id'] ?? '';
}

// ---------------------------------------------------------------------------- create

/** POST /v1/responses */
export function createResponseHandler(deps: Deps) {
  return async (x: Exchange): Promise<void> => {
    const body = await readJsonBody(x, deps.config.server.max_body_bytes);
    const req = parseResponsesRequest(body);
    const log = x.log;
    log.model = req.model;
    log.stream = req.stream === true;
    const who = owner(x);
    let previous: StoredResponse | undefined;
    if (req.previous_response_id) {
      previous = await storeOf(deps).get(who, req.previous_response_id);
      if (!previous) throw previousNotFound(req.previous_response_id);
    }
    const history = (previous?.history ?? []).filter(isItem);
    const inputItems = inputItemsOf(req.input);
    const ctx: ResponseContext = { id: newResponseId(), createdAt: Math.floor(Date.now() / 1000), model: req.model, request: req };
    const turn: Turn = {
      req,
      ctx,
      history,
      inputItems,
      keep: async (response) => {
        if (req.store === false) return;
        const rec: StoredResponse = { response: response as unknown as Record<string, unknown>, inputItems, history: nextHistory(previous, req.input, response.output) };
        let why: string;
        try {
          const r = await storeOf(deps).put(who, ctx.id, rec);
          if (r.stored) return;
          why = `${r.reason} (${r.bytes} bytes)`;
        } catch (err) {
          const e = asGatewayError(err);
          why = e.code ?? e.type;
        }
        deps.logger.warn('response not stored', { request_id: x.requestId, reason: why });
      },
    };
    await operationFor(deps, req)(deps, x, turn);
  };
}

/** The way to the backend for this request (the native pass-through joins here). */
function operationFor(_deps: Deps, _req: ResponsesRequest): ResponsesOperation {
  return translated;
}

/** Through the gateway's chat operation, translated both ways. */
const translated: ResponsesOperation = async (deps, x, turn) => {
  const byId = new Map<string, InputItem>();
  for (const item of turn.history) if (typeof item.id === 'string') byId.set(item.id, item);
  const { chat, warnings, names } = toChat(turn.req, { history: turn.history, resolveItem: (id) => byId.get(id) });
  turn.ctx.names = names;
  if (warnings.length > 0) {
    x.log.warnings = warnings;
    x.out['x-switchyard-warnings'] = warningsHeader(warnings);
  }
  if (turn.req.stream === true) return translatedStream(deps, x, turn, chat);
  const r = await deps.gateway.chat(chat, requestInfo(x));
  markRouted(x, r);
  markUsage(x, r.result.usage);
  const response = fromChat(r.result, turn.ctx);
  await turn.keep(response);
  sendJson(x, 200, response, deps.config.server.send_timeout_ms);
};

async function translatedStream(deps: Deps, x: Exchange, turn: Turn, chat: ChatRequest): Promise<void> {
  const s = await deps.gateway.chatStream(chat, requestInfo(x));
  // the commit point is behind us: from here the answer is this stream
  markRouted(x, s);
  const log = x.log;
  const out = new EventWriter(x, deps.config.server.send_timeout_ms, s.result[Symbol.asyncIterator]());
  const rs = new ResponsesStream(turn.ctx);
  let ended: ResponseStreamEvent[] | undefined;
  try {
    await out.write(rs.start());
    for (;;) {
      const r = await out.next();
      if (r === undefined) break;
      await out.write(rs.push(asChunk(r)));
      if (log.ttftMs === undefined && rs.committed) log.ttftMs = performance.now() - log.startedAt;
    }
    if (!out.gone) ended = rs.finish();
  } catch (err) {
    const e = asGatewayError(err);
    if (!out.gone) {
      log.errorCode = e.code ?? e.type;
      if (e.status !== 499) ended = rs.fail({ message: e.message, code: e.code ?? e.type });
    }
  }
  const u = log.cache === 'hit' ? undefined : s.usage.value;
  log.promptTokens = u?.prompt_tokens;
  log.completionTokens = u?.completion_tokens;
  log.costUsd = log.cache === 'hit' ? 0 : costUsd(u, log.price);
  const final = ended?.at(-1);
  if (final?.type === 'response.completed' || final?.type === 'response.incomplete') await turn.keep(final.response);
  out.end(ended ?? []);
}

/**
 * The SSE side of a stream: head at construction, events written as they come, no more pulled from
 * the source while Node's buffer for the client is full; a client that takes nothing for
 * `sendTimeoutMs` is disconnected. `gone` once the client went away (the source is then returned).
 */
class EventWriter<T> {
  gone = false;

  constructor(
    private readonly x: Exchange,
    private readonly sendTimeoutMs: number,
    private readonly src: AsyncIterator<T>,
  ) {
    const res = x.outgoing;
    const headers = answerHeaders(x);
    for (const k in SSE_HEADERS) headers[k] = SSE_HEADERS[k] as string;
    res.writeHead(200, headers);
    res.once('close', () => {
      if (res.writableFinished) return;
      this.gone = true;
      void this.src.return?.(undefined)?.catch(() => {});
    });
  }

  /** The next item, or undefined at the end or when the client is gone. */
  async next(): Promise<T | undefined> {
    if (this.gone) return undefined;
    const r = await this.src.next();
    return r.done || this.gone ? undefined : r.value;
  }

  async write(events: readonly ResponseStreamEvent[]): Promise<void> {
    const res = this.x.outgoing;
    if (this.gone || events.length === 0) return;
    let text = '';
    for (const e of events) text += sse(e);
    res.write(text);
    if (res.writableNeedDrain && !(await abandonIfStuck(res, 'drain', this.sendTimeoutMs))) this.gone = true;
  }

  end(events: readonly ResponseStreamEvent[]): void {
    if (this.gone) return;
    let text = '';
    for (const e of events) text += sse(e);
    this.x.outgoing.end(text);
  }
}

// ---------------------------------------------------------------------------- stored responses

/** GET /v1/responses/{id} */
export function getResponseHandler(deps: Deps) {
  return async (x: Exchange): Promise<void> => {
    const id = idParam(x);
    const rec = await storeOf(deps).get(owner(x), id);
    if (!rec) throw responseNotFound(id);
    sendJson(x, 200, rec.response, deps.config.server.send_timeout_ms);
  };
}

/** GET /v1/responses/{id}/input_items (`limit` 1–100, `order` asc|desc, `after`, `before`, as OpenAI pages them) */
export function inputItemsHandler(deps: Deps) {
  return async (x: Exchange): Promise<void> => {
    const id = idParam(x);
    const q = x.query();
    const limitText = q.get('limit');
    const limit = limitText === null ? undefined : Number(limitText);
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 100)) {
      throw invalidRequest(`Invalid 'limit': expected an integer from 1 to 100, got '${limitText}'.`, 'limit', 'invalid_value');
    }
    const order = q.get('order') ?? undefined;
    if (order !== undefined && order !== 'asc' && order !== 'desc') throw invalidRequest(`Invalid 'order': expected 'asc' or 'desc'.`, 'order', 'invalid_value');
    const rec = await storeOf(deps).get(owner(x), id);
    if (!rec) throw responseNotFound(id);
    const list = listInputItems(rec, { limit, order, after: q.get('after') ?? undefined, before: q.get('before') ?? undefined });
    sendJson(x, 200, list, deps.config.server.send_timeout_ms);
  };
}

/** DELETE /v1/responses/{id} */
export function deleteResponseHandler(deps: Deps) {
  return async (x: Exchange): Promise<void> => {
    const id = idParam(x);
    const deleted = await storeOf(deps).delete(owner(x), id);
    if (!deleted) throw responseNotFound(id);
    sendJson(x, 200, { id, object: 'response', deleted: true }, deps.config.server.send_timeout_ms);
  };
}
