/**
 * What the benchmark sends and what the mock upstream answers (chat, embeddings, OpenAI Responses,
 * Anthropic Messages), shared by bench/run.ts,
 * bench/mock-upstream.ts and bench/sdk-vs-undici.ts. Everything here is built once at start-up:
 * the mock answers from ready-made buffers so it costs as little as possible on its core.
 */

export const CHAT_MODEL = 'mock-chat';
/** The mock paces this model's stream: first chunk at once, then one chunk every PACE_MS. */
export const PACED_MODEL = 'mock-paced';
export const EMBED_MODEL = 'mock-embed';
export const STREAM_CHUNKS = 20;
export const EMBED_INPUTS = 16;
export const EMBED_DIMS = 1536;
export const PACE_MS = Number(process.env.BENCH_PACE_MS ?? 5);
/** The first content token; the TTFT probe looks for it in the bytes received. */
export const FIRST_TOKEN = 'tok00';

const messages = [
  { role: 'system', content: 'You are a helpful assistant. Answer briefly.' },
  { role: 'user', content: 'Say hello in one short sentence.' },
];

/** temperature 0 everywhere, so the cache-hit scenario sends exactly the chat scenario's body. */
export const chatBody = JSON.stringify({ model: CHAT_MODEL, messages, max_tokens: 32, temperature: 0 });
export const streamBody = JSON.stringify({ model: CHAT_MODEL, messages, max_tokens: 32, temperature: 0, stream: true });
export const pacedBody = JSON.stringify({ model: PACED_MODEL, messages, max_tokens: 32, temperature: 0, stream: true });

const inputs = Array.from({ length: EMBED_INPUTS }, (_, i) => `The quick brown fox number ${i} jumps over the lazy dog.`);
export const embedFloatBody = JSON.stringify({ model: EMBED_MODEL, input: inputs, encoding_format: 'float' });
export const embedBase64Body = JSON.stringify({ model: EMBED_MODEL, input: inputs, encoding_format: 'base64' });

const CREATED = 1_700_000_000;
const usage = { prompt_tokens: 24, completion_tokens: STREAM_CHUNKS, total_tokens: 24 + STREAM_CHUNKS };
const tokens = Array.from({ length: STREAM_CHUNKS }, (_, i) => `tok${String(i).padStart(2, '0')} `);

export const chatResponse = Buffer.from(
  JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: CREATED,
    model: CHAT_MODEL,
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello! Nice to meet you, how can I help today?', refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage,
    system_fingerprint: 'fp_bench',
  }),
);

function chunk(model: string, delta: Record<string, string>, finish: string | null): Record<string, unknown> {
  return { id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: CREATED, model, system_fingerprint: 'fp_bench', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] };
}

const event = (data: unknown): Buffer => Buffer.from(`data: ${JSON.stringify(data)}\n\n`);

export interface SseScript {
  /** role chunk, STREAM_CHUNKS content chunks, the finish chunk */
  chunks: Buffer[];
  /** sent before [DONE] when the request asked for stream_options.include_usage */
  usage: Buffer;
  done: Buffer;
}

export function sseScript(model: string): SseScript {
  const chunks = [event(chunk(model, { role: 'assistant', content: '' }, null))];
  for (const t of tokens) chunks.push(event(chunk(model, { content: t }, null)));
  chunks.push(event(chunk(model, {}, 'stop')));
  const u = { id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: CREATED, model, system_fingerprint: 'fp_bench', choices: [], usage };
  return { chunks, usage: event(u), done: Buffer.from('data: [DONE]\n\n') };
}

/** Deterministic values shaped like a real embedding (small floats, about 8 significant digits). */
function vector(seed: number): Float32Array {
  const v = new Float32Array(EMBED_DIMS);
  let x = seed * 2654435761;
  for (let i = 0; i < EMBED_DIMS; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    v[i] = Math.fround((x / 2147483648 - 0.5) * 0.08);
  }
  return v;
}

