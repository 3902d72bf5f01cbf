/**
 * A local ESTIMATE of a Messages request's input tokens, for `/v1/messages/count_tokens` on
 * backends that cannot count (every non-Anthropic one) and for the limits' reservation. Anthropic's
 * tokenizer is not public: the text is counted with whatever tokenizer the caller passes (the
 * gateway's js-tiktoken), plus fixed allowances:
 * - 3 tokens of framing per message, and the role;
 * - an image: 1,600 (Anthropic's cost of an image at its largest size before downscaling, ~1.15
 *   megapixels: an upper bound, since dimensions are not decoded);
 * - a PDF document: 1,500 (one dense page; the page count is not decoded);
 * - tools present: 346, the tool-use system prompt Anthropic documents for `auto` / `none`.
 * Counted as text: system, text blocks, tool_use names and input JSON, tool_result text, text
 * documents, search results, and each tool definition as JSON (name, description, schema).
 * Thinking blocks of earlier turns are not counted (Anthropic strips them from the context).
 */
import { isDocument, isImage, isText, isToolResult, isToolUse, type ContentBlock, type CountTokensRequest } from './schema.ts';

export const PER_MESSAGE = 3;
export const PER_IMAGE = 1600;
export const PER_PDF = 1500;
export const TOOLS_SYSTEM_PROMPT = 346;

export interface Prompt {
  texts: string[];
  /** Tokens known without a tokenizer (framing, images, documents, the tool-use prompt). */
  fixed: number;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function nested(blocks: unknown[], p: Prompt): void {
  for (const c of blocks) if (isRecord(c) && typeof c.type === 'string') blockTexts(c as { type: string }, p);
}

function blockTexts(b: ContentBlock | { type: string }, p: Prompt): void {
  if (isText(b)) p.texts.push(b.text);
  else if (isImage(b)) p.fixed += PER_IMAGE;
  else if (isToolUse(b)) p.texts.push(b.name, JSON.stringify(b.input ?? {}));
  else if (isToolResult(b)) {
    if (typeof b.content === 'string') p.texts.push(b.content);
    else for (const c of b.content ?? []) blockTexts(c, p);
  } else if (isDocument(b)) {
    const s = b.source as Record<string, unknown>;
    for (const t of [b.title, b.context]) if (typeof t === 'string') p.texts.push(t);
    if (s.type === 'text' && typeof s.data === 'string') p.texts.push(s.data);
    else if (s.type === 'content' && typeof s.content === 'string') p.texts.push(s.content);
    else if (s.type === 'content' && Array.isArray(s.content)) nested(s.content, p);
    else p.fixed += PER_PDF;
  } else if (b.type === 'search_result') {
    const r = b as Record<string, unknown>;
    for (const k of ['title', 'source']) {
      const v = r[k];
      if (typeof v === 'string') p.texts.push(v);
    }
    if (Array.isArray(r.content)) nested(r.content, p);
  }
  // thinking, redacted_thinking and server tool blocks: not counted
}

/** The texts to tokenize and the fixed allowance; works for count_tokens and messages bodies alike. */
export function promptOf(req: CountTokensRequest): Prompt {
  const p: Prompt = { texts: [], fixed: 0 };
  if (typeof req.system === 'string') p.texts.push(req.system);
  else for (const b of req.system ?? []) p.texts.push(b.text);
  for (const m of req.messages) {
    p.fixed += PER_MESSAGE;
    p.texts.push(m.role);
    if (typeof m.content === 'string') p.texts.push(m.content);
    else for (const b of m.content) blockTexts(b, p);
  }
  const tools = req.tools ?? [];
  if (tools.length > 0) p.fixed += TOOLS_SYSTEM_PROMPT;
  for (const t of tools) {
    const { name, description, input_schema } = t as Record<string, unknown>;
    p.texts.push(JSON.stringify(input_schema === undefined ? t : { name, description, input_schema }));
  }
  return p;
}

/** The estimate with a synchronous tokenizer. (With the gateway's async TokenCounter: promptOf + count.) */
export function countInputTokens(req: CountTokensRequest, tokenize: (text: string) => number): number {
  const p = promptOf(req);
  return p.texts.reduce((n, t) => n + (t === '' ? 0 : tokenize(t)), p.fixed);
}

/** The `/v1/messages/count_tokens` answer body. */
export function countTokensResponse(inputTokens: number): { input_tokens: number } {
  return { input_tokens: Math.max(0, Math.round(inputTokens)) };
}
