/**
 * `type: fake` — a deterministic in-process backend for demos and tests. It is not a model:
 * chat echoes the last user message back ("echo: …"), completions echo the prompt, and embeddings
 * are fixed unit vectors derived from a hash of the input. Token counts are whitespace words.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FakeBackendConfig } from '../../config/schema.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatMessage, ChatRequest } from '../../protocol/chat/schema.ts';
import type { Completion, CompletionRequest } from '../../protocol/completions/schema.ts';
import type { EmbeddingRequest, EmbeddingResponse } from '../../protocol/embeddings/schema.ts';
import { invalidRequest } from '../../errors/gateway-error.ts';
import { ChunkPart } from '../../protocol/stream-part.ts';
import type { BackendHealth, BaseLLM, CallContext, Capabilities } from '../contract.ts';

const words = (s: string): number => (s.trim() === '' ? 0 : s.trim().split(/\s+/).length);

function messageText(m: ChatMessage): string {
  const c = m.content;
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  return c.map((p) => (p.type === 'text' ? p.text : p.type === 'image_url' ? '[image]' : '')).join(' ');
}

function idFor(prefix: string, seed: string): string {
  return `${prefix}-fake-${createHash('sha256').update(seed).digest('hex').slice(0, 24)}`;
}

/** Splits text into pieces that each keep their trailing space, like a tokenizer's stream. */
function pieces(text: string): string[] {
  const out = text.match(/\S+\s*/g) ?? [];
  return out.length > 0 ? out : [text];
}

export class FakeBackend implements BaseLLM {
  readonly type = 'fake' as const;
  readonly capabilities: Capabilities = { chat: true, embeddings: true, completions: true };

  constructor(
    readonly id: string,
    private readonly cfg: FakeBackendConfig,
    private readonly now: () => number = Date.now,
  ) {}

  private reply(req: ChatRequest): { text: string; promptTokens: number } {
    const lastUser = [...req.messages].reverse().find((m) => m.role === 'user');
    const text = `echo: ${lastUser ? messageText(lastUser) : ''}`;
    const promptTokens = req.messages.reduce((n, m) => n + words(messageText(m)), 0);
    return { text, promptTokens };
  }

  private limit(text: string, max: number | null | undefined): { text: string; finish: 'stop' | 'length' } {
    if (!max) return { text, finish: 'stop' };
    const ps = pieces(text);
    if (ps.length <= max) return { text, finish: 'stop' };
    return { text: ps.slice(0, max).join(''), finish: 'length' };
  }

  async chat(req: ChatRequest, ctx: CallContext): Promise<ChatCompletion> {
    ctx.signal.throwIfAborted();
    const { text: full, promptTokens } = this.reply(req);
    const { text, finish } = this.limit(full, req.max_completion_tokens ?? req.max_tokens);
    const n = req.n ?? 1;
    const completionTokens = words(text) * n;
    return {
      id: idFor('chatcmpl', JSON.stringify(req.messages)),
      object: 'chat.completion',
      created: Math.floor(this.now() / 1000),
      model: req.model,
      choices: Array.from({ length: n }, (_, index) => ({
        index,
        message: { role: 'assistant', content: text, refusal: null },
        logprobs: null,
        finish_reason: finish,
      })),
      usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
    };
  }

