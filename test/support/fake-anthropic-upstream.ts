/**
 * A fake Anthropic Messages API for tests, on loopback, built on node:http only.
 *
 * It speaks the real wire protocol: `POST /v1/messages` with the API's JSON bodies, its error body
 * `{"type":"error","error":{"type":…,"message":…},"request_id":…}`, and SSE framed exactly as
 * Anthropic sends it (`event: <type>\ndata: <json>\n\n`): message_start, ping, content_block_start /
 * _delta (text_delta, input_json_delta, thinking_delta, signature_delta) / _stop, message_delta,
 * message_stop, and `error` events. Requests are validated strictly (fake-anthropic-validate.ts).
 *
 * Order of processing for every request: the request is recorded; auth (`x-api-key`, else
 * `Authorization: Bearer`) → 401; missing or unknown `anthropic-version` → 400; unknown route →
 * 404; invalid body → 400; then the next queued behaviour, else the default (a text reply
 * "echo: <last user text>"). A `reply` is streamed when the request asked for `stream: true`.
 * Beta-only top-level fields (`context_management`) are accepted when `anthropic-beta` names
 * their beta, as the API does.
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { KNOWN_VERSIONS, validateMessagesRequest } from './fake-anthropic-validate.ts';

type Json = Record<string, unknown>;

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  /** the body's text as it arrived */
  raw: string;
}

export type FakeBlock =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Json }
  | { type: 'thinking'; thinking: string; signature?: string };

export interface FakeUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
}

export type AnthropicBehaviour =
  | {
      kind: 'reply';
      /** default: one text block "echo: <last user text>" */
      content?: FakeBlock[];
      stopReason?: string;
      usage?: FakeUsage;
      headers?: Record<string, string>;
      /** streaming: send an `error` event (and end) after this many content deltas */
      errorAfter?: { deltas: number; type: string; message: string };
      /** streaming: destroy the socket after this many content deltas */
      dropAfter?: number;
      /** streaming: pause between events */
      delayMs?: number;
    }
  | { kind: 'error'; status: number; type: string; message: string; headers?: Record<string, string> }
  /** raw SSE events, sent as they are (for recorded sequences); `text` is sent in place of `data`'s JSON */
  | { kind: 'events'; events: Array<{ event: string; data?: unknown; text?: string }> };

export interface FakeAnthropic {
  /** 'http://127.0.0.1:<port>' (the SDK adds /v1/messages) */
  url: string;
  requests: RecordedRequest[];
  enqueue(...b: AnthropicBehaviour[]): void;
  /** Streams whose client went away before the last event was written. */
  clientAborts: number;
  /** Resolves at the next (or an already counted, since reset) client abort of a stream. */
  waitForClientAbort(): Promise<void>;
  reset(): void;
  close(): Promise<void>;
}

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const id = (prefix: string): string => prefix + randomBytes(12).toString('base64url');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const words = (s: string): number => (s.trim() === '' ? 0 : s.trim().split(/\s+/).length);

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((b) => (isRecord(b) && b.type === 'text' && typeof b.text === 'string' ? b.text : '')).join(' ');
}

function errorBody(type: string, message: string): string {
  return JSON.stringify({ type: 'error', error: { type, message }, request_id: id('req_') });
}

/** "a b c" → ["a ", "b ", "c"] */
function pieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

function fragments(json: string): string[] {
  const n = Math.min(3, json.length);
  const size = Math.ceil(json.length / Math.max(1, n));
  const out: string[] = [];
  for (let i = 0; i < json.length; i += size) out.push(json.slice(i, i + size));
  return out;
}

/** Top-level fields the API takes only with their beta named in `anthropic-beta`. */
const BETA_FIELDS: Record<string, string> = { context_management: 'context-management-2025-06-27' };

