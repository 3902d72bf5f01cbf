/**
 * One loopback server that answers as four kinds of upstream, each from the next queued
 * `ScriptedAnswer`, with its body's bytes written in the answer's pieces (separate writes, each
 * flushed before the next, so a piece may end inside a multi-byte character or a `data:` line):
 *
 *   /v1/chat/completions, /v1/completions            an OpenAI-compatible API (base_url …/v1)
 *   /llama/v1/chat/completions, /llama/v1/completions llama-server (base_url …/llama), with
 *   /llama/health, /llama/slots, /llama/props          its readiness and capacity routes
 *   /anthropic/v1/messages                             Anthropic's Messages API (base_url …/anthropic)
 *   /native/v1/responses                               OpenAI's Responses API (base_url …/native/v1)
 *
 * A POST with nothing queued gets a 500. Every POST's body is recorded (parsed) for the request
 * side of the checks. Wire shapes: scripted-bodies.ts.
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { anthropicJson, anthropicSse, chatJson, chatSse, completionJson, completionSse, responsesJson, responsesSse } from './scripted-bodies.ts';
import { cutPoints, type Flavour, type ScriptedAnswer } from './scripted-wire.ts';

export type UpstreamProtocol = 'chat' | 'completions' | 'messages' | 'responses';

export interface ScriptedRequest {
  path: string;
  protocol: UpstreamProtocol;
  flavour: Flavour;
  body: Record<string, unknown>;
}

export interface ScriptedUpstream {
  /** http://127.0.0.1:PORT (the routes' prefixes above follow) */
  url: string;
  requests: ScriptedRequest[];
  /** the ids of the Responses answers given, in order */
  responseIds: string[];
  enqueue(answer: ScriptedAnswer): void;
  /** forget queued answers and recorded requests */
  reset(): void;
  close(): Promise<void>;
}

const ROUTES: Record<string, { protocol: UpstreamProtocol; flavour: Flavour }> = {
  '/v1/chat/completions': { protocol: 'chat', flavour: 'openai' },
  '/v1/completions': { protocol: 'completions', flavour: 'openai' },
  '/llama/v1/chat/completions': { protocol: 'chat', flavour: 'llama' },
  '/llama/v1/completions': { protocol: 'completions', flavour: 'llama' },
  '/anthropic/v1/messages': { protocol: 'messages', flavour: 'openai' },
  '/native/v1/responses': { protocol: 'responses', flavour: 'openai' },
};

const LLAMA_GETS: Record<string, string> = {
  '/llama/health': '{"status":"ok"}',
  '/llama/slots': '[{"id":0,"n_ctx":4096,"is_processing":false}]',
  '/llama/props': '{"total_slots":1}',
};

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

/** Writes `body` in pieces cut at `cuts`, each write flushed before the next. */
async function writePieces(res: ServerResponse, body: Buffer, cuts: number[]): Promise<void> {
  let from = 0;
  for (const to of [...cutPoints(body, cuts), body.length]) {
    const piece = body.subarray(from, to);
    from = to;
    if (res.destroyed) return;
    await new Promise<void>((resolve) => res.write(piece, () => resolve()));
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  res.end();
}

function render(a: ScriptedAnswer, protocol: UpstreamProtocol, flavour: Flavour, body: Record<string, unknown>, responseId: string): { text: string; sse: boolean } {
  const model = typeof body['model'] === 'string' ? body['model'] : 'unknown';
  const sse = body['stream'] === true;
  const includeUsage = isRecord(body['stream_options']) && body['stream_options']['include_usage'] === true;
  switch (protocol) {
    case 'chat':
      return { sse, text: sse ? chatSse(a, model, flavour, includeUsage) : chatJson(a, model, flavour) };
    case 'completions':
      return { sse, text: sse ? completionSse(a, model, flavour, includeUsage) : completionJson(a, model, flavour) };
    case 'messages':
      return { sse, text: sse ? anthropicSse(a, model) : anthropicJson(a, model) };
    case 'responses':
      return { sse, text: sse ? responsesSse(a, responseId, model) : responsesJson(a, responseId, model) };
    default: {
      const never: never = protocol;
      throw new Error(`unknown protocol ${String(never)}`);
    }
  }
}

export async function startScriptedUpstream(): Promise<ScriptedUpstream> {
  const queue: ScriptedAnswer[] = [];
  const requests: ScriptedRequest[] = [];
  const responseIds: string[] = [];
  const sockets = new Set<Socket>();
  let served = 0;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const text = await readBody(req);
    const get = LLAMA_GETS[path];
    if (req.method === 'GET' && get !== undefined) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(get);
      return;
    }
    const route = ROUTES[path];
    const answer = req.method === 'POST' && route ? queue.shift() : undefined;
    if (!route || !answer) {
      res.writeHead(route ? 500 : 404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `nothing scripted for ${req.method ?? ''} ${path}`, type: 'server_error' } }));
      return;
    }
    const body: unknown = JSON.parse(text);
    if (!isRecord(body)) throw new Error('a request body that is not an object');
    requests.push({ path, protocol: route.protocol, flavour: route.flavour, body });
    const responseId = `resp_scripted${++served}${Math.random().toString(36).slice(2, 10)}`;
    if (route.protocol === 'responses') responseIds.push(responseId);
    const out = render(answer, route.protocol, route.flavour, body, responseId);
    const headers: Record<string, string> = { 'content-type': out.sse ? 'text/event-stream; charset=utf-8' : 'application/json' };
    if (route.protocol === 'messages') headers['request-id'] = 'req_scripted';
    res.writeHead(200, headers);
    await writePieces(res, Buffer.from(out.text, 'utf8'), answer.cuts);
  };

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: String(err) } }));
      else res.destroy();
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests,
    responseIds,
    enqueue: (a) => {
      queue.push(a);
    },
    reset: () => {
      queue.length = 0;
      requests.length = 0;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
