/**
 * The OpenAI Responses API: `POST /v1/responses` (JSON or SSE) and the stored responses
 * (`GET /v1/responses/{id}`, `GET …/{id}/input_items`, `DELETE /v1/responses/{id}`).
 *
 * A create request is validated, its `previous_response_id` expanded from the responses store
 * (per API key: another key's id is as unknown as a missing one), and handed to the gateway with
 * the protocol's adapter (protocol/responses/adapter.ts; gateway/ingress.ts runs it): each target
 * is reached natively when its backend speaks the
 * Responses API (an `openai` backend with `responses: true`: the client's body with only `model`
 * replaced and the conversation expanded, its events forwarded as they came), else through the
 * canonical chat form (protocol/responses), all in one attempt chain — so routing, failover
 * between native and translated targets before the commit point, breaker, limits, cache (only
 * `store: false` requests), coalescing, metrics, logs and cost apply as to chat. What a translation
 * left out is listed in the log line and in the `x-switchyard-warnings` header.
 *
 * Streams: the head and `response.created` / `response.in_progress` are written only once the
 * gateway's stream resolved (its commit point: failures before it failed over or became a
 * normal error answer). After that a failure ends the stream with the event the protocol layer
 * gives (`error` once output began), never with a clean end. A client that goes away aborts the
 * upstream through the request's signal.
 */
import type { GenerationDeps } from '../deps.ts';
import { GatewayError, asGatewayError, invalidRequest } from '../../errors/gateway-error.ts';
import { responsesProtocol, responsesTurn, type InputItem, type Response, type ResponsesRequest } from '../../protocol/responses/index.ts';
import type { ClientBody } from '../../protocol/client-protocol.ts';
import { inputItemsOf, listInputItems, nextHistory, type ResponsesStore, type StoredResponse } from '../../gateway/responses-store.ts';
import { echoPreviousId, echoPreviousIdInEvent } from '../../gateway/responses-echo.ts';
import type { EventPart } from '../../protocol/stream-part.ts';
import { readJsonBody } from '../body.ts';
import { sendJson } from '../direct.ts';
import type { Exchange } from '../exchange.ts';
import { markRouted, markUsage, sendStream, noteWarnings, requestFacts } from '../respond.ts';
import type { SseFraming } from '../sse.ts';
import { withTrace } from '../../telemetry/logger.ts';
import { DONE, mapped, pollable, type Pollable } from '../../lib/pollable.ts';

const OWNER_WITHOUT_KEY = 'anonymous';


function storeOf(deps: GenerationDeps): ResponsesStore {
  return deps.responses;
}

const isItem = (v: unknown): v is InputItem => typeof v === 'object' && v !== null && !Array.isArray(v);

function owner(x: Exchange): string {
  return x.keyName ?? OWNER_WITHOUT_KEY;
}


/** OpenAI's answer for an unknown, expired or another key's `previous_response_id`. */
function previousNotFound(id: string): GatewayError {
  return invalidRequest(`Previous response with id '${id}' not found.`, 'previous_response_id', 'previous_response_not_found');
}

/** OpenAI's answer for an `item_reference` to an unknown, expired, deleted or another key's item. */
function itemNotFound(id: string): GatewayError {
  return new GatewayError('item_not_found', `Item with id '${id}' not found.`, { param: 'input' });
}

/** The ids of the request's `item_reference` input items (an item without `type` or `role` is one), in order. */
function referenceIds(input: ResponsesRequest['input']): string[] {
  if (!Array.isArray(input)) return [];
  const ids: string[] = [];
  for (const item of input) {
    if (!isItem(item)) continue;
    const type = item.type ?? ('role' in item ? 'message' : 'item_reference');
    if (type === 'item_reference' && typeof item.id === 'string') ids.push(item.id);
  }
  return ids;
}

