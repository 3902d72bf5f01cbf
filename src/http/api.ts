/**
 * Every route of both planes in one table (method + path pattern → handler, each with its plane,
 * guard and error envelope): the API (`/v1/*`, behind the overload gate and the client key) and
 * the operator's routes (health, readiness, metrics, status; the admin key where they need it);
 * and the error answer of a failed request. The listener (listener.ts) serves every request with
 * these.
 *
 * A new route is one `.add(…)` line below: its handler takes the Exchange (params in `x.params`,
 * the query in `x.query()`), writes its answer itself and throws what should be an error answer.
 */
import type { GenerationDeps } from './deps.ts';
import { asGatewayError, errorHeaders, toOpenAIError } from '../errors/gateway-error.ts';
import { withTrace } from '../telemetry/logger.ts';
import { anthropicErrorResponse } from '../protocol/messages/errors.ts';
import { adminGuard, keyCheck } from './auth.ts';
import { healthHandler, readyHandler } from './admin/health.ts';
import { metricsHandler } from './admin/metrics.ts';
import { spendHandler } from './admin/spend.ts';
import { statusHtmlHandler, statusJsonHandler } from './admin/status.ts';
import { settleUnreadBody } from './body.ts';
import { chatHandler } from './routes/chat.ts';
import { completionsHandler } from './routes/completions.ts';
import { embeddingsHandler } from './routes/embeddings.ts';
import { countTokensHandler, messagesHandler } from './routes/messages.ts';
import { getModelHandler, listModelsHandler } from './routes/models.ts';
import { createResponseHandler } from './routes/responses.ts';
import { deleteResponseHandler, getResponseHandler, inputItemsHandler } from './routes/stored-responses.ts';
import type { Exchange } from './exchange.ts';
import { overloadGate } from './overload.ts';
import { RouteTable, type Guard } from './route-table.ts';

export type { ApiHandler } from './route-table.ts';

export interface Api {
  readonly routes: RouteTable;
  /**
   * The API plane's guard, which every `/v1/*` request passes, an unknown path's too: throws 503
   * server_overloaded or 401; admits the request and records its key otherwise.
   */
  readonly guard: Guard;
}

export function createApi(deps: GenerationDeps): Api {
  const admit = overloadGate(deps.config.server.max_concurrent_requests);
  const authenticate = keyCheck(deps.config.keys);
  const guard: Guard = (x) => {
    admit?.(x);
    authenticate?.(x);
  };
  const { admin, keys } = deps.config;
  const routes = new RouteTable()
    // Anthropic's clients get Anthropic's envelope (and may send their key in x-api-key)
    .area('/v1/messages', 'anthropic')
    .defaults({ plane: 'api', guard })
    .add('POST', '/v1/chat/completions', chatHandler(deps))
    .add('POST', '/v1/completions', completionsHandler(deps))
    .add('POST', '/v1/embeddings', embeddingsHandler(deps))
    .add('GET', '/v1/models', listModelsHandler(deps))
    .add('GET', '/v1/models/{model+}', getModelHandler(deps))
    .add('POST', '/v1/messages', messagesHandler(deps))
    .add('POST', '/v1/messages/count_tokens', countTokensHandler(deps))
    .add('POST', '/v1/responses', createResponseHandler(deps))
    .add('GET', '/v1/responses/{id}', getResponseHandler(deps))
    .add('DELETE', '/v1/responses/{id}', deleteResponseHandler(deps))
    .add('GET', '/v1/responses/{id}/input_items', inputItemsHandler(deps))
    // the operator's: never behind the overload gate (a probe must see a busy gateway as alive)
    .defaults({ plane: 'admin', guard: undefined })
    .add('GET', '/health', healthHandler(deps))
    .add('GET', '/ready', readyHandler(deps))
    .add('GET', '/metrics', metricsHandler(deps), { guard: adminGuard(admin, keys, { open: admin.public_metrics }) })
    .add('GET', '/status', statusJsonHandler(deps), { guard: adminGuard(admin, keys) })
    // the page a browser opens: a missing key gets the browser's login prompt
    .add('GET', '/', statusHtmlHandler(deps), { guard: adminGuard(admin, keys, { browser: true }) })
    .add('GET', '/admin/spend', spendHandler(deps), { guard: adminGuard(admin, keys) });
  return { routes, guard };
}

export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * The error answer for `err` in the request's envelope (logged when it is our own fault), its code
 * recorded in the request's log.
 */
export function errorAnswer(deps: GenerationDeps, x: Exchange, err: unknown): ErrorAnswer {
  const e = asGatewayError(err);
  if (e.status >= 500 && e.code === 'internal_error') {
    const cause = e.cause instanceof Error ? e.cause : undefined;
    const fields = {
      request_id: x.requestId,
      error: cause?.name ?? 'unknown',
      detail: cause?.message?.slice(0, 500),
      stack: cause?.stack?.split('\n').slice(0, 6).join(' | '),
    };
    deps.logger.error('internal error', withTrace(fields, x.trace));
  }
  const { log } = x;
  log.errorCode = e.code ?? e.type;
  if (e.attempts !== undefined) log.attempts = e.attempts;
  if (e.backend !== undefined) log.backend ??= e.backend;
  // the body the answer does not wait for: dropped as it comes, or the connection closes after it
  settleUnreadBody(x);
  let status: number;
  let headers: Record<string, string>;
  let body: string;
  if (x.envelope === 'anthropic') {
    const a = anthropicErrorResponse(e, x.requestId);
    ({ status, headers } = a);
    body = JSON.stringify(a.body);
    // Anthropic's SDKs read the id from here
    headers['request-id'] = x.requestId;
  } else {
    status = e.status;
    headers = errorHeaders(e);
    body = JSON.stringify(toOpenAIError(e));
  }
  headers['content-type'] = 'application/json';
  headers['x-request-id'] = x.requestId;
  if (x.closeAfter) headers.connection = 'close';
  // 499 is not a status a client ever sees; it only marks our own log line.
  return { status: status === 499 ? 400 : status, headers, body };
}

/** Writes the error answer straight to Node's response (the API's routes, listener.ts). */
export function sendError(deps: GenerationDeps, x: Exchange, err: unknown): void {
  const a = errorAnswer(deps, x, err);
  const res = x.outgoing;
  if (res.headersSent) {
    // the answer had begun: all that can still tell the client is the cut
    res.destroy();
    return;
  }
  a.headers['content-length'] = String(Buffer.byteLength(a.body));
  res.writeHead(a.status, a.headers);
  res.end(a.body);
}
