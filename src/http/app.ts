/**
 * createApp(deps, api): the Hono app — middleware order, routes, error envelope. No I/O of its own.
 * The generation routes normally come in through their own listener (http/listener.ts) and reach
 * Hono only when their path is spelled unusually; they share the guard and the error answer
 * (http/api.ts), so either way gives the same answer.
 *
 * Order: access log (the request's exchange) → on /v1/*, one middleware: route name, overload
 * gate, auth → route. Every error of every route, including unknown routes and wrong methods,
 * goes through `onError` / `notFound` and leaves as the OpenAI error envelope.
 */
import { Hono, type Context } from 'hono';
import type { Deps } from './deps.ts';
import { methodNotAllowed, routeNotFound } from '../errors/gateway-error.ts';
import { accessLog, trackInFlight } from './access-log.ts';
import { errorAnswer, type Api } from './api.ts';
import { adminMiddleware } from './auth.ts';
import { alreadySent } from './direct.ts';
import { metricsHandler } from './admin/metrics.ts';
import { statusHtmlHandler, statusJsonHandler } from './admin/status.ts';
import { healthHandler, readyHandler } from './admin/health.ts';
import { getModelHandler, listModelsHandler } from './routes/models.ts';
import type { AppEnv } from './types.ts';


function errorResponse(c: Context<AppEnv>, err: unknown, deps: Deps): Response {
  const a = errorAnswer(deps, c.get('x'), err);
  for (const k in a.headers) c.header(k, a.headers[k]);
  return c.body(a.body, a.status as 400);
}

export function createApp(deps: Deps, api: Api): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.use('*', accessLog(deps));

  const health = healthHandler();
  const ready = readyHandler(deps);
  app.get('/health', (c) => ((c.get('x').log.route = '/health'), health(c)));
  app.get('/ready', (c) => ((c.get('x').log.route = '/ready'), ready(c)));

  const admin = deps.config.admin;
  app.get('/metrics', adminMiddleware(admin, deps.config.keys, { open: admin.public_metrics }), (c) => {
    c.get('x').log.route = '/metrics';
    return metricsHandler(deps)(c);
  });

  const guard = adminMiddleware(admin, deps.config.keys);
  app.get('/status', guard, (c) => {
    c.get('x').log.route = '/status';
    return statusJsonHandler(deps)(c);
  });
  app.get('/', adminMiddleware(admin, deps.config.keys, { browser: true }), (c) => {
    c.get('x').log.route = '/';
    return statusHtmlHandler(deps)(c);
  });

  const routes: Array<[method: 'GET' | 'POST', path: string, handler: (c: Context<AppEnv>) => Response | Promise<Response>]> = [
    ['GET', '/v1/models', listModelsHandler(deps)],
    ['GET', '/v1/models/:model{.+}', getModelHandler(deps)],
  ];
  // the generation routes reach Hono only when their path is spelled unusually (listener.ts)
  for (const [path, handler] of api.post) routes.push(['POST', path, (c) => handler(c.get('x')).then(alreadySent)]);

  // The route is known before the guard runs, so what it refuses (503 server_overloaded, 401) is
  // counted in the request metrics under it.
  // (a `:param{.+}` route matches its prefix followed by anything non-empty)
  const matchers = routes.map(([method, path]) => {
    const param = path.indexOf(':');
    const prefix = param < 0 ? path : path.slice(0, param);
    return { method, path, matches: (p: string): boolean => (param < 0 ? p === path : p.length > prefix.length && p.startsWith(prefix)) };
  });
  app.use('/v1/*', (c, next) => {
    const x = c.get('x');
    const known = matchers.find((r) => r.method === c.req.method && r.matches(c.req.path));
    if (known) x.log.route = known.path;
    api.guard(x);
    return next();
  });

  for (const [method, path, handler] of routes) {
    app.on(method, path, (c) => {
      const x = c.get('x');
      x.log.route = path;
      trackInFlight(deps, x);
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
