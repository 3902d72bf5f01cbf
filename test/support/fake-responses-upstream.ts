/**
 * A fake OpenAI upstream speaking the Responses API (`/v1/responses`), built on node:http only and
 * independent of the gateway's own protocol code, so tests of the native path check against it.
 *
 * Wire format as OpenAI's: the Response object; `text/event-stream` with one
 * `event: <type>\ndata: <json>\n\n` frame per event, rising `sequence_number`, no `[DONE]`;
 * the error envelope `{"error":{message,type,param,code}}` with OpenAI's messages and codes.
 *
 * Order of processing for every request (same as fake-openai-upstream.ts):
 *   1. the body is read, parsed and recorded in `requests`;
 *   2. if `apiKey` was given and the Authorization header does not match → 401;
 *   3. unknown route → 404 "Invalid URL (METHOD /path)";
 *   4. malformed JSON / invalid request → 400 as OpenAI answers it (missing or non-string model,
 *      missing input, bad roles and item types, a function_call_output without its call, an
 *      unknown previous_response_id, out-of-range temperature/top_p/max_output_tokens…);
 *   5. behaviour: `onModel` rule for body.model, else the next queued one, else the default.
 * Steps 2–4 never consume a queued behaviour.
 *
 * Default behaviour: "Hello from <model>"; a `get_weather` function call when that tool is offered
 * and the last user message mentions the weather; after a function_call_output, "Result: <output>".
 * Responses are stored (unless `store: false`) for `previous_response_id`, GET and DELETE.
 */
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomBytes } from 'node:crypto';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

export interface FakeCall {
  name: string;
  arguments: string;
  callId?: string;
  /** a custom tool call: `arguments` is its input */
  custom?: boolean;
}

interface Content {
  /** the answer's text; default "Hello from <model>" (none when toolCalls are given) */
  text?: string;
  /** text deltas of a stream (joined: the text) */
  chunks?: string[];
  toolCalls?: FakeCall[];
  /** a reasoning item with this summary first */
  reasoning?: string;
  /** `incomplete` (reason max_output_tokens) instead of `completed` */
  incomplete?: boolean;
  usage?: { input_tokens: number; output_tokens: number };
  headers?: Record<string, string>;
}

export type ResponsesBehaviour =
  | ({ kind: 'reply'; delayMs?: number } & Content)
  | ({
      kind: 'stream';
      /** pause between events */
      delayMs?: number;
      /** destroy the socket after this many content (delta) events, no terminal event */
      dropAfter?: number;
      /** stop writing after this many content events and keep the connection open */
      stallAfter?: number;
      /** after this many content events send `response.failed` with this error and end */
      failAfter?: { after: number; message: string; code?: string };
      /** after this many content events send an `error` event and end */
      errorAfter?: { after: number; message: string; code?: string };
      /** end the stream without `response.completed` */
      noCompleted?: boolean;
    } & Content)
  | { kind: 'error'; status: number; message?: string; type?: string; code?: string | null; param?: string | null; headers?: Record<string, string>; rawBody?: string }
  /** accept the request and never answer */
  | { kind: 'hang' }
  /** send 200 and the headers, then nothing */
  | { kind: 'hangAfterHeaders' }
  /** destroy the socket without a response */
  | { kind: 'destroy' };

export interface StoredResponse {
  response: Json;
  /** input items of the whole conversation up to this response (ids assigned), as input_items lists them */
  inputItems: Json[];
  /** the items the next turn sees: inputItems + this response's output */
  conversation: Json[];
}

export interface FakeResponsesUpstream {
  /** 'http://127.0.0.1:<port>/v1' */
  url: string;
  requests: RecordedRequest[];
  /** responses served with store ≠ false, by id */
  stored: Map<string, StoredResponse>;
  enqueue(...b: ResponsesBehaviour[]): void;
  onModel(model: string, b: ResponsesBehaviour): void;
  /** requests whose client went away before the response finished */
  clientAborts: number;
  /** resolves on the first client abort since start/reset */
  waitForClientAbort(): Promise<void>;
  reset(): void;
  close(): Promise<void>;
}

