/**
 * A configuration generation's request listener: the one way into the API. Every request's target
 * is normalised once (path.ts); every `/v1/*` request is served here, without Hono, through the
 * API's route table, guard and error answer (api.ts), whatever route it names or fails to name:
 * 404 `unknown_url` and 405 `method_not_allowed` (with `allow`) included, each in its route's
 * envelope. Only the admin and HTML routes (/health, /ready, /metrics, /status, /) and the 404 of
 * any other path go to the Hono app (app.ts).
 *
 * Hot path: a path without params costs one scan (normalisePath) and two Map lookups; Hono's
 * adapter, router, Context and middleware chain are not on it (docs/architecture.md).
 */
import type { IncomingMessage, RequestListener } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import { methodNotAllowed, routeNotFound } from '../errors/gateway-error.ts';
import { createApp } from './app.ts';
import type { GenerationDeps } from './deps.ts';
import { openExchange, trackInFlight } from './access-log.ts';
import { createApi, sendError, type Api } from './api.ts';
import { settleUnreadBody } from './body.ts';
import type { Exchange } from './exchange.ts';
import { normalisePath } from './path.ts';
import type { Match } from './route-table.ts';
import type { AppEnv } from './types.ts';

/** The API plane: `/v1` and everything under it. */
function isApiPath(path: string): boolean {
  return path.startsWith('/v1') && (path.length === 3 || path.charCodeAt(3) === 47);
}

export function createListener(deps: GenerationDeps): RequestListener {
  const api = createApi(deps);
  const app = createApp(deps);
  // The host only names requests that come without a Host header (HTTP/1.0) in the URL Hono sees.
  // A body no route read is left to settleUnreadBody (body.ts): node-server's own clean-up would
  // close the connection under a client still sending it.
  const viaHono = getRequestListener((req, env) => app.fetch(req, env as AppEnv['Bindings']), { hostname: deps.config.server.host, autoCleanupIncoming: false });
  const { routes } = api;
  return (incoming, outgoing) => {
    const target = incoming.url ?? '';
    const path = normalisePath(target);
    const found = routes.find(path);
    if (found === undefined && !isApiPath(path)) {
      respell(incoming, target, path);
      void viaHono(incoming, outgoing);
      return;
    }
    serve(deps, api, openExchange(deps, incoming, outgoing), path, found);
  };
}

/** One `/v1/*` request: route, guard, then the handler or the 404 / 405. */
function serve(deps: GenerationDeps, api: Api, x: Exchange, path: string, found: Match | undefined): void {
  const method = x.incoming.method ?? 'GET';
  const route = found?.at.route(method);
  if (found !== undefined && route !== undefined) {
    // known before the guard, so what it refuses (503, 401) is counted under the route
    x.log.route = route.pattern;
    x.envelope = route.envelope;
    x.params = found.params;
  } else {
    x.envelope = found !== undefined ? found.at.envelope : api.routes.envelopeOf(path);
  }
  if (deps.tracing !== undefined) x.trace = deps.tracing.startRequest(x.requestId, method, path, x.log.route, x.incoming.headers);
  try {
    api.guard(x);
    if (route === undefined) {
      if (found === undefined) throw routeNotFound(method, path);
      const e = methodNotAllowed(method, path);
      e.headers = { ...e.headers, allow: found.at.allow };
      throw e;
    }
  } catch (err) {
    sendError(deps, x, err);
    return;
  }
  trackInFlight(deps, x);
  if (!route.readsBody) {
    // a body nobody reads (a GET that came with one): dropped as it comes, or the connection closes after the answer
    settleUnreadBody(x);
    if (x.closeAfter) x.out.connection = 'close';
  }
  route.handler(x).catch((err: unknown) => sendError(deps, x, err));
}

/** Hono routes by the URL it builds from `incoming.url`: give it the normalised spelling too. */
function respell(incoming: IncomingMessage, target: string, path: string): void {
  if (path === target || path.charCodeAt(0) !== 47) return;
  const q = target.indexOf('?');
  const normal = q < 0 ? path : path + target.slice(q);
  if (normal !== target) incoming.url = normal;
}
