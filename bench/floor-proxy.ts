/**
 * The floor: the least a Node.js HTTP proxy can do. node:http in front, `undici.request` behind
 * through one pooled keep-alive Agent, the request body streamed up and the response body streamed
 * straight back (no parsing, no buffering: SSE chunks leave as they arrive). Hop-by-hop headers
 * are dropped both ways. Whatever Switchyard costs beyond this is the price of its features.
 *
 *   node --import tsx bench/floor-proxy.ts <upstream origin> [port]   prints {"port":N} once listening
 */
import { createServer, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { Agent, request } from 'undici';

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host']);

const upstream = process.argv[2];
if (!upstream) {
  process.stderr.write('usage: floor-proxy.ts <upstream origin> [port]\n');
  process.exit(2);
}
const origin = new URL(upstream).origin;
const agent = new Agent({ connections: 256, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, headersTimeout: 0, bodyTimeout: 0 });

function forwardHeaders(h: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !HOP.has(k)) out[k] = v;
  return out;
}

function backHeaders(h: Record<string, string | string[] | undefined>): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !HOP.has(k)) out[k] = v;
  return out;
}

const server = createServer((req, res) => {
  const method = req.method === 'POST' ? 'POST' : 'GET';
  request(`${origin}${req.url ?? '/'}`, { method, headers: forwardHeaders(req.headers), body: method === 'POST' ? req : null, dispatcher: agent })
    .then(async (up) => {
      res.writeHead(up.statusCode, backHeaders(up.headers));
      await pipeline(up.body, res);
    })
    .catch((err: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const message = err instanceof Error ? err.message : 'upstream failed';
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message, type: 'upstream_error', param: null, code: 'upstream_unreachable' } }));
    });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.argv[3] ?? 0), '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
const stop = (): void => {
  server.closeAllConnections();
  server.close(() => void agent.close().then(() => process.exit(0)));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
