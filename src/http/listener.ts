/**
 * A configuration generation's request listener: the one way in. Every request's target is
 * normalised once (path.ts) and served through the route table of both planes, their guards and
 * the error answer (api.ts), whatever route it names or fails to name: 404 `unknown_url` and 405
 * `method_not_allowed` (with `allow`) included, each in its route's envelope. A `/v1/*` request is
 * traced; a path outside `/v1` that names no route gets its 404 without a guard.
 *
 * Hot path: a path without params costs one scan (normalisePath) and two Map lookups.
 */
import type { RequestListener } from 'node:http';
import { methodNotAllowed, routeNotFound } from '../errors/gateway-error.ts';
import type { GenerationDeps } from './deps.ts';
import { openExchange, trackInFlight } from './access-log.ts';
import { createApi, sendError, type Api } from './api.ts';
import { settleUnreadBody } from './body.ts';
import type { Exchange } from './exchange.ts';
import { normalisePath } from './path.ts';
import type { Match } from './route-table.ts';

/** The API plane: `/v1` and everything under it. */
function isApiPath(path: string): boolean {
  return path.startsWith('/v1') && (path.length === 3 || path.charCodeAt(3) === 47);
}

export function createListener(deps: GenerationDeps): RequestListener {
  const api = createApi(deps);
  const { routes } = api;
  return (incoming, outgoing) => {
    const path = normalisePath(incoming.url ?? '');
    serve(deps, api, openExchange(deps, incoming, outgoing), path, routes.find(path));
  };
}

/** One request: route, guard, then the handler or the 404 / 405. */
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
  const apiPlane = isApiPath(path);
  if (deps.tracing !== undefined && apiPlane) x.trace = deps.tracing.startRequest(x.requestId, method, path, x.log.route, x.incoming.headers);
  // a path with routes is guarded as they are; an unknown one under /v1 as the API is
  const guard = found !== undefined ? found.at.guard : apiPlane ? api.guard : undefined;
  try {
    guard?.(x);
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
  if (route.plane === 'api') trackInFlight(deps, x);
  if (!route.readsBody) {
    // a body nobody reads (a GET that came with one): dropped as it comes, or the connection closes after the answer
    settleUnreadBody(x);
    if (x.closeAfter) x.out.connection = 'close';
  }
  route.handler(x).catch((err: unknown) => sendError(deps, x, err));
}
