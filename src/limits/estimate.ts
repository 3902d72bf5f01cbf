/**
 * What a request will cost in tokens before it is sent: the prompt, counted by the real
 * tokenizer, plus the output it may produce (max_tokens, or limits.default_max_tokens) for every
 * choice. The reservation is reconciled with the upstream's reported usage afterwards, so the
 * estimate only decides admission; accounting is exact.
 */
import { isCustomToolCall, isFunctionToolCall, type ChatRequest } from '../protocol/chat/schema.ts';
import type { CompletionRequest } from '../protocol/completions/schema.ts';
import type { EmbeddingRequest } from '../protocol/embeddings/schema.ts';
import type { Encoding, TokenCounter } from './tokens.ts';

/** OpenAI's chat format: ~3 tokens of framing per message and 3 to prime the answer. */
const PER_MESSAGE = 3;
const PRIMING = 3;
/** An image's baseline (low detail); the upstream's usage corrects it afterwards. */
const PER_IMAGE = 85;

interface Prompt {
  texts: string[];
  /** tokens known without the tokenizer (framing, images, token-array inputs) */
  fixed: number;
}

export function chatPrompt(req: ChatRequest): Prompt {
  const texts: string[] = [];
  let fixed = PRIMING;
  for (const m of req.messages) {
    fixed += PER_MESSAGE + 1; // framing + the role
    if ('name' in m && typeof m.name === 'string') texts.push(m.name);
    const c = m.content;
    if (typeof c === 'string') texts.push(c);
    else if (Array.isArray(c)) {
      for (const p of c) {
        if (p.type === 'text') texts.push(p.text);
        else if (p.type === 'refusal') texts.push(p.refusal);
        else fixed += PER_IMAGE;
      }
    }
    if (m.role === 'assistant') {
      for (const tc of m.tool_calls ?? []) {
        if (isFunctionToolCall(tc)) texts.push(tc.function.name, tc.function.arguments);
        else if (isCustomToolCall(tc)) texts.push(tc.custom.name, tc.custom.input);
        else texts.push(JSON.stringify(tc));
      }
    }
  }
  if (req.tools && req.tools.length > 0) texts.push(JSON.stringify(req.tools));
  if (req.response_format?.type === 'json_schema') texts.push(JSON.stringify(req.response_format.json_schema));
  return { texts, fixed };
}

function textOrTokens(input: string | number[] | Array<string | number[]>): Prompt {
  if (typeof input === 'string') return { texts: [input], fixed: 0 };
  if (input.length > 0 && typeof input[0] === 'number') return { texts: [], fixed: input.length };
  const out: Prompt = { texts: [], fixed: 0 };
  for (const x of input as Array<string | number[]>) {
    if (typeof x === 'string') out.texts.push(x);
    else out.fixed += x.length;
  }
  return out;
}

export function completionPrompt(req: CompletionRequest): Prompt {
  return textOrTokens(req.prompt as string | number[] | Array<string | number[]>);
}

export function embeddingPrompt(req: EmbeddingRequest): Prompt {
  return textOrTokens(req.input as string | number[] | Array<string | number[]>);
}

export async function countPrompt(counter: TokenCounter, enc: Encoding, p: Prompt): Promise<number> {
  return p.fixed + (await counter.count(enc, p.texts));
}

/** Output tokens to reserve: the request's own cap (per choice), or the configured default. */
export function outputReserve(maxTokens: number | null | undefined, n: number | null | undefined, fallback: number): number {
  return (maxTokens ?? fallback) * Math.max(1, n ?? 1);
}