/** The request's input with each `item_reference` replaced by the item it names (all resolved by then). */
function expandReferences(input: ResponsesRequest['input'], resolve: (id: string) => InputItem | undefined): ResponsesRequest['input'] {
  if (!Array.isArray(input)) return input;
  return input.map((item) => {
    if (!isItem(item) || typeof item.id !== 'string') return item;
    const type = item.type ?? ('role' in item ? 'message' : 'item_reference');
    return type === 'item_reference' ? (resolve(item.id) ?? item) : item;
  });
}

/**
 * A resolved item as a native upstream takes it: an input message (`input_items` lists it with the
 * id the gateway gave it) goes without `id`, which OpenAI's input message does not have.
 */
function nativeItem(item: InputItem | undefined): InputItem | undefined {
  if (!item || item.type !== 'message' || item.role === 'assistant' || !('id' in item)) return item;
  const { id: _id, ...rest } = item;
  return rest as InputItem;
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
export function createResponseHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const body = await readJsonBody(x, deps.config.server.max_body_bytes);
    const req = responsesProtocol.parse(body);
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
    // item_reference: the previous response's conversation first, then this key's stored items (one
    // batched lookup, only when the input has references the conversation does not answer)
    const byId = new Map<string, InputItem>();
    for (const item of history) if (typeof item.id === 'string') byId.set(item.id, item);
    const refs = referenceIds(req.input);
    if (refs.length > 0) {
      const missing = refs.filter((id) => !byId.has(id));
      const found = missing.length > 0 ? await storeOf(deps).resolveItems(who, missing) : new Map<string, Record<string, unknown>>();
      for (const id of missing) {
        const item = found.get(id);
        if (!item) throw itemNotFound(id);
        byId.set(id, item as InputItem);
      }
    }
    // what is stored and sent natively: the references replaced by their items, so a later turn or
    // another target never depends on them again
    const input = refs.length > 0 ? expandReferences(req.input, (id) => byId.get(id)) : req.input;
    const nativeInput = refs.length > 0 ? expandReferences(req.input, (id) => nativeItem(byId.get(id))) : req.input;
    const turn = responsesTurn(req, { history, resolveItem: (id) => byId.get(id), input, nativeBody: nativeBody(req, history, nativeInput) });
    const warnings = turn.warnings;
    const keep = async (response: Response): Promise<void> => {
      if (req.store === false) return;
      const rec: StoredResponse = { response: response as unknown as Record<string, unknown>, inputItems: inputItemsOf(input), history: nextHistory(previous, input, response.output) };
      // a native upstream names its own responses: the client continues from the id it was given
      const id = typeof response.id === 'string' && response.id !== '' ? response.id : turn.ctx.id;
      let why: string;
      try {
        const r = await storeOf(deps).put(who, id, rec);
        if (r.stored) return;
        why = `${r.reason} (${r.bytes} bytes)`;
      } catch (err) {
        const e = asGatewayError(err);
        why = e.code ?? e.type;
      }
      deps.logger.warn('response not stored', withTrace({ request_id: x.requestId, reason: why }, x.trace));
    };
    const info = requestFacts(x);
    // a stored response is a new object per request: served from the cache it would repeat an id
    if (req.store !== false) info.cacheControl = { noCache: true, noStore: true };
    if (req.stream === true) {
      const s = await deps.operations.ingressStream(responsesProtocol, turn, info);
      // the commit point is behind us: what the translation dropped so far is known
      markRouted(x, s);
      noteWarnings(x, warnings, true);
      // a native upstream never saw previous_response_id: the client gets back the one it sent
      const prevId = req.previous_response_id;
      const events = prevId ? mapped(s.result, (p) => echoPreviousIdInEvent(p, prevId)) : s.result;
      sendStream(deps, x, s, { source: req.store === false ? events : keepingFinal(events, keep), framing: RESPONSES_FRAMING, warnings });
      return;
    }
    const r = await deps.operations.ingress(responsesProtocol, turn, info);
    if (req.previous_response_id) r.result = echoPreviousId(r.result, req.previous_response_id);
    markRouted(x, r);
    markUsage(x, responsesProtocol.usageOf(r.result));
    noteWarnings(x, warnings, true);
    await keep(r.result as unknown as Response);
    sendJson(x, 200, r.result, deps.config.server.send_timeout_ms);
  };
}