export interface FakeResponsesOptions {
  apiKey?: string;
}

type Json = Record<string, unknown>;
type StreamBehaviour = Extract<ResponsesBehaviour, { kind: 'stream' }>;
interface ApiError {
  status: number;
  message: string;
  param: string | null;
  code: string | null;
}

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const hex = (n: number): string => randomBytes(n).toString('hex');
const newId = (prefix: string): string => `${prefix}_${hex(24)}`;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const words = (t: string): number => (t.trim() === '' ? 0 : t.trim().split(/\s+/).length);
const envelope = (message: string, type: string, param: string | null, code: string | null): string => JSON.stringify({ error: { message, type, param, code } });

function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'an integer' : 'a decimal';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'boolean') return 'a boolean';
  return `a ${typeof v}`;
}

const missing = (param: string): ApiError => ({ status: 400, message: `Missing required parameter: '${param}'.`, param, code: 'missing_required_parameter' });
const badType = (param: string, expected: string, v: unknown): ApiError => ({
  status: 400,
  message: `Invalid type for '${param}': expected ${expected}, but got ${jsonType(v)} instead.`,
  param,
  code: 'invalid_type',
});
function badValue(param: string, v: unknown, allowed: readonly string[]): ApiError {
  const list = allowed.map((a) => `'${a}'`);
  const supported = list.length > 1 ? `${list.slice(0, -1).join(', ')}, and ${list[list.length - 1]}` : (list[0] ?? '');
  return { status: 400, message: `Invalid value: '${String(v)}'. Supported values are: ${supported}.`, param, code: 'invalid_value' };
}

const ROLES = ['assistant', 'system', 'developer', 'user'];
const ITEM_TYPES = [
  'message', 'function_call', 'function_call_output', 'custom_tool_call', 'custom_tool_call_output', 'reasoning', 'item_reference',
  'additional_tools', 'web_search_call', 'file_search_call', 'computer_call', 'computer_call_output', 'image_generation_call',
  'code_interpreter_call', 'local_shell_call', 'local_shell_call_output', 'shell_call', 'shell_call_output', 'apply_patch_call',
  'apply_patch_call_output', 'mcp_list_tools', 'mcp_approval_request', 'mcp_approval_response', 'mcp_call', 'compaction',
];
const PART_TYPES = ['input_text', 'input_image', 'input_file', 'input_audio', 'output_text', 'refusal'];

function range(body: Json, key: string, min: number, max: number, integer = false): ApiError | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || (integer && !Number.isInteger(v))) return badType(key, integer ? 'an integer' : 'a decimal', v);
  if (v < min) return { status: 400, message: `Invalid '${key}': ${integer ? 'integer' : 'decimal'} below minimum value. Expected a value >= ${min}, but got ${v} instead.`, param: key, code: integer ? 'integer_below_min_value' : 'decimal_below_min_value' };
  if (v > max) return { status: 400, message: `Invalid '${key}': ${integer ? 'integer' : 'decimal'} above maximum value. Expected a value <= ${max}, but got ${v} instead.`, param: key, code: integer ? 'integer_above_max_value' : 'decimal_above_max_value' };
  return undefined;
}

