/**
 * A fake OpenAI-compatible upstream for tests, built on node:http only.
 *
 * It speaks the real wire protocol: OpenAI's JSON bodies and error envelopes,
 * and `text/event-stream` framing with one `data: <json>\n\n` event per write,
 * terminated by `data: [DONE]\n\n`.
 *
 * Order of processing for every request:
 *   1. the body is read, parsed and the request is recorded in `requests`;
 *   2. if `apiKey` was given and the Authorization header does not match → 401;
 *   3. unknown route → 404 "Invalid URL (METHOD /path)";
 *   4. malformed JSON / missing required fields → 400;
 *   5. behaviour: `onModel` rule for body.model, else the next queued one, else the default.
 * Steps 2–4 never consume a queued behaviour.
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown /* parsed JSON or undefined */;
  /** performance.now() when the request (its body read) was recorded */
  at: number;
}

export interface FakeToolCall {
  id: string;
  name: string;
  arguments: string;
}

export type Behaviour =
  | {
      kind: 'reply';
      content?: string;
      toolCalls?: FakeToolCall[];
      finishReason?: string;
      usage?: { prompt_tokens: number; completion_tokens: number };
      headers?: Record<string, string>;
      /** wait this long before answering (a slow but healthy upstream) */
      delayMs?: number;
    }
  | {
      kind: 'stream';
      chunks?: string[];
      delayMs?: number;
      toolCalls?: FakeToolCall[];
      /** destroy the socket after this many content chunks, no [DONE] */
      dropAfter?: number;
      noDone?: boolean;
      /** send `data: {"error":{...}}` after N content chunks */
      errorAfter?: { after: number; message: string };
      /** stop writing after N content chunks and keep the connection open (a mid-stream stall) */
      stallAfter?: number;
    }
  | {
      kind: 'error';
      status: number;
      message?: string;
      type?: string;
      code?: string | null;
      param?: string | null;
      headers?: Record<string, string>;
      /** send this body verbatim instead of the JSON envelope */
      rawBody?: string;
    }
  /** accept the request and never answer (until the client closes) */
  | { kind: 'hang' }
  /** send 200 + SSE headers (or JSON headers) and then nothing */
  | { kind: 'hangAfterHeaders' }
  /** destroy the socket immediately without a response */
  | { kind: 'destroy' };

export interface FakeUpstream {
  /** 'http://127.0.0.1:<port>/v1' */
  url: string;
  /** every request received, in order */
  requests: RecordedRequest[];
  /** Queue behaviours for the next requests (FIFO); when the queue is empty the default behaviour applies. */
  enqueue(...b: Behaviour[]): void;
  /** Behaviour for requests whose body.model equals `model` (checked before the queue). */
  onModel(model: string, b: Behaviour): void;
  /**
   * Resolves when the n-th (1-based) request's connection was closed by the client before the
   * response finished. Without `n`: resolves on the first client abort since start/reset (at once
   * if one already happened).
   */
  waitForClientAbort(n?: number): Promise<void>;
  /** count of requests whose client went away before the response finished */
  clientAborts: number;
  /** timestamps (performance.now()) at which each SSE chunk of the last stream was written */
  lastStreamWrites: number[];
  /** clear requests, queue, per-model behaviours, counters */
  reset(): void;
  /** closes the server and destroys open sockets */
  close(): Promise<void>;
}

export interface FakeOpenAIOptions {
  /** if set, requests without `Authorization: Bearer <apiKey>` get OpenAI's 401 body */
  apiKey?: string;
  /** behave like vendors that always return float arrays */
  embeddingsIgnoreBase64?: boolean;
}

// ---------------------------------------------------------------------------
// helpers

