/**
 * First middleware: request id, then — when the response has really finished (streams included,
 * or the client went away) — one JSON log line and the request's metrics. Prompts, completions
 * and keys never reach either: only ids, names, numbers and statuses.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { MiddlewareHandler } from 'hono';
import { ClientAbort } from '../abort.ts';
import type { Deps } from '../deps.ts';
import { costUsd } from '../telemetry/cost.ts';
import { statusClass } from '../telemetry/metrics.ts';
import { nodeResponse } from './direct.ts';
import type { AppEnv, RequestLog } from './types.ts';

const CLIENT_GONE = 'Client connection prematurely closed.';
const REQUEST_ID = /^[A-Za-z0-9._:@\-]{1,128}$/;
/** `req_` and a random UUID's 32 hex digits (cut around its dashes: `replaceAll` took a runtime call). */
function newRequestId(): string {
  const u = randomUUID();
  return `req_${u.slice(0, 8)}${u.slice(9, 13)}${u.slice(14, 18)}${u.slice(19, 23)}${u.slice(24)}`;
}

const round2 = (v: number | undefined): number | undefined => (v === undefined ? undefined : Math.round(v * 100) / 100);

export function accessLog(deps: Deps): MiddlewareHandler<AppEnv> {
  const { metrics, labels, traffic } = deps;
  return async (c, next) => {
    const startedAt = performance.now();
    const given = c.req.header('x-request-id');
    const requestId = given && REQUEST_ID.test(given) ? given : newRequestId();
    c.set('requestId', requestId);
    const log: RequestLog = { route: 'unmatched', startedAt };
    c.set('log', log);
    c.set('out', {});
    const outgoing = nodeResponse(c);
    // the request's abort: our own (cheap) one on a Node server, the Request's signal otherwise
    const abort = outgoing ? new ClientAbort() : undefined;
    c.set('clientAbort', abort);
    let counted = false;
    const track = (): void => {
      if (counted) return;
      counted = true;
      traffic.inFlight++;
      metrics.enter(log.route);
    };
    const finish = (): void => {
      // closed before the answer was complete (or the request body failed): the client is gone
      if (abort && outgoing && (!outgoing.writableFinished || c.env.incoming.errored)) abort.abort(CLIENT_GONE);
      const latency = performance.now() - startedAt;
      const status = outgoing ? outgoing.statusCode : c.res.status;
      if (log.costUsd === undefined && log.promptTokens !== undefined) log.costUsd = costUsd({ prompt_tokens: log.promptTokens, completion_tokens: log.completionTokens }, log.price);
      deps.logger.info('request', {
        request_id: requestId,
        method: c.req.method,
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
        client_closed: outgoing ? !outgoing.writableFinished : undefined,
        ttft_ms: round2(log.ttftMs),
        upstream_ms: round2(log.upstreamMs),
        latency_ms: round2(latency),
      });
      if (counted) {
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
    };
    c.set('trackInFlight', track);
    if (outgoing) outgoing.once('close', finish);
    await next();
    // answers written by direct.ts carry it already
    if (!outgoing?.headersSent) c.res.headers.set('x-request-id', requestId);
    if (!outgoing) finish();
  };
}
