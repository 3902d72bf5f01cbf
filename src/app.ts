/**
 * createApp(deps): the Hono app — middleware order, routes, error envelope. No I/O of its own.
 *
 * Order: request id + access log → on /v1/*, one middleware: route name, overload gate, auth →
 * route (body read with a size limit → zod validation → gateway → JSON or SSE). Every error of
 * every route, including unknown routes and wrong methods, goes through `onError` / `notFound` and
 * leaves as the OpenAI error envelope.
 */
import { Hono, type Context } from 'hono';
import type { Deps } from './deps.ts';
import { asGatewayError, errorHeaders, methodNotAllowed, routeNotFound, toOpenAIError } from './errors.ts';
import { accessLog } from './http/access-log.ts';
import { adminMiddleware, keyCheck } from './http/auth.ts';
import { metricsHandler } from './http/metrics.ts';
import { overloadGate } from './http/overload.ts';
import { statusHtmlHandler, statusJsonHandler } from './http/status.ts';
import { chatHandler } from './http/chat.ts';
import { completionsHandler } from './http/completions.ts';
import { embeddingsHandler } from './http/embeddings.ts';
import { healthHandler, readyHandler } from './http/health.ts';
import { getModelHandler, listModelsHandler } from './http/models.ts';
import type { AppEnv, RequestLog } from './http/types.ts';


function errorResponse(c: Context<AppEnv>, err: unknown, deps: Deps): Response {
  const e = asGatewayError(err);
  if (e.status >= 500 && e.code === 'internal_error') {
    const cause = e.cause instanceof Error ? e.cause : undefined;
    deps.logger.error('internal error', {
      request_id: c.get('requestId'),
      error: cause?.name ?? 'unknown',
      detail: cause?.message?.slice(0, 500),
      stack: cause?.stack?.split('\n').slice(0, 6).join(' | '),
    });
  }
  const log = c.get('log') as RequestLog | undefined;
  if (log) {
    log.errorCode = e.code ?? e.type;
    if (e.attempts !== undefined) log.attempts = e.attempts;
    if (e.backend !== undefined) log.backend ??= e.backend;
  }
  for (const [k, v] of Object.entries(errorHeaders(e))) c.header(k, v);
  c.header('content-type', 'application/json');
  // 499 is not a status a client ever sees; it only marks our own log line.
  return c.body(JSON.stringify(toOpenAIError(e)), (e.status === 499 ? 400 : e.status) as 400);
}

export function createApp(deps: Deps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.use('*', accessLog(deps));

  const health = healthHandler();
  const ready = readyHandler(deps);
  app.get('/health', (c) => ((c.get('log').route = '/health'), health(c)));
  app.get('/ready', (c) => ((c.get('log').route = '/ready'), ready(c)));

  const admin = deps.config.admin;
  app.get('/metrics', adminMiddleware(admin, deps.config.keys, { open: admin.public_metrics }), (c) => {
    c.get('log').route = '/metrics';
    return metricsHandler(deps)(c);
  });

  const guard = adminMiddleware(admin, deps.config.keys);
  app.get('/status', guard, (c) => {
    c.get('log').route = '/status';
    return statusJsonHandler(deps)(c);
  });
  app.get('/', adminMiddleware(admin, deps.config.keys, { browser: true }), (c) => {
    c.get('log').route = '/';
    return statusHtmlHandler(deps)(c);
  });

  const routes: Array<[method: 'GET' | 'POST', path: string, handler: (c: Context<AppEnv>) => Response | Promise<Response>]> = [
    ['POST', '/v1/chat/completions', chatHandler(deps)],
    ['POST', '/v1/completions', completionsHandler(deps)],
    ['POST', '/v1/embeddings', embeddingsHandler(deps)],
    ['GET', '/v1/models', listModelsHandler(deps)],
    ['GET', '/v1/models/:model{.+}', getModelHandler(deps)],
  ];

  // The route is known before the guards run, so what they refuse (503 server_overloaded, 401) is
  // counted in the request metrics under it.
  // (a `:param{.+}` route matches its prefix followed by anything non-empty)
  const matchers = routes.map(([method, path]) => {
    const param = path.indexOf(':');
    const prefix = param < 0 ? path : path.slice(0, param);
    return { method, path, matches: (p: string): boolean => (param < 0 ? p === path : p.length > prefix.length && p.startsWith(prefix)) };
  });
  // One middleware for the three: each layer of Hono's chain is an async call of its own.
  const admit = overloadGate(deps.config.server.max_concurrent_requests);
  const authenticate = keyCheck(deps.config.keys);
  app.use('/v1/*', async (c, next) => {
    const known = matchers.find((r) => r.method === c.req.method && r.matches(c.req.path));
    if (known) c.get('log').route = known.path;
    const release = admit?.(c);
    try {
      authenticate?.(c);
      await next();
    } finally {
      release?.();
    }
  });

  for (const [method, path, handler] of routes) {
    app.on(method, path, (c) => {
      c.get('log').route = path;
      c.get('trackInFlight')();
      return handler(c);
    });
    app.all(path, (c) => {
      c.header('allow', method);
      throw methodNotAllowed(c.req.method, c.req.path);
    });
  }
  for (const path of ['/health', '/ready', '/metrics', '/status', '/']) {
    app.all(path, (c) => {
      c.header('allow', 'GET');
      throw methodNotAllowed(c.req.method, c.req.path);
    });
  }

  app.notFound((c) => errorResponse(c, routeNotFound(c.req.method, c.req.path), deps));
  app.onError((err, c) => errorResponse(c, err, deps));
  return app;
}