type Json = Record<string, unknown>;
type Route = 'chat' | 'completions' | 'embeddings' | 'models' | 'model';
type StreamBehaviour = Extract<Behaviour, { kind: 'stream' }>;
type ReplyBehaviour = Extract<Behaviour, { kind: 'reply' }>;

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  route: Route;
  path: string;
  body: Json;
  model: string;
  requestId: string;
  markServerDestroyed(): void;
}

interface SseEvent {
  data: string;
  /** 'pre' = before content (role chunk), 'content' = a content chunk, 'post' = anything after */
  phase: 'pre' | 'content' | 'post';
}

const MODEL_IDS: ReadonlyArray<{ id: string; created: number; owned_by: string }> = [
  { id: 'gpt-4o-mini', created: 1721172741, owned_by: 'system' },
  { id: 'gpt-4o', created: 1715367049, owned_by: 'system' },
  { id: 'gpt-3.5-turbo-instruct', created: 1692901427, owned_by: 'system' },
  { id: 'text-embedding-3-small', created: 1705948997, owned_by: 'system' },
];

const SYSTEM_FINGERPRINT = 'fp_fake0000';
/** pause between the last write and the socket destroy of `dropAfter` */
const DROP_GRACE_MS = 25;

function isRecord(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function randomId(prefix: string, bytes = 15): string {
  return prefix + randomBytes(bytes).toString('hex');
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function countWords(text: string): number {
  const t = text.trim();
  return t === '' ? 0 : t.split(/\s+/).length;
}

/** Text of a chat message `content` (string or array of content parts). */
function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((p) => (isRecord(p) && typeof p['text'] === 'string' ? p['text'] : ''))
      .join(' ');
  }
  return '';
}

function estimatePromptTokens(body: Json): number {
  let n = 0;
  const messages = body['messages'];
  if (Array.isArray(messages)) {
    for (const m of messages) if (isRecord(m)) n += countWords(messageText(m['content'])) + 3;
  }
  const prompt = body['prompt'];
  if (typeof prompt === 'string') n += countWords(prompt);
  else if (Array.isArray(prompt)) for (const p of prompt) if (typeof p === 'string') n += countWords(p);
  return Math.max(1, n);
}

/** "Hello from gpt" → ["Hello ", "from ", "gpt"] */
function splitWords(content: string): string[] {
  if (content === '') return [];
  const parts = content.split(' ');
  return parts.map((p, i) => (i < parts.length - 1 ? `${p} ` : p));
}

/** Split tool-call arguments into 2–3 fragments (fewer only if the string is shorter). */
function splitArguments(args: string): string[] {
  if (args.length === 0) return [];
  const n = Math.min(3, args.length);
  const size = Math.ceil(args.length / n);
  const out: string[] = [];
  for (let i = 0; i < args.length; i += size) out.push(args.slice(i, i + size));
  return out;
}

function usageOf(prompt: number, completion: number): Usage {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function wantsWeatherTool(body: Json): boolean {
  const tools = body['tools'];
  if (!Array.isArray(tools) || tools.length === 0) return false;
  if (body['tool_choice'] === 'none') return false;
  const messages = body['messages'];
  if (!Array.isArray(messages)) return false;
  const last: unknown = messages[messages.length - 1];
  if (!isRecord(last) || last['role'] !== 'user') return false;
  return /\bweather\b/i.test(messageText(last['content']));
}

function defaultErrorType(status: number): string {
  if (status === 429) return 'requests';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

function defaultErrorCode(status: number): string | null {
  if (status === 401) return 'invalid_api_key';
  if (status === 429) return 'rate_limit_exceeded';
  return null;
}

function envelope(message: string, type: string, param: string | null, code: string | null): string {
  return JSON.stringify({ error: { message, type, param, code } });
}

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** Deterministic unit-length vector for `key`, values rounded to float32. */
function embeddingFor(key: string, dim: number): number[] {
  const h = fnv1a(key);
  const phase = (h / 0x100000000) * Math.PI * 2;
  const freq = 0.5 + ((h >>> 8) % 1000) / 250;
  const v: number[] = [];
  for (let i = 0; i < dim; i++) v.push(Math.sin(phase + freq * (i + 1)) + 0.01 * Math.cos(h % (i + 7)));
  let norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  if (norm === 0) {
    v[0] = 1;
    norm = 1;
  }
  return v.map((x) => Math.fround(x / norm));
}

function float32Base64(v: number[]): string {
  const buf = Buffer.alloc(v.length * 4);
  v.forEach((x, i) => buf.writeFloatLE(x, i * 4));
  return buf.toString('base64');
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    req.on('aborted', () => reject(new Error('request aborted')));
  });
}