/** Validates a create body the way OpenAI does; `history` = items of the previous_response_id chain. */
function validate(body: Json, history: Json[] | undefined): ApiError | undefined {
  if (!('model' in body) || body.model === null) return missing('model');
  if (typeof body.model !== 'string') return badType('model', 'a string', body.model);
  if (body.model === '') return { status: 400, message: "Invalid 'model': empty string. Expected a string with minimum length 1, but got an empty string instead.", param: 'model', code: 'empty_string' };
  const input = body.input;
  if (input === undefined || input === null) {
    if (body.prompt === undefined && body.conversation === undefined) return missing('input');
  } else if (typeof input !== 'string' && !Array.isArray(input)) {
    return badType('input', 'one of a string or array of input items', input);
  }
  for (const [key, min, max, int] of [['temperature', 0, 2, false], ['top_p', 0, 1, false], ['max_output_tokens', 16, 1e9, true], ['top_logprobs', 0, 20, true]] as const) {
    const e = range(body, key, min, max, int);
    if (e) return e;
  }
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') return badType('stream', 'a boolean', body.stream);
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) return badType('tools', 'an array', body.tools);
    for (const [i, t] of body.tools.entries()) {
      if (!isRecord(t)) return badType(`tools[${i}]`, 'an object', t);
      if (typeof t.type !== 'string') return missing(`tools[${i}].type`);
      if ((t.type === 'function' || t.type === 'custom' || t.type === 'namespace') && typeof t.name !== 'string') return missing(`tools[${i}].name`);
    }
  }
  if (Array.isArray(input)) {
    const calls = new Set<string>();
    for (const h of history ?? []) if ((h.type === 'function_call' || h.type === 'custom_tool_call') && typeof h.call_id === 'string') calls.add(h.call_id);
    for (const [i, item] of input.entries()) {
      const p = `input[${i}]`;
      if (!isRecord(item)) return badType(p, 'an object', item);
      const type = item.type ?? ('role' in item ? 'message' : 'item_reference');
      if (typeof type !== 'string' || !ITEM_TYPES.includes(type)) return badValue(`${p}.type`, type, ITEM_TYPES);
      if (type === 'message') {
        if (!('role' in item)) return missing(`${p}.role`);
        if (typeof item.role !== 'string' || !ROLES.includes(item.role)) return badValue(`${p}.role`, item.role, ROLES);
        if (!('content' in item) || item.content === null) return missing(`${p}.content`);
        if (typeof item.content !== 'string') {
          if (!Array.isArray(item.content)) return badType(`${p}.content`, 'one of a string or array of input content parts', item.content);
          for (const [j, part] of item.content.entries()) {
            const pp = `${p}.content[${j}]`;
            if (!isRecord(part)) return badType(pp, 'an object', part);
            if (!PART_TYPES.includes(String(part.type))) return badValue(`${pp}.type`, part.type, PART_TYPES);
            if ((part.type === 'input_text' || part.type === 'output_text') && typeof part.text !== 'string') return missing(`${pp}.text`);
          }
        }
      } else if (type === 'function_call' || type === 'custom_tool_call') {
        for (const k of ['call_id', 'name', type === 'function_call' ? 'arguments' : 'input']) if (typeof item[k] !== 'string') return missing(`${p}.${k}`);
        calls.add(item.call_id as string);
      } else if (type === 'function_call_output' || type === 'custom_tool_call_output') {
        if (typeof item.call_id !== 'string') return missing(`${p}.call_id`);
        if (!('output' in item)) return missing(`${p}.output`);
        if (!calls.has(item.call_id)) return { status: 400, message: `No tool call found for ${type === 'function_call_output' ? 'function' : 'custom tool'} call output with call_id ${item.call_id}.`, param: 'input', code: null };
      } else if (type === 'item_reference') {
        if (typeof item.id !== 'string') return missing(`${p}.id`);
      }
    }
  }
  return undefined;
}

function inputText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (isRecord(p) && typeof p.text === 'string' ? p.text : '')).join(' ');
  return '';
}

/** The request's input as items (a string is one user message). */
function inputItems(body: Json): Json[] {
  const input = body.input;
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }];
  return Array.isArray(input) ? (input as Json[]) : [];
}

function defaultContent(body: Json, items: Json[]): Content {
  const last = items[items.length - 1];
  if (last && last.type === 'function_call_output') return { text: `Result: ${inputText(last.output)}` };
  const tools = Array.isArray(body.tools) ? (body.tools as Json[]) : [];
  const weather = tools.some((t) => t.type === 'function' && t.name === 'get_weather');
  const lastUser = [...items].reverse().find((i) => (i.type ?? 'message') === 'message' && i.role === 'user');
  if (weather && body.tool_choice !== 'none' && lastUser && /\bweather\b/i.test(inputText(lastUser.content))) {
    return { toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] };
  }
  return {};
}

