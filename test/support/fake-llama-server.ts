/**
 * A fake llama.cpp `llama-server` for tests, on node:http only, following its documented API and
 * its source (tools/server): shapes, status codes and framing as the real server sends them.
 *
 * - Every route but /health answers 503 `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`
 *   while "loading" (so does /health); `setLoading(false)` finishes loading.
 * - `--api-key`: routes other than /health need `Authorization: Bearer <key>`; else 401
 *   `{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}`.
 * - GET /slots: one object per slot (`id`, `n_ctx`, `speculative`, `is_processing`, …); a slot is
 *   processing while one of our requests runs on it, or when marked busy by `setBusy(n)`.
 *   `slotsEndpoint: false` (--no-slots) → 501 not_supported_error. GET /props has `total_slots`.
 * - POST /v1/chat/completions, /v1/completions: JSON with `timings`, or SSE (`data: <json>\n\n`
 *   per event, a final chunk with `finish_reason`, the usage chunk when asked, `timings` on the
 *   last one, then `data: [DONE]`). `n_probs` gives `logprobs` with that many `top_logprobs`;
 *   `cache_prompt` (default true) makes a repeated prompt count as cached in `timings.cache_n`;
 *   a last user message starting "think:" answers with `reasoning_content` first;
 *   `json_schema` / `response_format` answer JSON text.
 * - POST /v1/embeddings: float arrays only (as older servers: `encoding_format` is ignored);
 *   `embeddings: false` → 501 "This server does not support embeddings. Start it with `--embeddings`";
 *   `pooling: 'none'` → 400 "Pooling type 'none' is not OAI compatible…".
 * - Errors: `{"error":{"code":<status>,"message":"…","type":"…"}}`; a prompt longer than the
 *   context → 400 exceed_context_size_error with `n_prompt_tokens` and `n_ctx`.
 * - `enqueue` scripts the next completion request: an error answer, a mid-stream error event (in
 *   the current `data: {"error":…}` shape, the older `error: {…}` line, or `event: error` framing),
 *   or `hold` (keeps its slot busy until `release()`).
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface FakeLlamaOptions {
  /** start loading the model (503 everywhere until setLoading(false)) */
  loading?: boolean;
  /** --parallel (default 2) */
  slots?: number;
  /** per-slot context (default 256 "tokens" = words here) */
  nCtx?: number;
  /** --embeddings (default true) */
  embeddings?: boolean;
  /** --pooling none gives per-token vectors; `legacy2d` answers them as 2-D arrays like old servers did */
  pooling?: 'mean' | 'none' | 'legacy2d';
  /** false: --no-slots */
  slotsEndpoint?: boolean;
  apiKey?: string;
  embeddingDim?: number;
  /** the model alias llama-server reports in `model` */
  alias?: string;
  /** listen on this port (default: a free one) */
  port?: number;
  chunkDelayMs?: number;
}

export type LlamaBehaviour =
  | { kind: 'error'; status: number; message: string; type: string; extra?: Record<string, unknown> }
  | { kind: 'midStreamError'; after: number; message: string; format?: 'data' | 'error-line' | 'event' }
  /** occupy a slot until release() is called, then answer normally */
  | { kind: 'hold' }
  /** answer 500 with a plain-text body, as httplib does when a handler fails badly */
  | { kind: 'plain500' };

export interface RecordedLlamaRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

type Json = Record<string, unknown>;

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const words = (s: string): string[] => s.split(/\s+/).filter((w) => w !== '');
const BUILD = 'b6500-80fb11ac';

function errorBody(status: number, message: string, type: string, extra: Json = {}): string {
  return JSON.stringify({ error: { code: status, message, type, ...extra } });
}

