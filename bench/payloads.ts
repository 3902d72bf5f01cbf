/**
 * What the benchmark sends and what the mock upstream answers, shared by bench/run.ts,
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