/** The body without the beta fields its `anthropic-beta` header enables (validated as the rest). */
function withoutBetaFields(body: unknown, beta: string | string[] | undefined): unknown {
  const betas = String(beta ?? '').split(',').map((s) => s.trim());
  if (!isRecord(body)) return body;
  const out = { ...body };
  for (const [field, name] of Object.entries(BETA_FIELDS)) if (betas.includes(name)) delete out[field];
  return out;
}

class FakeAnthropicImpl implements FakeAnthropic {
  url = '';
  requests: RecordedRequest[] = [];
  clientAborts = 0;
  private abortWaiters: Array<() => void> = [];
  private queue: AnthropicBehaviour[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly server: http.Server;

  constructor(private readonly apiKey: string | undefined) {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch(() => res.destroy());
    });
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  enqueue(...b: AnthropicBehaviour[]): void {
    this.queue.push(...b);
  }

  reset(): void {
    this.requests = [];
    this.queue = [];
    this.clientAborts = 0;
  }

  waitForClientAbort(): Promise<void> {
    if (this.clientAborts > 0) return Promise.resolve();
    return new Promise((resolve) => this.abortWaiters.push(resolve));
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = raw === '' ? undefined : JSON.parse(raw);
    } catch {
      body = undefined;
    }
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    this.requests.push({ method: req.method ?? '', path, headers: { ...req.headers }, body, raw });
    const send = (status: number, payload: string, headers: Record<string, string> = {}): void => {
      res.writeHead(status, { 'content-type': 'application/json', 'request-id': id('req_'), ...headers });
      res.end(payload);
    };

    const xKey = req.headers['x-api-key'];
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const key = typeof xKey === 'string' ? xKey : bearer;
    if (this.apiKey !== undefined && key !== this.apiKey) return send(401, errorBody('authentication_error', 'invalid x-api-key'));
    const version = req.headers['anthropic-version'];
    if (typeof version !== 'string') return send(400, errorBody('invalid_request_error', 'anthropic-version: header is required'));
    if (!KNOWN_VERSIONS.has(version)) return send(400, errorBody('invalid_request_error', `anthropic-version: unknown version "${version}"`));

    if (req.method === 'GET' && path === '/v1/models') {
      const data = [{ type: 'model', id: 'claude-test-1', display_name: 'Claude Test', created_at: '2026-01-01T00:00:00Z' }];
      return send(200, JSON.stringify({ data, has_more: false, first_id: 'claude-test-1', last_id: 'claude-test-1' }));
    }
    if (req.method === 'POST' && path === '/v1/messages/count_tokens') {
      // a count of its own (words + 10 per message), distinguishable from any gateway estimate
      if (!isRecord(body) || !Array.isArray(body.messages)) return send(400, errorBody('invalid_request_error', 'messages: Field required'));
      const queued = this.queue[0];
      if (queued?.kind === 'error') {
        this.queue.shift();
        return send(queued.status, errorBody(queued.type, queued.message), queued.headers);
      }
      const n = body.messages.reduce((acc: number, m) => acc + 10 + (isRecord(m) ? words(textOf(m.content)) : 0), 0) + words(textOf(body.system));
      return send(200, JSON.stringify({ input_tokens: 1000 + n }));
    }
    if (req.method !== 'POST' || path !== '/v1/messages') return send(404, errorBody('not_found_error', `Not found: ${req.method} ${path}`));
    if (!String(req.headers['content-type'] ?? '').includes('application/json')) {
      return send(400, errorBody('invalid_request_error', 'content-type must be application/json'));
    }
    if (body === undefined) return send(400, errorBody('invalid_request_error', 'request body is not valid JSON'));
    const problem = validateMessagesRequest(withoutBetaFields(body, req.headers['anthropic-beta']), version);
    if (problem) return send(400, errorBody('invalid_request_error', problem));

    const b = body as Json;
    const behaviour = this.queue.shift() ?? { kind: 'reply' };
    if (behaviour.kind === 'error') return send(behaviour.status, errorBody(behaviour.type, behaviour.message), behaviour.headers);
    if (behaviour.kind === 'events') return this.sse(res, behaviour.events, {});

