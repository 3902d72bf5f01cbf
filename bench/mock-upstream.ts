/**
 * A zero-latency OpenAI-compatible upstream for the benchmarks (node:http, answers from prebuilt
 * buffers): POST /v1/chat/completions as JSON or as SSE (a role chunk, 20 content chunks, a finish
 * chunk, a usage chunk when `stream_options.include_usage` asks for it, [DONE]); the model
 * `mock-paced` streams with PACE_MS between chunks (the time-to-first-byte check);
 * POST /v1/embeddings answers 16 × 1536 dimensions as float or base64, as `encoding_format` asks;
 * POST /v1/responses (OpenAI Responses: a Response object, or its `event:`/`data:` stream) and
 * POST /v1/messages (Anthropic Messages: a Message, or its stream), each with the same answer and
 * the same 20 content deltas as chat, in one write; GET /v1/models. Any path prefix before /v1 and
 * any query string are accepted.
 *
 *   node --import tsx bench/mock-upstream.ts [port]     prints {"port":N} once listening
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import {
  CHAT_MODEL,
  CLAUDE_MODEL,
  PACE_MS,
  PACED_MODEL,
  chatResponse,
  embedBase64Response,
  embedFloatResponse,
  messagesResponse,
  messagesSseScript,
  modelsResponse,
  responsesResponse,
  responsesSseScript,
  sseScript,
  type SseScript,
} from './payloads.ts';

const JSON_TYPE = 'application/json';
const scripts = new Map<string, SseScript>();
/** Built for the models the benchmark sends (the streams carry the model name); others share the chat model's. */
const responsesScript = Buffer.concat(responsesSseScript(CHAT_MODEL));
const messagesScript = Buffer.concat(messagesSseScript(CLAUDE_MODEL));
const SSE_HEAD = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };

function script(model: string): SseScript {
  let s = scripts.get(model);
  if (!s) {
    s = sseScript(model);
    scripts.set(model, s);
  }
  return s;
}

function sendJson(res: ServerResponse, status: number, body: Buffer): void {
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': body.length });
  res.end(body);
}

function stream(res: ServerResponse, body: string): void {
  const paced = body.includes(`"model":"${PACED_MODEL}"`);
  const s = script(paced ? PACED_MODEL : CHAT_MODEL);
  const tail = body.includes('"include_usage":true') ? [s.usage, s.done] : [s.done];
  res.writeHead(200, SSE_HEAD);
  if (!paced) {
    // zero latency: everything in one write, as a fast upstream's kernel buffer would deliver it
    res.end(Buffer.concat([...s.chunks, ...tail]));
    return;
  }
  const all = [...s.chunks, ...tail];
  let i = 0;
  const next = (): void => {
    if (res.destroyed) return;
    const c = all[i++];
    if (c === undefined) {
      res.end();
      return;
    }
    res.write(c);
    setTimeout(next, PACE_MS);
  };
  next();
}

function sendStream(res: ServerResponse, all: Buffer): void {
  res.writeHead(200, SSE_HEAD);
  res.end(all);
}

function handle(req: IncomingMessage, res: ServerResponse, body: string): void {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (req.method === 'POST' && path.endsWith('/v1/chat/completions')) {
    if (body.includes('"stream":true')) stream(res, body);
    else sendJson(res, 200, chatResponse);
    return;
  }
  if (req.method === 'POST' && path.endsWith('/v1/responses')) {
    if (body.includes('"stream":true')) sendStream(res, responsesScript);
    else sendJson(res, 200, responsesResponse);
    return;
  }
  if (req.method === 'POST' && path.endsWith('/v1/messages')) {
    if (body.includes('"stream":true')) sendStream(res, messagesScript);
    else sendJson(res, 200, messagesResponse);
    return;
  }
  if (req.method === 'POST' && path.endsWith('/v1/embeddings')) {
    sendJson(res, 200, body.includes('"encoding_format":"base64"') ? embedBase64Response : embedFloatResponse);
    return;
  }
  if (req.method === 'GET' && path.endsWith('/v1/models')) {
    sendJson(res, 200, modelsResponse);
    return;
  }
  sendJson(res, 404, Buffer.from(JSON.stringify({ error: { message: `mock: no route ${req.method} ${path}`, type: 'invalid_request_error', param: null, code: 'unknown_url' } })));
}

export function startMock(port = 0): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => handle(req, res, body));
  });
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 0;
  server.requestTimeout = 0;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () =>
          new Promise<void>((r) => {
            server.closeAllConnections();
            server.close(() => r());
          }),
      });
    });
  });
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain) {
  const m = await startMock(Number(process.argv[2] ?? 0));
  process.stdout.write(`${JSON.stringify({ port: m.port })}\n`);
  const stop = (): void => void m.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
