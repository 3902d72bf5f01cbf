/**
 * The OpenAI Responses API: `POST /v1/responses` (JSON or SSE) and the stored responses
 * (`GET /v1/responses/{id}`, `GET …/{id}/input_items`, `DELETE /v1/responses/{id}`).
 *
 * A create request is validated, its conversation opened (gateway/conversations.ts:
 * `previous_response_id` and `item_reference` expanded from the stored responses, the final
 * response stored, per API key) and handed to the gateway with the protocol's adapter
 * (protocol/responses/adapter.ts; gateway/ingress.ts runs it): each target natively when its
 * backend speaks the Responses API (an `openai` backend with `responses: true`), else through the
 * canonical chat form, all in one attempt chain — so routing, failover between native and
 * translated targets before the commit point, breaker, limits, cache (only `store: false`
 * requests), coalescing, metrics, logs and cost apply as to chat. What a translation left out is
 * listed in the log line and in the `x-switchyard-warnings` header.
 *
 * Streams: the head and `response.created` / `response.in_progress` are written only once the
 * gateway's stream resolved (its commit point: failures before it failed over or became a
 * normal error answer). After that a failure ends the stream with the event the protocol layer
 * gives (`error` once output began), never with a clean end. A client that goes away aborts the
 * upstream through the request's signal.
 */
import type { GenerationDeps } from '../deps.ts';
import { GatewayError, invalidRequest } from '../../errors/gateway-error.ts';
import { openConversation } from '../../gateway/conversations.ts';
import { listInputItems, type ResponsesStore } from '../../gateway/responses-store.ts';
import { responsesProtocol } from '../../protocol/responses/index.ts';
import { readJsonBody } from '../body.ts';
import { sendJson } from '../direct.ts';
import type { Exchange } from '../exchange.ts';
import { markRouted, markUsage, sendStream, noteWarnings, requestFacts } from '../respond.ts';
import type { SseFraming } from '../sse.ts';

const OWNER_WITHOUT_KEY = 'anonymous';

function storeOf(deps: GenerationDeps): ResponsesStore {
  return deps.responses;
}

/** Whose stored responses a request reads and writes: its API key's. */
function owner(x: Exchange): string {
  return x.keyName ?? OWNER_WITHOUT_KEY;
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
    const conversation = await openConversation(deps, owner(x), req, { requestId: x.requestId, trace: x.trace });
    const turn = conversation.turn;
    const info = requestFacts(x);
    // a stored response is a new object per request: served from the cache it would repeat an id
    if (conversation.stored) info.cacheControl = { noCache: true, noStore: true };
    if (req.stream === true) {
      const s = await deps.operations.ingressStream(responsesProtocol, turn, info);
      // the commit point is behind us: what the translation dropped so far is known
      markRouted(x, s);
      noteWarnings(x, turn.warnings, true);
      sendStream(deps, x, s, { source: conversation.events(s.result), framing: RESPONSES_FRAMING, warnings: turn.warnings });
      return;
    }
    const r = await deps.operations.ingress(responsesProtocol, turn, info);
    r.result = await conversation.answer(r.result);
    markRouted(x, r);
    markUsage(x, responsesProtocol.usageOf(r.result));
    noteWarnings(x, turn.warnings, true);
    sendJson(x, 200, r.result, deps.config.server.send_timeout_ms);
  };
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
