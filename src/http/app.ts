/**
 * createApp(deps): the Hono app of the admin plane — health, readiness, metrics, status (JSON and
 * HTML) — and the 404 of any path outside `/v1`. The API (`/v1/*`) never comes here: the listener
 * serves all of it (listener.ts, api.ts). No I/O of its own.
 *
 * Order: access log (the request's exchange) → admin key where needed → route. Every error,
 * unknown routes and wrong methods included, goes through `onError` / `notFound` and leaves as
 * the OpenAI error envelope.
 */
import { Hono, type Context } from 'hono';
import type { GenerationDeps } from './deps.ts';
import { methodNotAllowed, routeNotFound } from '../errors/gateway-error.ts';
import { accessLog } from './access-log.ts';
import { errorAnswer } from './api.ts';
import { adminMiddleware } from './auth.ts';
import { metricsHandler } from './admin/metrics.ts';
import { statusHtmlHandler, statusJsonHandler } from './admin/status.ts';
import { healthHandler, readyHandler } from './admin/health.ts';
import type { AppEnv } from './types.ts';

function errorResponse(c: Context<AppEnv>, err: unknown, deps: GenerationDeps): Response {
  const a = errorAnswer(deps, c.get('x'), err);
  for (const k in a.headers) c.header(k, a.headers[k]);
  return c.body(a.body, a.status as 400);
}

export function createApp(deps: GenerationDeps): Hono<AppEnv> {
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
