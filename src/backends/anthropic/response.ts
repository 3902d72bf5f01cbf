/**
 * Anthropic Messages responses → OpenAI shapes, as pure functions: the message (text, tool calls,
 * thinking), `stop_reason` → `finish_reason`, and usage (cache tokens included). Upstream bodies
 * are parsed at this edge with loose zod schemas: unknown fields and new block types pass by.
 */
import { z } from 'zod';
import type { ChatCompletion, ChatCompletionChunk } from '../../protocol/chat/schema.ts';
import { GatewayError } from '../../errors/gateway-error.ts';
import { redact } from '../../errors/upstream.ts';

export const anthropicUsageSchema = z.looseObject({
  input_tokens: z.number().nullish(),
  output_tokens: z.number().nullish(),
  cache_creation_input_tokens: z.number().nullish(),
  cache_read_input_tokens: z.number().nullish(),
  output_tokens_details: z.looseObject({ thinking_tokens: z.number().nullish() }).nullish(),
});
export type AnthropicUsage = z.infer<typeof anthropicUsageSchema>;

/** Any content block; the fields of the types the gateway translates are checked, others ignored. */
export const anthropicBlockSchema = z.looseObject({
  type: z.string(),
  text: z.string().optional(),
  thinking: z.string().optional(),
  id: z.string().optional(),
  name: z.string().optional(),
  input: z.unknown().optional(),
});

export const anthropicMessageSchema = z.looseObject({
  id: z.string(),
  model: z.string(),
  content: z.array(anthropicBlockSchema),
  stop_reason: z.string().nullish(),
  usage: anthropicUsageSchema,
});
export type AnthropicMessage = z.infer<typeof anthropicMessageSchema>;

export type FinishReason = NonNullable<ChatCompletionChunk['choices'][number]['finish_reason']>;

/**
 * end_turn, stop_sequence, pause_turn → stop · max_tokens, model_context_window_exceeded → length ·
 * tool_use → tool_calls · refusal → content_filter · anything new → stop.
 */
export function toFinishReason(stop: string | null | undefined): FinishReason {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop';
  }
}

export type OpenAIUsage = NonNullable<ChatCompletion['usage']> & {
  prompt_tokens_details: { cached_tokens: number; cache_creation_tokens: number };
};

/**
 * Anthropic's `input_tokens` excludes cached tokens; OpenAI's `prompt_tokens` includes them. So
 * prompt_tokens = input + cache read + cache creation, with the two cache counts in the details.
 */
export function toOpenAIUsage(u: AnthropicUsage): OpenAIUsage {
  const read = u.cache_read_input_tokens ?? 0;
  const created = u.cache_creation_input_tokens ?? 0;
  const prompt = (u.input_tokens ?? 0) + read + created;
  const completion = u.output_tokens ?? 0;
  const usage: OpenAIUsage = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: read, cache_creation_tokens: created },
  };
  const thinking = u.output_tokens_details?.thinking_tokens;
  if (typeof thinking === 'number') usage.completion_tokens_details = { reasoning_tokens: thinking };
  return usage;
}

/** Later usage reports (message_delta) win field by field; null means "not reported here". */
export function mergeUsage(into: AnthropicUsage, from: AnthropicUsage | null | undefined): AnthropicUsage {
  if (!from) return into;
  const out: AnthropicUsage = { ...into };
  for (const k of ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'] as const) {
    const v = from[k];
    if (typeof v === 'number') out[k] = v;
  }
  if (from.output_tokens_details) out.output_tokens_details = from.output_tokens_details;
  return out;
}

type Message = ChatCompletion['choices'][number]['message'] & { reasoning_content?: string };

export function toChatCompletion(msg: AnthropicMessage, created: number): ChatCompletion {
  const text: string[] = [];
  const thinking: string[] = [];
  const toolCalls: NonNullable<Message['tool_calls']> = [];
  for (const b of msg.content) {
    if (b.type === 'text' && b.text !== undefined) text.push(b.text);
    else if (b.type === 'thinking' && b.thinking !== undefined) thinking.push(b.thinking);
    else if (b.type === 'tool_use' && b.id !== undefined && b.name !== undefined) {
      toolCalls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
    }
    // redacted_thinking, server tool blocks and future types have no OpenAI equivalent.
  }
  const message: Message = {
    role: 'assistant',
    content: text.length === 0 && toolCalls.length > 0 ? null : text.join(''),
    refusal: null,
  };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  if (thinking.length > 0) message.reasoning_content = thinking.join('');
  return {
    id: msg.id,
    object: 'chat.completion',
    created,
    model: msg.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: toFinishReason(msg.stop_reason) }],
    usage: toOpenAIUsage(msg.usage),
  };
}

/** An `error` event inside an Anthropic stream (or an error without an HTTP status). */
export function streamError(backend: string, type: unknown, message: unknown, secrets: ReadonlyArray<string>): GatewayError {
  const msg = typeof message === 'string' && message !== '' ? redact(message, secrets) : 'stream error';
  const overloaded = type === 'overloaded_error';
  const kind = overloaded ? 'upstream_unavailable' : 'upstream_stream_error';
  return new GatewayError(kind, `Backend "${backend}" reported an error mid-stream${typeof type === 'string' ? ` (${type})` : ''}: ${msg}`, { backend });
}