function timings(promptN: number, cacheN: number, predictedN: number): Json {
  const promptMs = Math.max(0.1, (promptN - cacheN) * 0.5);
  const predictedMs = Math.max(0.1, predictedN * 2);
  return {
    cache_n: cacheN,
    prompt_n: promptN - cacheN,
    prompt_ms: promptMs,
    prompt_per_token_ms: promptMs / Math.max(1, promptN - cacheN),
    prompt_per_second: (1000 * Math.max(1, promptN - cacheN)) / promptMs,
    predicted_n: predictedN,
    predicted_ms: predictedMs,
    predicted_per_token_ms: predictedMs / Math.max(1, predictedN),
    predicted_per_second: (1000 * predictedN) / predictedMs,
  };
}

function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (isRecord(p) && typeof p.text === 'string' ? p.text : '')).join(' ');
  return '';
}

/** A deterministic unit vector per input text. */
function vectorFor(text: string, dim: number): number[] {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  const v: number[] = [];
  for (let i = 0; i < dim; i++) {
    h = Math.imul(h ^ (h >>> 15), 2246822507) ^ i;
    v.push(((h >>> 0) / 2 ** 32) * 2 - 1);
  }
  const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0)) || 1;
  return v.map((x) => Math.fround(x / n));
}

export class FakeLlamaServer {
  url = '';
  readonly requests: RecordedLlamaRequest[] = [];
  /** requests being processed on a slot now */
  processing = 0;
  private loading: boolean;
  private manualBusy = 0;
  private readonly queue: LlamaBehaviour[] = [];
  private readonly held: Array<() => void> = [];
  private lastPrompt = '';
  private readonly sockets = new Set<Socket>();
  private readonly server: http.Server;
  private readonly nSlots: number;
  private readonly nCtx: number;
  private readonly alias: string;

