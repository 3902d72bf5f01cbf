/**
 * Every request's exchange (request id, log record) is opened here, and when its response has
 * really finished (streams included, or the client went away) it leaves one JSON log line and the
 * request's metrics. Prompts, completions and keys never reach either: only ids, names, numbers
 * and statuses.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { GenerationDeps } from './deps.ts';
import { costUsd } from '../telemetry/cost.ts';
import { GENAI_PROVIDER, genAiOperation, statusClass } from '../telemetry/metrics.ts';
import { withTrace, type LogFields } from '../telemetry/logger.ts';
import { Exchange } from './exchange.ts';
import type { SpendRecord } from '../db/ledger.ts';

const CLIENT_GONE = 'Client connection prematurely closed.';

const round2 = (v: number | undefined): number | undefined => (v === undefined ? undefined : Math.round(v * 100) / 100);

/** Counts the request in the in-flight gauge, under its route (called once the route is known). */
export function trackInFlight(deps: GenerationDeps, x: Exchange): void {
  if (x.inFlight) return;
  x.inFlight = true;
  deps.traffic.inFlight++;
  deps.metrics.enter(x.log.route);
}

/** A new request's exchange, logged and measured when its response closes. */
export function openExchange(deps: GenerationDeps, incoming: IncomingMessage, outgoing: ServerResponse): Exchange {
  const x = new Exchange(incoming, outgoing);
  outgoing.once('close', () => finish(deps, x));
  return x;
}

function finish(deps: GenerationDeps, x: Exchange): void {
  const { metrics, labels, traffic } = deps;
  const { log, outgoing } = x;
  // closed before the answer was complete (or the request body failed): the client is gone
  if (!outgoing.writableFinished || x.incoming.errored) x.abort.abort(CLIENT_GONE);
  const latency = performance.now() - x.startedAt;
  const status = outgoing.statusCode;
  if (log.costUsd === undefined && log.promptTokens !== undefined) log.costUsd = costUsd({ prompt_tokens: log.promptTokens, completion_tokens: log.completionTokens }, log.price);
  const fields: LogFields = {
    request_id: x.requestId,
    method: x.incoming.method,
    route: log.route,
    status,
    key: log.key,
    model: log.model,
    backend: log.backend,
    upstream_model: log.upstreamModel,
    attempts: log.attempts,
    stream: log.stream,
    cache: log.cache,
    prompt_tokens: log.promptTokens,
    completion_tokens: log.completionTokens,
    cost_usd: log.costUsd ?? (log.backend !== undefined && log.priced === false ? 'unknown' : undefined),
    error: log.errorCode ?? undefined,
    warnings: log.warnings?.join('; '),
    client_closed: !outgoing.writableFinished,
    ttft_ms: round2(log.ttftMs),
    upstream_ms: round2(log.upstreamMs),
    latency_ms: round2(latency),
  };
  deps.logger.info('request', withTrace(fields, x.trace));
  if (x.trace !== undefined) x.trace.finish(status, log);
  // an answer a backend (or the cache) gave: one ledger row, written behind
  if (log.model !== undefined && (log.backend !== undefined || log.cache === 'hit')) deps.records.ledger?.record(ledgerRow(x, status, latency));
  if (x.inFlight) {
    traffic.inFlight--;
    metrics.leave(log.route);
  }
  if (log.route === 'unmatched' || log.route === '/metrics') return;
  const model = labels.model(log.model);
  const backend = labels.backend(log.backend);
  metrics.requests.inc({ route: log.route, model, backend, status_class: statusClass(status), cache: log.cache ?? 'none' });
  metrics.requestDuration.observe({ route: log.route, model }, latency / 1000);
  if (log.ttftMs !== undefined) metrics.ttft.observe({ model, backend }, log.ttftMs / 1000);
  if (log.upstreamMs !== undefined && !log.stream && status < 400) metrics.overhead.observe({ route: log.route }, Math.max(0, latency - log.upstreamMs) / 1000);
  if (log.promptTokens) metrics.tokens.inc({ model, backend, direction: 'in' }, log.promptTokens);
  if (log.completionTokens) metrics.tokens.inc({ model, backend, direction: 'out' }, log.completionTokens);
  if (log.costUsd !== undefined && log.costUsd > 0) metrics.cost.inc({ model, backend, key: labels.key(log.key) }, log.costUsd);
  if (log.backend !== undefined && log.priced === false && status < 400) metrics.unpricedRequests.inc({ model, backend });
  // GenAI client metrics: operations a backend served or failed (a cache hit called no provider)
  const operation = log.backend === undefined || log.cache === 'hit' ? undefined : genAiOperation(log.route);
  if (operation !== undefined) genAiMetrics(deps, x, log.backend as string, operation, model, status, latency);
}

/** The request's spend ledger row: who, which model and backend, tokens, cost, time and outcome. */
function ledgerRow(x: Exchange, status: number, latencyMs: number): SpendRecord {
  const { log } = x;
  return {
    at: Date.now(),
    key: log.key,
    model: log.model ?? '',
    backend: log.backend,
    upstreamModel: log.upstreamModel,
    tokensIn: log.promptTokens ?? 0,
    tokensOut: log.completionTokens ?? 0,
    tokensCached: log.cachedTokens ?? 0,
    costUsd: log.costUsd,
    latencyMs,
    status,
    requestId: x.requestId,
  };
}

/** `gen_ai_client_*` histograms of one operation (OpenTelemetry GenAI semantic conventions). */
function genAiMetrics(deps: GenerationDeps, x: Exchange, backendName: string, operation: string, model: string, status: number, latency: number): void {
  const { log } = x;
  const type = deps.config.backends[backendName]?.type;
  const provider = (type !== undefined ? GENAI_PROVIDER[type] : undefined) ?? 'other';
  const errorType = status >= 400 ? String(status) : log.errorCode ? '_OTHER' : '';
  const g = deps.metrics;
  g.genAiDuration.observe({ gen_ai_operation_name: operation, gen_ai_provider_name: provider, gen_ai_request_model: model, error_type: errorType }, latency / 1000);
  if (log.promptTokens !== undefined) g.genAiTokens.observe({ gen_ai_operation_name: operation, gen_ai_provider_name: provider, gen_ai_request_model: model, gen_ai_token_type: 'input' }, log.promptTokens);
  if (log.completionTokens !== undefined) g.genAiTokens.observe({ gen_ai_operation_name: operation, gen_ai_provider_name: provider, gen_ai_request_model: model, gen_ai_token_type: 'output' }, log.completionTokens);
}