function matchRoute(method: string, path: string): Route | undefined {
  if (method === 'POST' && path === '/v1/chat/completions') return 'chat';
  if (method === 'POST' && path === '/v1/completions') return 'completions';
  if (method === 'POST' && path === '/v1/embeddings') return 'embeddings';
  if (method === 'GET' && path === '/v1/models') return 'models';
  if (method === 'GET' && /^\/v1\/models\/[^/]+$/.test(path)) return 'model';
  return undefined;
}

// ---------------------------------------------------------------------------
// the server

class FakeUpstreamImpl implements FakeUpstream {
  url = '';
  requests: RecordedRequest[] = [];
  clientAborts = 0;
  lastStreamWrites: number[] = [];

  private queue: Behaviour[] = [];
  private modelRules = new Map<string, Behaviour>();
  private aborted = new Set<number>();
  private waiters: Array<{ n: number | undefined; resolve: () => void }> = [];
  private generation = 0;
  private closing = false;
  private closed: Promise<void> | undefined;
  private readonly sockets = new Set<Socket>();
  readonly server: http.Server;

  constructor(private readonly opts: FakeOpenAIOptions) {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch(() => {
        if (!res.headersSent && !res.destroyed) {
          const body = envelope('The server had an error while processing your request.', 'server_error', null, null);
          res.writeHead(500, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
          res.end(body);
        } else {
          res.destroy();
        }
      });
    });
    this.server.on('connection', (socket: Socket) => {
      socket.setNoDelay(true);
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const { port } = this.server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${port}/v1`;
  }

  enqueue(...b: Behaviour[]): void {
    this.queue.push(...b);
  }

  onModel(model: string, b: Behaviour): void {
    this.modelRules.set(model, b);
  }

  waitForClientAbort(n?: number): Promise<void> {
    if (n === undefined ? this.aborted.size > 0 : this.aborted.has(n)) return Promise.resolve();
    return new Promise<void>((resolve) => this.waiters.push({ n, resolve }));
  }

  reset(): void {
    this.requests.length = 0;
    this.queue.length = 0;
    this.modelRules.clear();
    this.aborted.clear();
    this.clientAborts = 0;
    this.lastStreamWrites = [];
    this.generation++;
  }

  close(): Promise<void> {
    if (this.closed) return this.closed;
    this.closing = true;
    this.closed = new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
      for (const s of this.sockets) s.destroy();
    });
    return this.closed;
  }

  // -------------------------------------------------------------------------

  private noteClientAbort(index: number): void {
    this.clientAborts++;
    this.aborted.add(index);
    const remaining: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (w.n === undefined || w.n === index) w.resolve();
      else remaining.push(w);
    }
    this.waiters = remaining;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const generation = this.generation;
    let index = 0;
    let serverDestroyed = false;
    res.on('close', () => {
      if (res.writableFinished || serverDestroyed || this.closing) return;
      if (index > 0 && generation === this.generation) this.noteClientAbort(index);
    });

    let raw: Buffer;
    try {
      raw = await readBody(req);
    } catch {
      return; // client went away while sending the body
    }

    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    let parsed: unknown;
    let malformed = false;
    if (raw.length > 0) {
      try {
        parsed = JSON.parse(raw.toString('utf8'));
      } catch {
        malformed = true;
      }
    }
    this.requests.push({ method, path, headers: { ...req.headers }, body: parsed, at: performance.now() });
    index = this.requests.length;
    const requestId = randomId('req_', 16);

    // 2. auth
    if (this.opts.apiKey !== undefined) {
      const auth = req.headers.authorization;
      if (auth !== `Bearer ${this.opts.apiKey}`) {
        const given = auth?.startsWith('Bearer ') ? auth.slice('Bearer '.length) : undefined;
        const message = given
          ? `Incorrect API key provided: ${redactKey(given)}. You can find your API key at https://platform.openai.com/account/api-keys.`
          : "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username. You can obtain an API key from https://platform.openai.com/account/api-keys.";
        sendJson(res, 401, envelope(message, 'invalid_request_error', null, given ? 'invalid_api_key' : null), requestId);
        return;
      }
    }