  constructor(private readonly opts: FakeLlamaOptions = {}) {
    this.loading = opts.loading ?? false;
    this.nSlots = opts.slots ?? 2;
    this.nCtx = opts.nCtx ?? 256;
    this.alias = opts.alias ?? 'tiny-llama-q8_0.gguf';
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch(() => {
        if (!res.headersSent) this.json(res, 500, errorBody(500, 'internal error', 'server_error'));
        else res.destroy();
      });
    });
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.opts.port ?? 0, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  setLoading(loading: boolean): void {
    this.loading = loading;
  }

  /** Marks n slots as processing requests of other clients. */
  setBusy(n: number): void {
    this.manualBusy = n;
  }

  enqueue(...b: LlamaBehaviour[]): void {
    this.queue.push(...b);
  }

  /** Lets every held request finish. */
  release(): void {
    for (const r of this.held.splice(0)) r();
  }

  /** Requests held right now. */
  get holding(): number {
    return this.held.length;
  }

  close(): Promise<void> {
    this.release();
    return new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
      for (const s of this.sockets) s.destroy();
    });
  }

  // ---------------------------------------------------------------------------

  private json(res: ServerResponse, status: number, body: string): void {
    if (res.destroyed) return;
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(body)), server: 'llama.cpp' });
    res.end(body);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    let body: unknown;
    try {
      body = raw === '' ? undefined : JSON.parse(raw);
    } catch {
      body = undefined;
    }
    this.requests.push({ method, path, headers: { ...req.headers }, body });

    // pre-routing middleware: server state first, then the API key (/health is public)
    if (this.loading) return this.json(res, 503, errorBody(503, 'Loading model', 'unavailable_error'));
    const isPublic = path === '/health' || path === '/v1/health';
    if (this.opts.apiKey !== undefined && !isPublic) {
      const auth = req.headers.authorization ?? '';
      const given = auth.startsWith('Bearer ') ? auth.slice(7) : auth;
      if (given !== this.opts.apiKey) {
        return this.json(res, 401, JSON.stringify({ error: { message: 'Invalid API Key', type: 'authentication_error', code: 401 } }));
      }
    }

    const route = `${method} ${path}`;
    switch (route) {
      case 'GET /health':
      case 'GET /v1/health':
        return this.json(res, 200, JSON.stringify({ status: 'ok' }));
      case 'GET /slots':
        return this.slots(res);
      case 'GET /props':
        return this.json(res, 200, JSON.stringify(this.props()));
      case 'GET /v1/models':
      case 'GET /models':
        return this.json(
          res,
          200,
          JSON.stringify({
            models: [{ name: this.alias, model: this.alias, modified_at: '', size: '', digest: '', type: 'model' }],
            object: 'list',
            data: [{ id: this.alias, object: 'model', created: 1760000000, owned_by: 'llamacpp', meta: { n_ctx_train: 2048, n_embd: 32, n_params: 300000 } }],
          }),
        );
      case 'POST /v1/chat/completions':
      case 'POST /chat/completions':
        return this.completion(res, body, 'chat');
      case 'POST /v1/completions':
      case 'POST /completions':
        return this.completion(res, body, 'text');
      case 'POST /v1/embeddings':
        return this.embeddings(res, body);
      default:
        return this.json(res, 404, errorBody(404, 'File Not Found', 'not_found_error'));
    }
  }

  private props(): Json {
    return {
      default_generation_settings: { n_ctx: this.nCtx, params: { n_predict: -1, temperature: 0.8, top_k: 40, top_p: 0.95 } },
      total_slots: this.nSlots,
      model_alias: this.alias,
      model_path: `/models/${this.alias}`,
      modalities: { vision: false, audio: false },
      endpoint_slots: this.opts.slotsEndpoint !== false,
      endpoint_props: false,
      endpoint_metrics: false,
      chat_template: '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>',
      bos_token: '<s>',
      eos_token: '</s>',
      build_info: BUILD,
      is_sleeping: false,
    };
  }

  private slots(res: ServerResponse): void {
    if (this.opts.slotsEndpoint === false) {
      return this.json(res, 501, errorBody(501, 'This server does not support slots endpoint. Start it with `--slots`', 'not_supported_error'));
    }
    const busy = Math.min(this.nSlots, this.manualBusy + this.processing);
    const slots = Array.from({ length: this.nSlots }, (_, id) => {
      const s: Json = { id, n_ctx: this.nCtx, speculative: false, is_processing: id < busy };
      if (id < busy) {
        s.id_task = 100 + id;
        s.n_prompt_tokens = 12;
        s.next_token = [{ has_next_token: true, has_new_line: false, n_remain: -1, n_decoded: 3 }];
      }
      return s;
    });
    this.json(res, 200, JSON.stringify(slots));
  }

  private async completion(res: ServerResponse, body: unknown, kind: 'chat' | 'text'): Promise<void> {
    if (!isRecord(body)) return this.json(res, 500, errorBody(500, '[json.exception.parse_error.101] parse error', 'server_error'));
    let prompt: string;
    let lastUser = '';
    if (kind === 'chat') {
      if (!Array.isArray(body.messages)) return this.json(res, 400, errorBody(400, "'messages' is required", 'invalid_request_error'));
      prompt = body.messages.map((m) => (isRecord(m) ? `<|${String(m.role)}|>${messageText(m.content)}` : '')).join('');
      const users = body.messages.filter((m) => isRecord(m) && m.role === 'user');
      const last = users[users.length - 1];
      lastUser = isRecord(last) ? messageText(last.content) : '';
    } else {
      if (body.prompt === undefined) return this.json(res, 400, errorBody(400, '"prompt" must be provided', 'invalid_request_error'));
      prompt = typeof body.prompt === 'string' ? body.prompt : JSON.stringify(body.prompt);
      lastUser = prompt;
    }
    const promptN = Math.max(1, words(prompt).length);
    if (promptN > this.nCtx) {
      return this.json(
        res,
        400,
        errorBody(400, `request (${promptN} tokens) exceeds the available context size (${this.nCtx} tokens), try increasing it`, 'exceed_context_size_error', {
          n_prompt_tokens: promptN,
          n_ctx: this.nCtx,
        }),
      );
    }
    const behaviour = this.queue.shift();
    if (behaviour?.kind === 'error') return this.json(res, behaviour.status, errorBody(behaviour.status, behaviour.message, behaviour.type, behaviour.extra));
    if (behaviour?.kind === 'plain500') {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('Internal Server Error');
      return;
    }

    this.processing++;
    try {
      if (behaviour?.kind === 'hold') await new Promise<void>((r) => this.held.push(r));
      const cacheN = body.cache_prompt !== false && prompt === this.lastPrompt ? promptN - 1 : 0;
      this.lastPrompt = prompt;

      let reasoning = '';
      let content: string;
      if (body.json_schema !== undefined || (isRecord(body.response_format) && body.response_format.type !== 'text')) {
        content = JSON.stringify({ answer: lastUser });
      } else if (lastUser.startsWith('think:')) {
        reasoning = `thinking about ${lastUser.slice(6).trim()}`;
        content = 'done thinking';
      } else {
        content = `llama says: ${lastUser}`;
      }
      const maxTokens = typeof body.max_tokens === 'number' ? body.max_tokens : typeof body.n_predict === 'number' ? body.n_predict : -1;
      let pieces = content.split(/(?<= )/);
      let finish = 'stop';
      if (maxTokens >= 0 && pieces.length > maxTokens) {
        pieces = pieces.slice(0, maxTokens);
        content = pieces.join('');
        finish = 'length';
      }
      const predictedN = pieces.length + words(reasoning).length;
      const nProbs = typeof body.n_probs === 'number' ? body.n_probs : 0;
      const usage = { completion_tokens: predictedN, prompt_tokens: promptN, total_tokens: promptN + predictedN };
      const id = `chatcmpl-${Math.random().toString(36).slice(2, 18)}`;
      const created = Math.floor(Date.now() / 1000);
      const t = timings(promptN, cacheN, predictedN);
      const logprobsFor = (piece: string): Json => ({
        id: 100,
        token: piece,
        bytes: [...Buffer.from(piece)],
        logprob: -0.25,
        top_logprobs: Array.from({ length: nProbs }, (_, i) => ({ id: 100 + i, token: i === 0 ? piece : `alt${i}`, bytes: [...Buffer.from(i === 0 ? piece : `alt${i}`)], logprob: -0.25 - i })),
      });

      if (body.stream !== true) {
        const choice: Json =
          kind === 'chat'
            ? { finish_reason: finish, index: 0, message: { role: 'assistant', content, ...(reasoning ? { reasoning_content: reasoning } : {}) } }
            : { text: content, index: 0, logprobs: null, finish_reason: finish };
        if (nProbs > 0) choice.logprobs = { content: pieces.map(logprobsFor) };
        return this.json(
          res,
          200,
          JSON.stringify({
            choices: [choice],
            created,
            model: this.alias,
            system_fingerprint: BUILD,
            object: kind === 'chat' ? 'chat.completion' : 'text_completion',
            usage,
            id,
            timings: t,
          }),
        );
      }

      // SSE, framed like llama-server: "data: <json>\n\n" per event
      res.writeHead(200, { 'content-type': 'text/event-stream', server: 'llama.cpp', 'keep-alive': 'timeout=5, max=100' });
      const base = { created, id, model: this.alias, system_fingerprint: BUILD, object: kind === 'chat' ? 'chat.completion.chunk' : 'text_completion' };
      const send = async (data: Json): Promise<void> => {
        if (res.destroyed) return;
        res.write(`data: ${JSON.stringify(data)}\n\n`);
        if (this.opts.chunkDelayMs) await sleep(this.opts.chunkDelayMs);
      };
      const delta = (d: Json, extra: Json = {}): Json =>
        kind === 'chat' ? { choices: [{ finish_reason: null, index: 0, delta: d, ...extra }], ...base } : { choices: [{ text: d.content ?? '', index: 0, logprobs: null, finish_reason: null }], ...base };
      if (kind === 'chat') await send(delta({ role: 'assistant', content: null }));
      const streamPieces: Array<{ field: 'reasoning_content' | 'content'; text: string }> = [
        ...(reasoning ? reasoning.split(/(?<= )/).map((p) => ({ field: 'reasoning_content' as const, text: p })) : []),
        ...pieces.map((p) => ({ field: 'content' as const, text: p })),
      ];
      let sent = 0;
      for (const p of streamPieces) {
        if (behaviour?.kind === 'midStreamError' && sent === behaviour.after) {
          const err = { code: 500, message: behaviour.message, type: 'server_error' };
          const fmt = behaviour.format ?? 'data';
          if (fmt === 'data') res.write(`data: ${JSON.stringify({ error: err })}\n\n`);
          else if (fmt === 'error-line') res.write(`error: ${JSON.stringify({ error: err })}\n\n`);
          else res.write(`event: error\ndata: ${JSON.stringify(err)}\n\n`);
          res.end();
          return;
        }
        const logprobs = nProbs > 0 && p.field === 'content' ? { logprobs: { content: [logprobsFor(p.text)] } } : {};
        await send(kind === 'chat' ? delta({ [p.field]: p.text }, logprobs) : delta({ content: p.text }));
        sent++;
      }
      const wantsUsage = isRecord(body.stream_options) && body.stream_options.include_usage === true;
      const final: Json =
        kind === 'chat'
          ? { choices: [{ finish_reason: finish, index: 0, delta: {} }], ...base }
          : { choices: [{ text: '', index: 0, logprobs: null, finish_reason: finish }], ...base };
      if (!wantsUsage) final.timings = t;
      await send(final);
      if (wantsUsage) await send({ choices: [], ...base, usage, timings: t });
      if (!res.destroyed) res.end('data: [DONE]\n\n');
    } finally {
      this.processing--;
    }
  }

  private embeddings(res: ServerResponse, body: unknown): void {
    if (this.opts.embeddings === false) {
      return this.json(res, 501, errorBody(501, 'This server does not support embeddings. Start it with `--embeddings`', 'not_supported_error'));
    }
    if (this.opts.pooling === 'none') {
      return this.json(res, 400, errorBody(400, "Pooling type 'none' is not OAI compatible. Please use a different pooling type", 'invalid_request_error'));
    }
    if (!isRecord(body) || body.input === undefined) return this.json(res, 400, errorBody(400, '"input" or "content" must be provided', 'invalid_request_error'));
    const inputs: unknown[] = typeof body.input === 'string' ? [body.input] : Array.isArray(body.input) && typeof body.input[0] === 'number' ? [body.input] : Array.isArray(body.input) ? body.input : [];
    const dim = this.opts.embeddingDim ?? 8;
    let tokens = 0;
    const data = inputs.map((inp, index) => {
      const text = typeof inp === 'string' ? inp : JSON.stringify(inp);
      const n = Math.max(1, typeof inp === 'string' ? words(inp).length : Array.isArray(inp) ? inp.length : 1);
      tokens += n;
      const v = vectorFor(text, dim);
      return { embedding: this.opts.pooling === 'legacy2d' ? Array.from({ length: n }, () => v) : v, index, object: 'embedding' };
    });
    this.json(res, 200, JSON.stringify({ model: this.alias, object: 'list', usage: { prompt_tokens: tokens, total_tokens: tokens }, data }));
  }
}

export async function startFakeLlamaServer(opts: FakeLlamaOptions = {}): Promise<FakeLlamaServer> {
  const s = new FakeLlamaServer(opts);
  await s.listen();
  return s;
}

/** The vector the fake answers for `text` (what the tests expect back). */
export function fakeLlamaVector(text: string, dim = 8): number[] {
  return vectorFor(text, dim);
}