function embeddingsResponse(format: 'float' | 'base64'): Buffer {
  const data = Array.from({ length: EMBED_INPUTS }, (_, i) => {
    const v = vector(i + 1);
    const embedding = format === 'float' ? Array.from(v, (x) => Number(x.toPrecision(8))) : Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
    return { object: 'embedding', index: i, embedding };
  });
  return Buffer.from(JSON.stringify({ object: 'list', data, model: EMBED_MODEL, usage: { prompt_tokens: 16 * 12, total_tokens: 16 * 12 } }));
}

export const embedFloatResponse = embeddingsResponse('float');
export const embedBase64Response = embeddingsResponse('base64');

export const modelsResponse = Buffer.from(
  JSON.stringify({ object: 'list', data: [CHAT_MODEL, PACED_MODEL, EMBED_MODEL].map((id) => ({ id, object: 'model', created: CREATED, owned_by: 'bench' })) }),
);

// ------------------------------------------------------------ OpenAI Responses and Anthropic Messages
// Same prompt, same answer text and the same STREAM_CHUNKS content deltas as chat, so the scenarios
// compare; `store: false` keeps the gateway's responses store out of the Responses measurement (the
// chat routes store nothing either).

/** The model of the Messages scenarios: an `openai` backend serves it translated, an `anthropic` one natively. */
export const CLAUDE_MODEL = 'mock-claude';
const SYSTEM = messages[0]?.content ?? '';
const USER = messages[1]?.content ?? '';
const ANSWER = 'Hello! Nice to meet you, how can I help today?';

export const responsesBody = JSON.stringify({ model: CHAT_MODEL, instructions: SYSTEM, input: USER, max_output_tokens: 32, temperature: 0, store: false });
export const responsesStreamBody = JSON.stringify({ model: CHAT_MODEL, instructions: SYSTEM, input: USER, max_output_tokens: 32, temperature: 0, store: false, stream: true });
export const messagesBody = JSON.stringify({ model: CLAUDE_MODEL, system: SYSTEM, messages: [{ role: 'user', content: USER }], max_tokens: 32, temperature: 0 });
export const messagesStreamBody = JSON.stringify({ model: CLAUDE_MODEL, system: SYSTEM, messages: [{ role: 'user', content: USER }], max_tokens: 32, temperature: 0, stream: true });

/** `event:` + `data:` framing, as both the Responses and the Messages streams send it. */
const named = (data: { type: string } & Record<string, unknown>): Buffer => Buffer.from(`event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`);

const RESP_ID = 'resp_bench';
const ITEM_ID = 'msg_bench';
const responsesUsage = { input_tokens: 24, input_tokens_details: { cached_tokens: 0 }, output_tokens: STREAM_CHUNKS, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 24 + STREAM_CHUNKS };
const textPart = (text: string): Record<string, unknown> => ({ type: 'output_text', annotations: [], logprobs: [], text });
const messageItem = (status: string, text: string | undefined): Record<string, unknown> => ({ id: ITEM_ID, type: 'message', status, role: 'assistant', content: text === undefined ? [] : [textPart(text)] });

/** A Response object as api.openai.com sends it (`output_text` is the SDK's, not the wire's). */
function responseObject(model: string, status: 'in_progress' | 'completed', text: string | undefined): Record<string, unknown> {
  return {
    id: RESP_ID,
    object: 'response',
    created_at: CREATED,
    status,
    background: false,
    completed_at: status === 'completed' ? CREATED : null,
    error: null,
    incomplete_details: null,
    instructions: SYSTEM,
    max_output_tokens: 32,
    max_tool_calls: null,
    model,
    output: text === undefined ? [] : [messageItem('completed', text)],
    parallel_tool_calls: true,
    previous_response_id: null,
    prompt_cache_key: null,
    reasoning: { effort: null, summary: null },
    safety_identifier: null,
    service_tier: 'default',
    store: false,
    temperature: 0,
    text: { format: { type: 'text' }, verbosity: 'medium' },
    tool_choice: 'auto',
    tools: [],
    top_logprobs: 0,
    top_p: 1,
    truncation: 'disabled',
    usage: status === 'completed' ? responsesUsage : null,
    user: null,
    metadata: {},
  };
}