    // 3. routing
    const route = matchRoute(method, path);
    if (!route) {
      sendJson(res, 404, envelope(`Invalid URL (${method} ${path})`, 'invalid_request_error', null, null), requestId);
      return;
    }

    // 4. validation
    if (malformed || (method === 'POST' && !isRecord(parsed))) {
      const message = malformed
        ? "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)"
        : 'you must provide a model parameter';
      sendJson(res, 400, envelope(message, 'invalid_request_error', null, null), requestId);
      return;
    }
    const body: Json = isRecord(parsed) ? parsed : {};
    const model = typeof body['model'] === 'string' ? body['model'] : '';
    if (method === 'POST') {
      const invalid = validate(route, body);
      if (invalid) {
        sendJson(res, 400, envelope(invalid.message, 'invalid_request_error', invalid.param, invalid.code), requestId);
        return;
      }
    }

    // 5. behaviour
    const ruled = model !== '' ? this.modelRules.get(model) : undefined;
    const behaviour = ruled ?? this.queue.shift();
    const ctx: Ctx = {
      req,
      res,
      route,
      path,
      body,
      model,
      requestId,
      markServerDestroyed: () => {
        serverDestroyed = true;
      },
    };
    await this.respond(ctx, behaviour);
  }

  private async respond(ctx: Ctx, b: Behaviour | undefined): Promise<void> {
    const { res, requestId } = ctx;
    const wantsStream = ctx.body['stream'] === true;
    switch (b?.kind) {
      case 'error':
        return this.sendErrorBehaviour(ctx, b);
      case 'hang':
        return;
      case 'hangAfterHeaders':
        res.writeHead(200, {
          'content-type': wantsStream ? 'text/event-stream; charset=utf-8' : 'application/json',
          'cache-control': 'no-cache',
          'x-request-id': requestId,
        });
        res.flushHeaders();
        return;
      case 'destroy':
        ctx.markServerDestroyed();
        ctx.req.socket.destroy();
        return;
      case 'reply':
      case 'stream':
      case undefined:
        break;
    }
    switch (ctx.route) {
      case 'models':
        return sendJson(res, 200, JSON.stringify({ object: 'list', data: MODEL_IDS.map(modelObject) }), requestId, replyHeaders(b));
      case 'model': {
        const id = decodeURIComponent(ctx.path.slice('/v1/models/'.length));
        const m = MODEL_IDS.find((x) => x.id === id);
        if (!m) {
          return sendJson(res, 404, envelope(`The model '${id}' does not exist`, 'invalid_request_error', 'model', 'model_not_found'), requestId);
        }
        return sendJson(res, 200, JSON.stringify(modelObject(m)), requestId, replyHeaders(b));
      }
      case 'embeddings':
        return this.embeddings(ctx, b);
      case 'chat':
      case 'completions':
        return this.generate(ctx, b);
    }
  }

  private sendErrorBehaviour(ctx: Ctx, b: Extract<Behaviour, { kind: 'error' }>): void {
    let body: string;
    let contentType = 'application/json';
    if (b.rawBody !== undefined) {
      body = b.rawBody;
      try {
        JSON.parse(body);
      } catch {
        contentType = 'text/plain; charset=utf-8';
      }
    } else {
      body = envelope(
        b.message ?? `Upstream error ${b.status}`,
        b.type ?? defaultErrorType(b.status),
        b.param ?? null,
        b.code === undefined ? defaultErrorCode(b.status) : b.code,
      );
    }
    sendJson(ctx.res, b.status, body, ctx.requestId, { 'content-type': contentType, ...lowerKeys(b.headers) });
  }

  private embeddings(ctx: Ctx, b: Behaviour | undefined): void {
    const { body } = ctx;
    const items = embeddingInputs(body['input']);
    if (!items) {
      return sendJson(
        ctx.res,
        400,
        envelope("'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.", 'invalid_request_error', null, null),
        ctx.requestId,
      );
    }
    const dimsRaw = body['dimensions'];
    const dim = typeof dimsRaw === 'number' && Number.isInteger(dimsRaw) && dimsRaw > 0 ? dimsRaw : 8;
    const base64 = body['encoding_format'] === 'base64' && !this.opts.embeddingsIgnoreBase64;
    const promptTokens = items.reduce((s, it) => s + it.tokens, 0);
    const payload = {
      object: 'list',
      data: items.map((it, index) => {
        const v = embeddingFor(it.key, dim);
        return { object: 'embedding', index, embedding: base64 ? float32Base64(v) : v };
      }),
      model: ctx.model,
      usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
    };
    sendJson(ctx.res, 200, JSON.stringify(payload), ctx.requestId, replyHeaders(b));
  }

  /** chat completions and legacy completions, streaming or not */
  private async generate(ctx: Ctx, b: ReplyBehaviour | StreamBehaviour | undefined): Promise<void> {
    const { body, model } = ctx;
    const chat = ctx.route === 'chat';
    const defaultContent = `Hello from ${model}`;

    let pieces: string[];
    let content: string | null;
    let toolCalls: FakeToolCall[] = [];
    let finishReason: string | undefined;
    let usageOverride: ReplyBehaviour['usage'];
    let stream = body['stream'] === true;
    let streamOpts: StreamBehaviour | undefined;

    if (b?.kind === 'stream') {
      stream = true;
      streamOpts = b;
      toolCalls = chat ? (b.toolCalls ?? []) : [];
      pieces = b.chunks ?? (b.toolCalls ? [] : splitWords(defaultContent));
      content = pieces.length > 0 || toolCalls.length === 0 ? pieces.join('') : null;
    } else if (b?.kind === 'reply') {
      if (b.delayMs !== undefined && b.delayMs > 0) await sleep(b.delayMs);
      if (ctx.res.destroyed) return;
      toolCalls = chat ? (b.toolCalls ?? []) : [];
      content = b.content ?? (toolCalls.length > 0 ? null : defaultContent);
      pieces = content === null ? [] : splitWords(content);
      finishReason = b.finishReason;
      usageOverride = b.usage;
    } else if (chat && wantsWeatherTool(body)) {
      toolCalls = [{ id: randomId('call_', 12), name: 'get_weather', arguments: '{"city":"Paris"}' }];
      content = null;
      pieces = [];
    } else {
      content = defaultContent;
      pieces = splitWords(defaultContent);
    }
    finishReason ??= toolCalls.length > 0 ? 'tool_calls' : 'stop';
    const completionTokens = Math.max(
      1,
      pieces.length + toolCalls.reduce((s, t) => s + Math.ceil((t.name.length + t.arguments.length) / 4), 0),
    );
    const usage = usageOverride
      ? usageOf(usageOverride.prompt_tokens, usageOverride.completion_tokens)
      : usageOf(estimatePromptTokens(body), completionTokens);

    const id = chat ? randomId('chatcmpl-', 14) : randomId('cmpl-', 14);
    const created = Math.floor(Date.now() / 1000);
    const headers = b?.kind === 'reply' ? b.headers : undefined;

    if (!stream) {
      const payload = chat
        ? {
            id,
            object: 'chat.completion',
            created,
            model,
            choices: [
              {
                index: 0,
                message: {
                  role: 'assistant',
                  content,
                  refusal: null,
                  ...(toolCalls.length > 0
                    ? { tool_calls: toolCalls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } })) }
                    : {}),
                },
                logprobs: null,
                finish_reason: finishReason,
              },
            ],
            usage,
            system_fingerprint: SYSTEM_FINGERPRINT,
          }
        : {
            id,
            object: 'text_completion',
            created,
            model,
            choices: [{ text: content ?? '', index: 0, logprobs: null, finish_reason: finishReason }],
            usage,
            system_fingerprint: SYSTEM_FINGERPRINT,
          };
      return sendJson(ctx.res, 200, JSON.stringify(payload), ctx.requestId, headers);
    }

    const streamOptions = body['stream_options'];
    const includeUsage = isRecord(streamOptions) && streamOptions['include_usage'] === true;
    const usageField = includeUsage ? { usage: null } : {};
    const events: SseEvent[] = [];
    const push = (phase: SseEvent['phase'], obj: unknown): void => {
      events.push({ phase, data: JSON.stringify(obj) });
    };

    if (chat) {
      const chunk = (delta: Json, finish: string | null): Json => ({
        id,
        object: 'chat.completion.chunk',
        created,
        model,
        system_fingerprint: SYSTEM_FINGERPRINT,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
        ...usageField,
      });
      push('pre', chunk({ role: 'assistant', content: '' }, null));
      for (const p of pieces) push('content', chunk({ content: p }, null));
      toolCalls.forEach((t, index) => {
        push('post', chunk({ tool_calls: [{ index, id: t.id, type: 'function', function: { name: t.name, arguments: '' } }] }, null));
        for (const frag of splitArguments(t.arguments)) {
          push('post', chunk({ tool_calls: [{ index, function: { arguments: frag } }] }, null));
        }
      });
      push('post', chunk({}, finishReason));
      if (includeUsage) {
        push('post', { id, object: 'chat.completion.chunk', created, model, system_fingerprint: SYSTEM_FINGERPRINT, choices: [], usage });
      }
    } else {
      const chunk = (text: string, finish: string | null): Json => ({
        id,
        object: 'text_completion',
        created,
        choices: [{ text, index: 0, logprobs: null, finish_reason: finish }],
        model,
        system_fingerprint: SYSTEM_FINGERPRINT,
        ...usageField,
      });
      for (const p of pieces) push('content', chunk(p, null));
      push('post', chunk('', finishReason));
      if (includeUsage) {
        push('post', { id, object: 'text_completion', created, choices: [], model, system_fingerprint: SYSTEM_FINGERPRINT, usage });
      }
    }
    if (!streamOpts?.noDone) events.push({ phase: 'post', data: '[DONE]' });

    await this.writeStream(ctx, events, streamOpts, headers);
  }

  private async writeStream(
    ctx: Ctx,
    events: SseEvent[],
    opts: StreamBehaviour | undefined,
    headers: Record<string, string> | undefined,
  ): Promise<void> {
    const { res } = ctx;
    const writes: number[] = [];
    this.lastStreamWrites = writes;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-request-id': ctx.requestId,
      ...lowerKeys(headers),
    });
    res.flushHeaders();

    const delayMs = opts?.delayMs ?? 0;
    const dropAfter = opts?.dropAfter;
    const errorAfter = opts?.errorAfter;
    let contentSent = 0;
    for (let i = 0; i < events.length; i++) {
      const ev = events[i];
      if (!ev) break;
      if (i > 0 && delayMs > 0) await sleep(delayMs);
      if (res.destroyed || res.writableEnded) return;
      const cutHere = (limit: number | undefined): boolean =>
        limit !== undefined && ev.phase !== 'pre' && (ev.phase === 'post' || contentSent >= limit);
      if (cutHere(opts?.stallAfter)) return; // silent until the client gives up
      if (cutHere(dropAfter)) {
        // Let what was written reach the client and be consumed first: a fetch body stream that
        // errors discards chunks still queued, which would make the cut point non-deterministic.
        ctx.markServerDestroyed();
        await new Promise<void>((resolve) => res.write('', () => resolve()));
        await sleep(DROP_GRACE_MS);
        res.destroy();
        ctx.req.socket.destroy();
        return;
      }
      if (errorAfter && cutHere(errorAfter.after)) {
        res.write(`data: ${envelope(errorAfter.message, 'server_error', null, null)}\n\n`);
        writes.push(performance.now());
        res.end();
        return;
      }
      res.write(`data: ${ev.data}\n\n`);
      writes.push(performance.now());
      if (ev.phase === 'content') contentSent++;
    }
    res.end();
  }
}