/**
 * What a native backend gets: the client's body with `previous_response_id` expanded from the
 * gateway's own store (the conversation's items ahead of this input) and each `item_reference`
 * replaced by its stored item (`nativeInput`), so a conversation continues on any target and the
 * upstream never needs the gateway's ids.
 */
function nativeBody(req: ResponsesRequest, history: readonly InputItem[], nativeInput: ResponsesRequest['input']): ClientBody {
  if (!req.previous_response_id && nativeInput === req.input) return req as unknown as ClientBody;
  const input = typeof nativeInput === 'string' ? [{ type: 'message', role: 'user', content: nativeInput }] : (nativeInput ?? []);
  const expanded: Record<string, unknown> = { ...req, input: [...history, ...input] };
  delete expanded.previous_response_id;
  return expanded as ClientBody;
}

/**
 * The stream's parts as they are, except that the final response is stored before its event is
 * handed on (an immediate next turn finds it). Hot path: every other part passes by `poll()`
 * without a promise; only the final one waits for the store.
 */
function keepingFinal(src: AsyncIterable<EventPart>, keep: (r: Response) => Promise<void>): AsyncIterableIterator<EventPart> {
  return new KeepingFinal(src[Symbol.asyncIterator](), keep);
}

class KeepingFinal implements AsyncIterableIterator<EventPart>, Pollable<EventPart> {
  /** a final part taken by poll(), handed on by the next next() once stored */
  private held: EventPart | undefined;

  constructor(
    private readonly it: AsyncIterator<EventPart>,
    private readonly keep: (r: Response) => Promise<void>,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<EventPart> | undefined {
    if (this.held) return undefined;
    const r = pollable(this.it)?.poll();
    if (r === undefined || r.done || !r.value.final) return r;
    this.held = r.value;
    return undefined;
  }

  async next(): Promise<IteratorResult<EventPart>> {
    let part = this.held;
    this.held = undefined;
    if (!part) {
      const r = await this.it.next();
      if (r.done) return r;
      part = r.value;
    }
    if (part.final) {
      const response = finalResponse(part);
      if (response) await this.keep(response);
    }
    return { done: false, value: part };
  }

  async return(v?: unknown): Promise<IteratorResult<EventPart>> {
    return (await this.it.return?.(v)) ?? DONE;
  }
}

/** Responses streams end with their terminal event (no end marker), or an `error` event after a failure. */
const RESPONSES_FRAMING: SseFraming = {
  done: '',
  error: (e, written) => errorEventText({ type: 'error', code: e.code ?? e.type, message: e.message, param: e.param, sequence_number: written }),
};

/** The Responses `error` event that ends a stream after its commit point. */
function errorEventText(ev: { type: 'error'; code: string; message: string; param: string | null; sequence_number: number }): string {
  return `event: error\ndata: ${JSON.stringify(ev)}\n\n`;
}

/** The Response a terminal event carries, or undefined. */
function finalResponse(part: EventPart): Response | undefined {
  try {
    const ev = JSON.parse(part.data) as { response?: unknown };
    return typeof ev.response === 'object' && ev.response !== null ? (ev.response as Response) : undefined;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------- stored responses

/** GET /v1/responses/{id} */
export function getResponseHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const id = idParam(x);
    const rec = await storeOf(deps).get(owner(x), id);
    if (!rec) throw responseNotFound(id);
    sendJson(x, 200, rec.response, deps.config.server.send_timeout_ms);
  };
}

/** GET /v1/responses/{id}/input_items (`limit` 1–100, `order` asc|desc, `after`, `before`, as OpenAI pages them) */
export function inputItemsHandler(deps: GenerationDeps) {
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
export function deleteResponseHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const id = idParam(x);
    const deleted = await storeOf(deps).delete(owner(x), id);
    if (!deleted) throw responseNotFound(id);
    sendJson(x, 200, { id, object: 'response', deleted: true }, deps.config.server.send_timeout_ms);
  };
}
