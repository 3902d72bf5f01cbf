/**
 * Anthropic's Messages API: `POST /v1/messages` (JSON or `stream: true`, `?beta=true` alike) and
 * `POST /v1/messages/count_tokens`.
 *
 * The handler reads and validates the body and hands it to the gateway with the protocol's adapter
 * (protocol/messages/adapter.ts; gateway/ingress.ts runs it): each target is reached natively when
 * its backend speaks the Messages API (`anthropic`: the body with only `model` replaced, the
 * stream's events forwarded as they came), else through the canonical chat form, all in one
 * attempt chain — so routing,
 * failover between native and translated targets before the commit point, breaker, limits,
 * cache, coalescing, metrics, logs and cost apply as for chat.
 *
 * Streams: the head and the first events are written only once the gateway's stream resolved (the
 * router's commit point: failures before it failed over or became a normal error answer). A
 * failure after it ends the stream with one `error` event and no `message_stop`, so the loss is
 * visible. A client that goes away stops the pull and aborts the upstream (the request's signal).
 * `ping` is written when nothing else was for PING_MS.
 *
 * What a translated backend cannot take is dropped with a warning, as are the gateway-signed
 * thinking blocks a native one is not sent: into the log line and the answer's
 * `x-switchyard-warnings` header (ASCII, bounded). Errors thrown here are answered in
 * Anthropic's envelope by the route table (api.ts: the `/v1/messages` area).
 */
import type { GenerationDeps } from '../deps.ts';
import type { Exchange } from '../exchange.ts';
import type { JsonObject } from '../../backends/contract.ts';
import { countTokensResponse, errorFrame, messagesProtocol, messagesTurn, parseCountTokensRequest, promptOf, sse } from '../../protocol/messages/index.ts';
import { readJsonBody } from '../body.ts';
import { sendJson } from '../direct.ts';
import { markRouted, markUsage, sendStream, noteWarnings, requestFacts } from '../respond.ts';
import type { SseFraming } from '../sse.ts';

/** A keep-alive `ping` after this long without a write. */
const PING_MS = 15_000;

export function messagesHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const body = await readJsonBody(x, deps.config.server.max_body_bytes);
    const req = messagesProtocol.parse(body);
    const log = x.log;
    log.model = req.model;
    log.stream = req.stream === true;
    x.out['request-id'] = x.requestId;
    const info = requestFacts(x);
    const turn = messagesTurn(req, messagesProtocol.nativeHeaders(x.incoming.headers));
    if (req.stream === true) {
      const s = await deps.operations.ingressStream(messagesProtocol, turn, info);
      // the commit point is behind us: what the translation dropped so far is known
      markRouted(x, s);
      noteWarnings(x, turn.warnings, true);
      sendStream(deps, x, s, { framing: MESSAGES_FRAMING, warnings: turn.warnings });
      return;
    }
    const r = await deps.operations.ingress(messagesProtocol, turn, info);
    markRouted(x, r);
    markUsage(x, messagesProtocol.usageOf(r.result));
    noteWarnings(x, turn.warnings, true);
    sendJson(x, 200, r.result, deps.config.server.send_timeout_ms);
  };
}

/**
 * count_tokens: the upstream's own count when the model's first target is a native (`anthropic`)
 * backend, else an estimate with the gateway's tokenizer (docs/api.md); `x-switchyard-count` says
 * which. The model must exist and be one the key may use (else 404).
 */
export function countTokensHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const body = await readJsonBody(x, deps.config.server.max_body_bytes);
    const req = parseCountTokensRequest(body);
    x.log.model = req.model;
    x.out['request-id'] = x.requestId;
    const n = await deps.operations.countTokens(req as unknown as JsonObject & { model: string }, promptOf(req), requestFacts(x), messagesProtocol.nativeHeaders(x.incoming.headers));
    x.out['x-switchyard-count'] = n.by;
    if (n.backend !== undefined) x.log.backend = n.backend;
    sendJson(x, 200, countTokensResponse(n.tokens), deps.config.server.send_timeout_ms);
  };
}

/** Anthropic's stream ends: no end marker, an `error` event after a failure, `ping` when quiet. */
const MESSAGES_FRAMING: SseFraming = {
  done: '',
  error: (e) => errorFrame(e),
  ping: { text: sse({ type: 'ping' }), every: PING_MS },
};