function redactKey(key: string): string {
  if (key.length <= 8) return key;
  return `${key.slice(0, 3)}${'*'.repeat(Math.max(0, key.length - 7))}${key.slice(-4)}`;
}

function modelObject(m: { id: string; created: number; owned_by: string }): Json {
  return { id: m.id, object: 'model', created: m.created, owned_by: m.owned_by };
}

function replyHeaders(b: Behaviour | undefined): Record<string, string> | undefined {
  return b?.kind === 'reply' ? b.headers : undefined;
}

function validate(route: Route, body: Json): { message: string; param: string | null; code: string | null } | undefined {
  if (typeof body['model'] !== 'string' || body['model'] === '') {
    return { message: 'you must provide a model parameter', param: null, code: null };
  }
  const missing = (name: string) => ({
    message: `Missing required parameter: '${name}'.`,
    param: name,
    code: 'missing_required_parameter',
  });
  if (route === 'chat' && !Array.isArray(body['messages'])) return missing('messages');
  if (route === 'completions' && body['prompt'] === undefined) return missing('prompt');
  if (route === 'embeddings' && body['input'] === undefined) return missing('input');
  return undefined;
}

/** string | string[] | number[] | number[][] → items with a hash key and a token count */
function embeddingInputs(input: unknown): Array<{ key: string; tokens: number }> | undefined {
  const isNumArray = (x: unknown): x is number[] => Array.isArray(x) && x.length > 0 && x.every((n) => typeof n === 'number');
  if (typeof input === 'string') return [{ key: `s:${input}`, tokens: Math.max(1, countWords(input)) }];
  if (!Array.isArray(input) || input.length === 0) return undefined;
  if (input.every((x) => typeof x === 'string')) {
    return input.map((s: string) => ({ key: `s:${s}`, tokens: Math.max(1, countWords(s)) }));
  }
  if (isNumArray(input)) return [{ key: `t:${input.join(',')}`, tokens: input.length }];
  if (input.every(isNumArray)) return input.map((t: number[]) => ({ key: `t:${t.join(',')}`, tokens: t.length }));
  return undefined;
}

function lowerKeys(h: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h ?? {})) out[k.toLowerCase()] = v;
  return out;
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: string,
  requestId: string,
  headers?: Record<string, string>,
): void {
  if (res.destroyed) return;
  res.writeHead(status, {
    'content-type': 'application/json',
    'x-request-id': requestId,
    ...lowerKeys(headers),
    'content-length': String(Buffer.byteLength(body)),
  });
  res.end(body);
}

export async function startFakeOpenAI(opts: FakeOpenAIOptions = {}): Promise<FakeUpstream> {
  const up = new FakeUpstreamImpl(opts);
  await up.listen();
  return up;
}