export const responsesResponse = Buffer.from(JSON.stringify(responseObject(CHAT_MODEL, 'completed', ANSWER)));

/**
 * OpenAI's Responses stream for one text answer: response.created, response.in_progress,
 * output_item.added, content_part.added, STREAM_CHUNKS × output_text.delta, output_text.done,
 * content_part.done, output_item.done, response.completed (with usage).
 */
export function responsesSseScript(model: string): Buffer[] {
  let seq = 0;
  const ev = (type: string, rest: Record<string, unknown>): Buffer => named({ type, sequence_number: seq++, ...rest });
  const at = { item_id: ITEM_ID, output_index: 0, content_index: 0 };
  const text = tokens.join('');
  const out = [
    ev('response.created', { response: responseObject(model, 'in_progress', undefined) }),
    ev('response.in_progress', { response: responseObject(model, 'in_progress', undefined) }),
    ev('response.output_item.added', { output_index: 0, item: messageItem('in_progress', undefined) }),
    ev('response.content_part.added', { ...at, part: textPart('') }),
  ];
  for (const t of tokens) out.push(ev('response.output_text.delta', { ...at, delta: t, logprobs: [] }));
  out.push(
    ev('response.output_text.done', { ...at, text, logprobs: [] }),
    ev('response.content_part.done', { ...at, part: textPart(text) }),
    ev('response.output_item.done', { output_index: 0, item: messageItem('completed', text) }),
    ev('response.completed', { response: responseObject(model, 'completed', text) }),
  );
  return out;
}

const anthropicUsage = (output: number): Record<string, unknown> => ({
  input_tokens: 24,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0,
  cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
  output_tokens: output,
  service_tier: 'standard',
});

function anthropicMessage(model: string, text: string | undefined): Record<string, unknown> {
  return {
    id: ITEM_ID,
    type: 'message',
    role: 'assistant',
    model,
    content: text === undefined ? [] : [{ type: 'text', text }],
    stop_reason: text === undefined ? null : 'end_turn',
    stop_sequence: null,
    usage: anthropicUsage(text === undefined ? 1 : STREAM_CHUNKS),
  };
}

export const messagesResponse = Buffer.from(JSON.stringify(anthropicMessage(CLAUDE_MODEL, ANSWER)));

/**
 * Anthropic's Messages stream for one text answer: message_start, content_block_start,
 * STREAM_CHUNKS × content_block_delta, content_block_stop, message_delta (stop reason, usage),
 * message_stop.
 */
export function messagesSseScript(model: string): Buffer[] {
  const out = [named({ type: 'message_start', message: anthropicMessage(model, undefined) }), named({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })];
  for (const t of tokens) out.push(named({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t } }));
  out.push(
    named({ type: 'content_block_stop', index: 0 }),
    named({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { input_tokens: 24, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: STREAM_CHUNKS } }),
    named({ type: 'message_stop' }),
  );
  return out;
}

/**
 * How a stream of each route shows its first content event and its end, to the first-token probe
 * and to the start-up check: chat's first `delta.content` (the first token), the Responses
 * `response.output_text.delta` event, the Messages `content_block_delta` event.
 */
export function streamFraming(path: string): { firstContent: string; end: string } {
  if (path.endsWith('/v1/responses')) return { firstContent: 'response.output_text.delta', end: 'response.completed' };
  if (path.endsWith('/v1/messages')) return { firstContent: 'content_block_delta', end: 'message_stop' };
  return { firstContent: FIRST_TOKEN, end: 'data: [DONE]' };
}