  async chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<ChunkPart<ChatCompletionChunk>>> {
    ctx.signal.throwIfAborted();
    const { text: full, promptTokens } = this.reply(req);
    const { text, finish } = this.limit(full, req.max_completion_tokens ?? req.max_tokens);
    const id = idFor('chatcmpl', JSON.stringify(req.messages));
    const created = Math.floor(this.now() / 1000);
    const includeUsage = req.stream_options?.include_usage === true;
    const delay = this.cfg.chunk_delay_ms;
    const base = { id, object: 'chat.completion.chunk' as const, created, model: req.model };
    const usageField = includeUsage ? { usage: null } : {};
    const part = (c: ChatCompletionChunk): ChunkPart<ChatCompletionChunk> => ChunkPart.of(c);
    async function* gen(): AsyncGenerator<ChunkPart<ChatCompletionChunk>> {
      yield part({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }], ...usageField });
      for (const p of pieces(text)) {
        if (delay > 0) await sleep(delay, undefined, { signal: ctx.signal });
        ctx.signal.throwIfAborted();
        yield part({ ...base, choices: [{ index: 0, delta: { content: p }, logprobs: null, finish_reason: null }], ...usageField });
      }
      yield part({ ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: finish }], ...usageField });
      if (includeUsage) {
        const ct = words(text);
        yield part({ ...base, choices: [], usage: { prompt_tokens: promptTokens, completion_tokens: ct, total_tokens: promptTokens + ct } });
      }
    }
    return gen();
  }

  async complete(req: CompletionRequest, ctx: CallContext): Promise<Completion> {
    ctx.signal.throwIfAborted();
    const prompt = typeof req.prompt === 'string' ? req.prompt : JSON.stringify(req.prompt);
    const { text, finish } = this.limit(`echo: ${prompt}`, req.max_tokens);
    const pt = words(prompt);
    const ct = words(text);
    return {
      id: idFor('cmpl', prompt),
      object: 'text_completion',
      created: Math.floor(this.now() / 1000),
      model: req.model,
      choices: [{ index: 0, text, logprobs: null, finish_reason: finish }],
      usage: { prompt_tokens: pt, completion_tokens: ct, total_tokens: pt + ct },
    };
  }

  async completeStream(req: CompletionRequest, ctx: CallContext): Promise<AsyncIterable<ChunkPart<Completion>>> {
    const whole = await this.complete(req, ctx);
    const choice = whole.choices[0];
    const includeUsage = req.stream_options?.include_usage === true;
    const delay = this.cfg.chunk_delay_ms;
    async function* gen(): AsyncGenerator<ChunkPart<Completion>> {
      const ps = pieces(choice?.text ?? '');
      for (let i = 0; i < ps.length; i++) {
        if (delay > 0) await sleep(delay, undefined, { signal: ctx.signal });
        const last = i === ps.length - 1;
        yield ChunkPart.of<Completion>({
          id: whole.id,
          object: 'text_completion',
          created: whole.created,
          model: whole.model,
          choices: [{ index: 0, text: ps[i] ?? '', logprobs: null, finish_reason: last ? (choice?.finish_reason ?? 'stop') : (null as unknown as 'stop') }],
        });
      }
      if (includeUsage && whole.usage) yield ChunkPart.of<Completion>({ id: whole.id, object: 'text_completion', created: whole.created, model: whole.model, choices: [], usage: whole.usage });
    }
    return gen();
  }

  async embed(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingResponse> {
    ctx.signal.throwIfAborted();
    const dims = req.dimensions ?? this.cfg.embedding_dimensions;
    const inputs: string[] =
      typeof req.input === 'string'
        ? [req.input]
        : req.input.length > 0 && typeof req.input[0] === 'number'
          ? [JSON.stringify(req.input)]
          : (req.input as Array<string | number[]>).map((x) => (typeof x === 'string' ? x : JSON.stringify(x)));
    // dimensions × inputs floats are built in memory: bounded so one request cannot exhaust the heap.
    if (inputs.length * dims > 1 << 22) throw invalidRequest(`The fake backend builds at most ${1 << 22} floats per request (inputs × dimensions).`, 'dimensions');
    let tokens = 0;
    const data = inputs.map((text, index) => {
      tokens += Math.max(1, words(text));
      return { object: 'embedding' as const, index, embedding: fakeVector(text, dims) };
    });
    return { object: 'list', data, model: req.model, usage: { prompt_tokens: tokens, total_tokens: tokens } };
  }

  async health(): Promise<BackendHealth> {
    return { ok: true, ready: true, detail: 'fake backend (deterministic, not a model)' };
  }
}

/** A unit vector that depends only on `text` and `dims`. */
export function fakeVector(text: string, dims: number): number[] {
  const out = new Array<number>(dims);
  let block = createHash('sha256').update(text).digest();
  let norm = 0;
  for (let i = 0; i < dims; i++) {
    const j = i % 8;
    if (i > 0 && j === 0) block = createHash('sha256').update(block).digest();
    const v = block.readInt32LE(j * 4) / 2 ** 31;
    out[i] = v;
    norm += v * v;
  }
  norm = Math.sqrt(norm) || 1;
  // Round through float32 so float and base64 answers are bit-for-bit the same vector.
  const f = Float32Array.from(out, (v) => v / norm);
  return Array.from(f);
}