// ---------------------------------------------------------------------------

interface Built {
  response: Json;
  /** stream events, each marked content (a delta) or not */
  events: Array<{ event: Json; content: boolean }>;
}

/** Builds the final Response and its stream events from the content to answer with. */
function build(body: Json, model: string, c: Content, promptTokens: number): Built {
  const id = newId('resp');
  const created = Math.floor(Date.now() / 1000);
  const reasoning = isRecord(body.reasoning) ? body.reasoning : {};
  const text = isRecord(body.text) ? body.text : {};
  const base = (status: string): Json => ({
    id, object: 'response', created_at: created, status, background: false, completed_at: null, error: null,
    incomplete_details: null, instructions: body.instructions ?? null, max_output_tokens: body.max_output_tokens ?? null,
    max_tool_calls: body.max_tool_calls ?? null, model, output: [], parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null, prompt_cache_key: body.prompt_cache_key ?? null,
    reasoning: { effort: reasoning.effort ?? null, summary: reasoning.summary ?? null }, safety_identifier: body.safety_identifier ?? null,
    service_tier: 'default', store: body.store ?? true, temperature: body.temperature ?? 1,
    text: { format: text.format ?? { type: 'text' }, verbosity: text.verbosity ?? 'medium' }, tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [], top_logprobs: body.top_logprobs ?? 0, top_p: body.top_p ?? 1, truncation: body.truncation ?? 'disabled',
    usage: null, user: body.user ?? null, metadata: body.metadata ?? {},
  });

  const calls = c.toolCalls ?? [];
  const pieces = c.chunks ?? (c.text !== undefined ? splitWords(c.text) : calls.length > 0 ? [] : splitWords(`Hello from ${model}`));
  const answer = pieces.join('');
  const itemStatus = c.incomplete ? 'incomplete' : 'completed';
  const events: Built['events'] = [];
  let seq = 0;
  const push = (type: string, rest: Json, content = false): void => {
    events.push({ event: { type, sequence_number: seq++, ...rest }, content });
  };
  const output: Json[] = [];

  push('response.created', { response: base('in_progress') });
  push('response.in_progress', { response: base('in_progress') });
  if (c.reasoning !== undefined) {
    const item = { id: newId('rs'), type: 'reasoning', summary: [] as Json[] };
    const oi = output.length;
    push('response.output_item.added', { output_index: oi, item: structuredClone(item) });
    const ids = { item_id: item.id, output_index: oi, summary_index: 0 };
    push('response.reasoning_summary_part.added', { ...ids, part: { type: 'summary_text', text: '' } });
    push('response.reasoning_summary_text.delta', { ...ids, delta: c.reasoning }, true);
    push('response.reasoning_summary_text.done', { ...ids, text: c.reasoning });
    push('response.reasoning_summary_part.done', { ...ids, part: { type: 'summary_text', text: c.reasoning } });
    item.summary = [{ type: 'summary_text', text: c.reasoning }];
    output.push(item);
    push('response.output_item.done', { output_index: oi, item: structuredClone(item) });
  }
  if (pieces.length > 0 || calls.length === 0) {
    const msgId = newId('msg');
    const oi = output.length;
    push('response.output_item.added', { output_index: oi, item: { id: msgId, type: 'message', status: 'in_progress', content: [], role: 'assistant' } });
    const ids = { item_id: msgId, output_index: oi, content_index: 0 };
    push('response.content_part.added', { ...ids, part: { type: 'output_text', annotations: [], logprobs: [], text: '' } });
    for (const p of pieces) push('response.output_text.delta', { ...ids, delta: p, logprobs: [] }, true);
    push('response.output_text.done', { ...ids, text: answer, logprobs: [] });
    const part = { type: 'output_text', annotations: [], logprobs: [], text: answer };
    push('response.content_part.done', { ...ids, part });
    const item = { id: msgId, type: 'message', status: itemStatus, content: [part], role: 'assistant' };
    output.push(item);
    push('response.output_item.done', { output_index: oi, item: structuredClone(item) });
  }
  for (const call of calls) {
    const oi = output.length;
    const callId = call.callId ?? `call_${hex(12)}`;
    const itemId = newId(call.custom ? 'ctc' : 'fc');
    const field = call.custom ? 'input' : 'arguments';
    const head = call.custom
      ? { id: itemId, type: 'custom_tool_call', status: 'in_progress', call_id: callId, input: '', name: call.name }
      : { id: itemId, type: 'function_call', status: 'in_progress', arguments: '', call_id: callId, name: call.name };
    push('response.output_item.added', { output_index: oi, item: head });
    const deltaType = call.custom ? 'response.custom_tool_call_input.delta' : 'response.function_call_arguments.delta';
    for (const frag of splitArguments(call.arguments)) push(deltaType, { item_id: itemId, output_index: oi, delta: frag }, true);
    if (call.custom) push('response.custom_tool_call_input.done', { item_id: itemId, output_index: oi, input: call.arguments });
    else push('response.function_call_arguments.done', { item_id: itemId, output_index: oi, arguments: call.arguments, name: call.name });
    const item = { ...head, status: itemStatus, [field]: call.arguments };
    output.push(item);
    push('response.output_item.done', { output_index: oi, item: structuredClone(item) });
  }

  const outputTokens = c.usage?.output_tokens ?? Math.max(1, pieces.length + calls.reduce((s, t) => s + Math.ceil((t.name.length + t.arguments.length) / 4), 0));
  const inputTokens = c.usage?.input_tokens ?? promptTokens;
  const response = base(c.incomplete ? 'incomplete' : 'completed');
  response.output = output;
  if (c.incomplete) response.incomplete_details = { reason: 'max_output_tokens' };
  else response.completed_at = Math.floor(Date.now() / 1000);
  response.usage = {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: c.reasoning !== undefined ? words(c.reasoning) : 0 },
    total_tokens: inputTokens + outputTokens,
  };
  push(c.incomplete ? 'response.incomplete' : 'response.completed', { response: structuredClone(response) });
  return { response, events };
}

