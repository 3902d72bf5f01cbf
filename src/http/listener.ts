/**
 * A configuration generation's request listener. The generation routes (POST
 * /v1/chat/completions, /v1/completions, /v1/embeddings, with or without a query string) are
 * served here without Hono: @hono/node-server's Request and Context, Hono's router and its
 * middleware chain cost 12–17 µs of a request's ~105 µs of CPU at 64 connections, and 13 of the
 * 76 µs a one-connection stream spent before its upstream call (docs/performance.md, "What
 * changed"). Every other request goes to the Hono app, which also routes these paths when they
 * are spelled otherwise (percent-encoded, say) to the same handlers, guard and error answers
 * (api.ts), so both ways answer alike (test/route-parity.test.ts).
 */
import type { RequestListener } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import { createApp } from './app.ts';
import type { Deps } from './deps.ts';
import { openExchange, trackInFlight } from './access-log.ts';
import { createApi, sendError, type ApiHandler } from './api.ts';
import type { AppEnv } from './types.ts';

export function createListener(deps: Deps): RequestListener {
  const api = createApi(deps);
  const app = createApp(deps, api);
  // The host only names requests that come without a Host header (HTTP/1.0) in the URL Hono sees.
  // A body no route read is left to settleUnreadBody (body.ts) on both ways in: node-server's own
  // clean-up would close the connection under a client still sending it.
  const viaHono = getRequestListener((req, env) => app.fetch(req, env as AppEnv['Bindings']), { hostname: deps.config.server.host, autoCleanupIncoming: false });
  return (incoming, outgoing) => {
    let handler: ApiHandler | undefined;
    let path = incoming.url ?? '';
    if (incoming.method === 'POST') {
      const q = path.indexOf('?');
      if (q >= 0) path = path.slice(0, q);
      handler = api.post.get(path);
    }
    if (handler === undefined) {
      void viaHono(incoming, outgoing);
      return;
    }
    const x = openExchange(deps, incoming, outgoing);
    x.log.route = path;
    try {
      api.guard(x);
    } catch (err) {
      sendError(deps, x, err);
      return;
    }
    trackInFlight(deps, x);
    handler(x).catch((err: unknown) => sendError(deps, x, err));
  };
}
