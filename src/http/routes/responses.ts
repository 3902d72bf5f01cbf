/**
 * The OpenAI Responses API: `POST /v1/responses` (JSON or SSE). The stored responses it makes are
 * read and deleted through stored-responses.ts.
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
import { openConversation } from '../../gateway/conversations.ts';
import { responsesProtocol } from '../../protocol/responses/index.ts';
import { readJsonBody } from '../body.ts';
import { sendJson } from '../direct.ts';
import type { Exchange } from '../exchange.ts';
import { markRouted, markUsage, sendStream, noteWarnings, requestFacts } from '../respond.ts';
import type { SseFraming } from '../sse.ts';
import { owner } from './stored-responses.ts';

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