function splitWords(content: string): string[] {
  if (content === '') return [];
  const parts = content.split(' ');
  return parts.map((p, i) => (i < parts.length - 1 ? `${p} ` : p));
}

function splitArguments(args: string): string[] {
  if (args.length === 0) return [];
  const n = Math.min(3, args.length);
  const size = Math.ceil(args.length / n);
  const out: string[] = [];
  for (let i = 0; i < args.length; i += size) out.push(args.slice(i, i + size));
  return out;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function lowerKeys(h: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h ?? {})) out[k.toLowerCase()] = v;
  return out;
}

function sendJson(res: ServerResponse, status: number, body: string, requestId: string, headers?: Record<string, string>): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': requestId, ...lowerKeys(headers), 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}

const sendError = (res: ServerResponse, e: ApiError, requestId: string, type = 'invalid_request_error'): void =>
  sendJson(res, e.status, envelope(e.message, type, e.param, e.code), requestId);

class FakeResponsesImpl implements FakeResponsesUpstream {
  url = '';
  requests: RecordedRequest[] = [];
  stored = new Map<string, StoredResponse>();
  clientAborts = 0;
  private queue: ResponsesBehaviour[] = [];
  private rules = new Map<string, ResponsesBehaviour>();
  private abortWaiters: Array<() => void> = [];
  private closing = false;
  private readonly sockets = new Set<Socket>();
  readonly server: http.Server;