    const messages = Array.isArray(b.messages) ? b.messages : [];
    const lastUser = [...messages].reverse().find((m) => isRecord(m) && m.role === 'user');
    const content: FakeBlock[] = behaviour.content ?? [{ type: 'text', text: `echo: ${isRecord(lastUser) ? textOf(lastUser.content) : ''}` }];
    const promptWords = messages.reduce((n: number, m) => n + (isRecord(m) ? words(textOf(m.content)) : 0), 0) + words(textOf(b.system));
    const outWords = content.reduce((n, c) => n + (c.type === 'text' ? words(c.text) : c.type === 'thinking' ? words(c.thinking) : 5), 0);
    const usage = {
      input_tokens: promptWords,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: outWords,
      service_tier: 'standard',
      ...behaviour.usage,
    };
    const stopReason = behaviour.stopReason ?? (content.some((c) => c.type === 'tool_use') ? 'tool_use' : 'end_turn');
    const message = {
      id: id('msg_'),
      type: 'message',
      role: 'assistant',
      model: String(b.model),
      content: content.map((c) => (c.type === 'thinking' ? { ...c, signature: c.signature ?? 'sig' } : c)),
      stop_reason: stopReason,
      stop_sequence: null,
      stop_details: null,
      container: null,
      usage,
    };
    if (b.stream !== true) return send(200, JSON.stringify(message), behaviour.headers);

    const events: Array<{ event: string; data: unknown }> = [];
    const ev = (event: string, data: Json): number => events.push({ event, data: { type: event, ...data } });
    ev('message_start', { message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } });
    ev('ping', {});
    content.forEach((c, index) => {
      if (c.type === 'text') {
        ev('content_block_start', { index, content_block: { type: 'text', text: '' } });
        for (const p of pieces(c.text)) ev('content_block_delta', { index, delta: { type: 'text_delta', text: p } });
      } else if (c.type === 'tool_use') {
        ev('content_block_start', { index, content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} } });
        ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: '' } });
        const json = JSON.stringify(c.input);
        for (const f of json === '{}' ? [] : fragments(json)) ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: f } });
      } else {
        ev('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
        for (const p of pieces(c.thinking)) ev('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: p } });
        ev('content_block_delta', { index, delta: { type: 'signature_delta', signature: c.signature ?? 'sig' } });
      }
      ev('content_block_stop', { index });
    });
    ev('message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } });
    ev('message_stop', {});
    return this.sse(res, events, behaviour);
  }

  private async sse(
    res: ServerResponse,
    events: Array<{ event: string; data?: unknown; text?: string }>,
    o: { errorAfter?: { deltas: number; type: string; message: string }; dropAfter?: number; delayMs?: number; headers?: Record<string, string> },
  ): Promise<void> {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'request-id': id('req_'), ...o.headers });
    res.on('close', () => {
      if (res.writableFinished) return;
      this.clientAborts++;
      for (const w of this.abortWaiters.splice(0)) w();
    });
    let deltas = 0;
    for (const e of events) {
      if (res.destroyed) return;
      if (o.delayMs) await sleep(o.delayMs);
      res.write(`event: ${e.event}\ndata: ${e.text ?? JSON.stringify(e.data)}\n\n`);
      if (e.event !== 'content_block_delta') continue;
      deltas++;
      if (o.errorAfter && deltas >= o.errorAfter.deltas) {
        res.end(`event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: o.errorAfter.type, message: o.errorAfter.message } })}\n\n`);
        return;
      }
      if (o.dropAfter !== undefined && deltas >= o.dropAfter) {
        await sleep(20);
        res.socket?.destroy();
        return;
      }
    }
    res.end();
  }
}

export async function startFakeAnthropic(opts: { apiKey?: string } = {}): Promise<FakeAnthropic> {
  const f = new FakeAnthropicImpl(opts.apiKey);
  await f.listen();
  return f;
}
