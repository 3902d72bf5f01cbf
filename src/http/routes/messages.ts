/**
 * Anthropic's Messages API: `POST /v1/messages` (JSON or `stream: true`, `?beta=true` alike) and
 * `POST /v1/messages/count_tokens`.
 *
 * The handler reads and validates the body and hands it to the gateway as an IngressRequest
 * (gateway/ingress.ts): each target is reached natively when its backend speaks the Messages API
 * (`anthropic`: the body with only `model` replaced, the stream's events forwarded as they came),
 * else through the canonical chat form (protocol/messages), all in one attempt chain — so routing,
 * failover between native and translated targets before the commit point, breaker, limits,
 * cache, coalescing, metrics, logs and cost apply as for chat.
 *
 * Streams: the head and the first events are written only once the gateway's stream resolved (the
 * router's commit point: failures before it failed over or became a normal error answer). A
 * failure after it ends the stream with one `error` event and no `message_stop`, so the loss is
 * visible. A client that goes away stops the pull and aborts the upstream (the request's signal).
 * `ping` is written when nothing else was for PING_MS.
 *
 * What a translated backend cannot take is dropped with a warning: into the log line and the
 * answer's `x-switchyard-warnings` header (ASCII, bounded). Errors thrown here are answered in
 * Anthropic's envelope by the route table (api.ts: the `/v1/messages` area).
 */
import type { GenerationDeps } from '../deps.ts';
import type { Exchange } from '../exchange.ts';
import type { JsonObject } from '../../backends/contract.ts';
import { nativeOnce, nativeStream, type IngressRequest } from '../../gateway/ingress.ts';
import type { ResolvedTarget } from '../../router/types.ts';
import {
  fromChat,
  EventsFromChat,
  StreamFromChat,
  countTokensResponse,
  errorFrame,
  gatewayThinkingCount,
  promptOf,
  toChat,
  parseCountTokensRequest,
  parseMessagesRequest,
  sse,
  usageOf,
  type MessagesRequest,
  type ToChatOptions,
} from '../../protocol/messages/index.ts';
import { readJsonBody } from '../body.ts';
import { sendJson } from '../direct.ts';
import { markRouted, markUsage, sendStream, noteWarnings, requestFacts } from '../respond.ts';
import type { SseFraming } from '../sse.ts';

/** A keep-alive `ping` after this long without a write. */
const PING_MS = 15_000;

/** Translation options from the backend types of the targets that serve the model (an alias's or a pattern's too). */
function toChatOptions(deps: GenerationDeps, model: string): ToChatOptions {
  const types = deps.operations.backendTypes(model);
  const allLlama = types.length > 0 && types.every((t) => t === 'llamacpp');
  // reasoning history and top_k only where every target reads them (OpenAI's API refuses top_k)
  return { reasoningContent: allLlama, topK: allLlama };
}

/** The Anthropic headers a native upstream should see, as the client sent them. */
function protocolHeaders(x: Exchange): Record<string, string> | undefined {
  let out: Record<string, string> | undefined;
  for (const name of ['anthropic-version', 'anthropic-beta']) {
    const v = x.incoming.headers[name];
    const value = Array.isArray(v) ? v.join(',') : v;
    if (value !== undefined && value !== '') (out ??= {})[name] = value;
  }
  return out;
}

/**
 * The request as the gateway runs it (gateway/ingress.ts): natively to a backend that speaks the
 * Messages API, else through chat. What a translation drops is added to `warnings`.
 */
function ingressRequest(deps: GenerationDeps, x: Exchange, req: MessagesRequest, warnings: string[]): IngressRequest {
  const publicModel = req.model;
  return {
    op: 'messages',
    body: req as unknown as IngressRequest['body'],
    headers: protocolHeaders(x),
    chat: () => {
      const t = toChat(req, toChatOptions(deps, publicModel));
      warnings.push(...t.warnings);
      return t.chat;
    },
    fromChat: (completion) => {
      const m = fromChat(completion, { model: publicModel, stopSequences: req.stop_sequences });
      warnings.push(...m.warnings);
      return m.message as unknown as JsonObject;
    },
    opensWithInputTokens: true,
    translator: (inputTokens) => {
      const conv = new EventsFromChat({ model: publicModel, stopSequences: req.stop_sequences, inputTokens });
      return new StreamFromChat(conv, () => warnings.push(...conv.warnings));
    },
    usageOf: (answer) => usageOf(answer),
    prompt: promptOf(req),
    maxOutputTokens: req.max_tokens,
  };
}

/**
 * A native (Anthropic) target got the history without the thinking blocks the gateway signed
 * (backends/anthropic/native.ts): named in the warnings. Translated targets report their own drops.
 */
function noteGatewayThinking(req: MessagesRequest, target: ResolvedTarget, stream: boolean, warnings: string[]): void {
  const llm = target.entry.llm;
  if ((stream ? nativeStream(llm, 'messages') : nativeOnce(llm, 'messages')) === undefined) return;
  const n = gatewayThinkingCount(req as unknown as JsonObject);
  if (n > 0) warnings.push(`messages: ${n} thinking block(s) signed by the gateway or unsigned left out (Anthropic accepts only its own signatures)`);
}

export function messagesHandler(deps: GenerationDeps) {
  return async (x: Exchange): Promise<void> => {
    const body = await readJsonBody(x, deps.config.server.max_body_bytes);
    const req = parseMessagesRequest(body);
    const log = x.log;
    log.model = req.model;
    log.stream = req.stream === true;
    x.out['request-id'] = x.requestId;
    const info = requestFacts(x);
    const warnings: string[] = [];
    const ing = ingressRequest(deps, x, req, warnings);
    if (req.stream === true) {
      const s = await deps.operations.ingressStream(ing, info);
      // the commit point is behind us: what the translation dropped so far is known
      markRouted(x, s);
      noteGatewayThinking(req, s.target, true, warnings);
      noteWarnings(x, warnings, true);
      sendStream(deps, x, s, { framing: MESSAGES_FRAMING, warnings });
      return;
    }
    const r = await deps.operations.ingress(ing, info);
    markRouted(x, r);
    markUsage(x, usageOf(r.result));
    noteGatewayThinking(req, r.target, false, warnings);
    noteWarnings(x, warnings, true);
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
    const n = await deps.operations.countTokens(req as unknown as JsonObject & { model: string }, promptOf(req), requestFacts(x), protocolHeaders(x));
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