  constructor(private readonly opts: FakeResponsesOptions) {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch(() => {
        if (!res.headersSent && !res.destroyed) sendJson(res, 500, envelope('The server had an error while processing your request.', 'server_error', null, null), `req_${hex(16)}`);
        else res.destroy();
      });
    });
    this.server.on('connection', (s: Socket) => {
      s.setNoDelay(true);
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  enqueue(...b: ResponsesBehaviour[]): void {
    this.queue.push(...b);
  }

  onModel(model: string, b: ResponsesBehaviour): void {
    this.rules.set(model, b);
  }

  waitForClientAbort(): Promise<void> {
    if (this.clientAborts > 0) return Promise.resolve();
    return new Promise((resolve) => this.abortWaiters.push(resolve));
  }

  reset(): void {
    this.requests.length = 0;
    this.queue.length = 0;
    this.rules.clear();
    this.stored.clear();
    this.clientAborts = 0;
  }

  close(): Promise<void> {
    this.closing = true;
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
      for (const s of this.sockets) s.destroy();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let serverEnded = false;
    res.on('close', () => {
      if (res.writableFinished || serverEnded || this.closing) return;
      this.clientAborts++;
      for (const w of this.abortWaiters.splice(0)) w();
    });
    const raw = await readBody(req).catch(() => undefined);
    if (!raw) return;
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
    this.requests.push({ method, path, headers: { ...req.headers }, body: parsed });
    const requestId = `req_${hex(16)}`;

    if (this.opts.apiKey !== undefined && req.headers.authorization !== `Bearer ${this.opts.apiKey}`) {
      const message = req.headers.authorization
        ? 'Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.'
        : "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).";
      return sendJson(res, 401, envelope(message, 'invalid_request_error', null, req.headers.authorization ? 'invalid_api_key' : null), requestId);
    }

    const one = /^\/v1\/responses\/([^/]+)(\/input_items)?$/.exec(path);
    if (one && (method === 'GET' || method === 'DELETE')) {
      const id = decodeURIComponent(one[1] ?? '');
      const s = this.stored.get(id);
      if (!s) return sendError(res, { status: 404, message: `Response with id '${id}' not found.`, param: null, code: null }, requestId);
      if (method === 'DELETE' && !one[2]) {
        this.stored.delete(id);
        return sendJson(res, 200, JSON.stringify({ id, object: 'response', deleted: true }), requestId);
      }
      if (method === 'GET' && one[2]) {
        const data = [...s.inputItems].reverse();
        return sendJson(res, 200, JSON.stringify({ object: 'list', data, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null, has_more: false }), requestId);
      }
      if (method === 'GET') return sendJson(res, 200, JSON.stringify(s.response), requestId);
    }
    if (!(method === 'POST' && path === '/v1/responses')) {
      return sendJson(res, 404, envelope(`Invalid URL (${method} ${path})`, 'invalid_request_error', null, null), requestId);
    }

    if (malformed || !isRecord(parsed)) {
      const message = malformed
        ? "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
        : 'Invalid body: expected an object.';
      return sendError(res, { status: 400, message, param: null, code: null }, requestId);
    }
    const body = parsed;
    let history: Json[] = [];
    if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
      const prev = typeof body.previous_response_id === 'string' ? this.stored.get(body.previous_response_id) : undefined;
      if (!prev) {
        return sendError(res, { status: 400, message: `Previous response with id '${String(body.previous_response_id)}' not found.`, param: 'previous_response_id', code: 'previous_response_not_found' }, requestId);
      }
      history = prev.conversation;
    }
    const invalid = validate(body, history);
    if (invalid) return sendError(res, invalid, requestId);

    const model = body.model as string;
    const b = this.rules.get(model) ?? this.queue.shift();
    const stream = body.stream === true || b?.kind === 'stream';
    switch (b?.kind) {
      case 'error': {
        const text = b.rawBody ?? envelope(b.message ?? `Upstream error ${b.status}`, b.type ?? (b.status === 429 ? 'requests' : b.status >= 500 ? 'server_error' : 'invalid_request_error'), b.param ?? null, b.code === undefined ? (b.status === 429 ? 'rate_limit_exceeded' : null) : b.code);
        return sendJson(res, b.status, text, requestId, b.headers);
      }
      case 'hang':
        return;
      case 'hangAfterHeaders':
        res.writeHead(200, { 'content-type': stream ? 'text/event-stream; charset=utf-8' : 'application/json', 'x-request-id': requestId });
        res.flushHeaders();
        return;
      case 'destroy':
        serverEnded = true;
        req.socket.destroy();
        return;
      default:
        break;
    }

    const items = inputItems(body);
    const content: Content = b ?? defaultContent(body, [...history, ...items]);
    const promptTokens = Math.max(1, [...history, ...items].reduce((n, i) => n + words(inputText(i.content ?? i.output ?? '')) + 3, 0) + words(typeof body.instructions === 'string' ? body.instructions : ''));
    const built = build(body, model, content, promptTokens);
    if (body.store !== false) {
      const withIds = items.map((i) => ({ id: typeof i.id === 'string' ? i.id : newId(i.type === 'function_call_output' ? 'fco' : 'msg'), ...i }));
      const inputAll = [...(history.length > 0 ? this.stored.get(body.previous_response_id as string)?.inputItems ?? [] : []), ...withIds];
      this.stored.set(built.response.id as string, { response: built.response, inputItems: inputAll, conversation: [...history, ...withIds, ...(built.response.output as Json[])] });
    }

    if (!stream) {
      if (b?.kind === 'reply' && b.delayMs) await sleep(b.delayMs);
      return sendJson(res, 200, JSON.stringify(built.response), requestId, content.headers);
    }
    await this.writeStream(req, res, built, b?.kind === 'stream' ? b : undefined, requestId, content.headers, () => {
      serverEnded = true;
    });
  }

  private async writeStream(req: IncomingMessage, res: ServerResponse, built: Built, opts: StreamBehaviour | undefined, requestId: string, headers: Record<string, string> | undefined, markEnded: () => void): Promise<void> {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-request-id': requestId, ...lowerKeys(headers) });
    res.flushHeaders();
    const frame = (e: Json): string => `event: ${String(e.type)}\ndata: ${JSON.stringify(e)}\n\n`;
    let sent = 0;
    let seq = 0;
    const reached = (limit: number | undefined): boolean => limit !== undefined && sent >= limit;
    for (const [i, { event, content }] of built.events.entries()) {
      if (i > 0 && opts?.delayMs) await sleep(opts.delayMs);
      if (res.destroyed || res.writableEnded) return;
      const terminal = i === built.events.length - 1;
      if (content || terminal) {
        if (reached(opts?.stallAfter)) return;
        if (reached(opts?.dropAfter)) {
          markEnded();
          await new Promise<void>((resolve) => res.write('', () => resolve()));
          await sleep(25);
          res.destroy();
          req.socket.destroy();
          return;
        }
        if (opts?.failAfter && reached(opts.failAfter.after)) {
          const failed = structuredClone((built.events[0]?.event.response ?? {}) as Json);
          failed.status = 'failed';
          failed.error = { code: opts.failAfter.code ?? 'server_error', message: opts.failAfter.message };
          res.end(frame({ type: 'response.failed', sequence_number: seq, response: failed }));
          return;
        }
        if (opts?.errorAfter && reached(opts.errorAfter.after)) {
          res.end(frame({ type: 'error', sequence_number: seq, code: opts.errorAfter.code ?? 'server_error', message: opts.errorAfter.message, param: null }));
          return;
        }
        if (terminal && opts?.noCompleted) return void res.end();
      }
      res.write(frame(event));
      seq++;
      if (content) sent++;
    }
    res.end();
  }
}

export async function startFakeResponses(opts: FakeResponsesOptions = {}): Promise<FakeResponsesUpstream> {
  const up = new FakeResponsesImpl(opts);
  await up.listen();
  return up;
}
