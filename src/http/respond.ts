import { invalidRequest } from '../errors/gateway-error.ts';
import { costUsd, formatUsd, type TokenUsage } from '../telemetry/cost.ts';
import { cacheDirectives } from '../cache/key.ts';
import type { Answer, RequestFacts, StreamResult } from '../gateway/operations.ts';
import type { StreamPart } from '../protocol/stream-part.ts';
import type { GenerationDeps } from './deps.ts';
import { answerHeaders } from './direct.ts';
import { OPENAI_FRAMING, writeSse, type SseFraming } from './sse.ts';
import type { Routed } from '../router/router.ts';
import type { Exchange } from './exchange.ts';

/** Who served the request (and the key's limits, the cache outcome), for the answer's headers (direct.ts) and the request log. */
export function markRouted<T>(x: Exchange, r: Routed<T> | Answer<T>): void {
  const served = 'served' in r ? r.served : undefined;
  const { out, log } = x;
  if (served) {
    for (const k in served.headers) out[k] = served.headers[k] as string;
    if (served.cache) log.cache = served.cache;
  }
  out['x-switchyard-backend'] = r.target.backend;
  out['x-switchyard-model'] = r.target.model;
  out['x-switchyard-attempts'] = String(r.attempts);
  log.backend = r.target.backend;
  log.upstreamModel = r.target.model;
  log.attempts = r.attempts;
  log.upstreamMs = r.upstreamMs;
  log.price = r.target.target.price;
  log.priced = r.target.target.price !== undefined;
}

/** Tokens and cost of a finished (non-streaming) answer: into the log and `x-switchyard-cost-usd`. */
export function markUsage(x: Exchange, usage: TokenUsage | null | undefined): void {
  const { log, out } = x;
  if (log.cache === 'hit') {
    // Served from the cache (or from another request's upstream call): nothing was spent.
    log.costUsd = 0;
    out['x-switchyard-cost-usd'] = '0.0';
    return;
  }
  if (!usage) return;
  log.promptTokens = usage.prompt_tokens ?? undefined;
  log.completionTokens = usage.completion_tokens ?? undefined;
  log.cachedTokens = usage.prompt_tokens_details?.cached_tokens ?? undefined;
  const cost = costUsd(usage, log.price);
  if (cost !== undefined) {
    log.costUsd = cost;
    out['x-switchyard-cost-usd'] = formatUsd(cost);
  } else {
    out['x-switchyard-cost-usd'] = 'unknown';
  }
}

/** Parses a positive millisecond count, or undefined. */
function positiveMs(v: string | undefined, scale = 1): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v) * scale;
  return Number.isFinite(n) && n > 0 ? n : undefined;
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}

export function requestFacts(x: Exchange): RequestFacts {
  const own = x.header('x-switchyard-deadline-ms');
  const deadline = positiveMs(own);
  if (own !== undefined && deadline === undefined) {
    throw invalidRequest(`Header x-switchyard-deadline-ms must be a positive number of milliseconds.`, 'x-switchyard-deadline-ms');
  }
  // The OpenAI SDKs announce their own timeout (seconds): retrying past it helps nobody.
  const sdk = positiveMs(x.header('x-stainless-timeout'), 1000);
  const pin = x.header('x-switchyard-backend');
  return {
    requestId: x.requestId,
    signal: x.abort,
    trace: x.trace,
    pinBackend: pin === undefined || pin === '' ? undefined : pin,
    deadlineMs: deadline !== undefined && sdk !== undefined ? Math.min(deadline, sdk) : (deadline ?? sdk),
    keyName: x.keyName,
    bodyBytes: x.bodyBytes,
    cacheControl: cacheDirectives(x.header('cache-control')),
    sessionId: nonEmpty(x.header('x-session-id')),
    agentSessionId: nonEmpty(x.header('x-claude-code-session-id') ?? x.header('session-id') ?? x.header('session_id')),
  };
}

/** Bound of the `x-switchyard-warnings` header value. */
const MAX_WARNINGS_HEADER = 1024;

/**
 * What a translation dropped, into the log line and (`header`: while the head is not sent yet) the
 * answer's `x-switchyard-warnings`: printable ASCII, at most MAX_WARNINGS_HEADER characters.
 */
export function noteWarnings(x: Exchange, warnings: readonly string[], header: boolean): void {
  if (warnings.length === 0) return;
  x.log.warnings = [...warnings];
  if (!header) return;
  const text = warnings.join('; ').replace(/[^\x20-\x7e]/g, '?');
  x.out['x-switchyard-warnings'] = text.length <= MAX_WARNINGS_HEADER ? text : `${text.slice(0, MAX_WARNINGS_HEADER - 3)}...`;
}

/**
 * Writes a routed stream (past its commit point) to the client: `source` (default: the stream's
 * own parts) through the SSE writer with the protocol's framing, the time to first chunk, and at
 * the end the usage, cost, warnings and error code in the request's log.
 */
export function sendStream<P extends StreamPart>(
  deps: GenerationDeps,
  x: Exchange,
  s: StreamResult<P>,
  opts: { source?: AsyncIterable<P>; framing?: SseFraming; warnings?: readonly string[] } = {},
): void {
  const log = x.log;
  writeSse(
    x.outgoing,
    answerHeaders(x),
    opts.source ?? s.result,
    deps.config.server.send_timeout_ms,
    (err) => {
      const u = log.cache === 'hit' ? undefined : s.usage.value;
      log.promptTokens = u?.prompt_tokens;
      log.completionTokens = u?.completion_tokens;
      log.costUsd = log.cache === 'hit' ? 0 : costUsd(u, log.price);
      if (opts.warnings) noteWarnings(x, opts.warnings, false);
      if (err) log.errorCode = err.code ?? err.type;
    },
    () => {
      log.ttftMs = performance.now() - log.startedAt;
    },
    () => deps.traffic.inFlight > 1,
    opts.framing ?? OPENAI_FRAMING,
  );
}
