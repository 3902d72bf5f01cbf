/**
 * The canonical chat completion → Anthropic's Message object, as the API documents it:
 * `{id: "msg_…", type: "message", role: "assistant", model, content, stop_reason, stop_sequence,
 * stop_details: null, container: null, usage}`.
 *
 * - content: a `thinking` block from `reasoning_content` (signed by the gateway: signature.ts), then a `text` block (the
 *   content, or the refusal), then one `tool_use` block per tool call. Empty text is left out.
 * - tool_use ids: the chat call id with characters outside `[A-Za-z0-9_-]` replaced by `_` (what
 *   Anthropic accepts back in `tool_use_id`), or a fresh `toolu_…` when the backend sent none.
 * - tool_use input: the arguments parsed as JSON. Arguments that are not a JSON object become `{}`
 *   with a warning: the client gets a well-formed block, and its tool reports the missing input to
 *   the model, which can retry.
 * - stop_reason: see toStopReason(). usage: see toMessagesUsage().
 */
import { randomBase64url } from '../../lib/random-id.ts';
import type { ChatCompletion } from '../chat/schema.ts';
import { gatewaySignature } from './signature.ts';

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'pause_turn' | 'refusal';

export interface MessagesUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

export type MessageContentBlock =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

export interface MessagesMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: MessageContentBlock[];
  stop_reason: StopReason | null;
  stop_sequence: string | null;
  stop_details: null;
  container: null;
  usage: MessagesUsage;
}

export interface FromChatOptions {
  /** The public model name the client asked for (answers name it, not the backend's model). */
  model: string;
  /** The request's stop_sequences: a backend's report of the matched one is checked against them. */
  stopSequences?: readonly string[] | null | undefined;
  /** Leave out thinking blocks (reasoning_content). Default: included. */
  omitThinking?: boolean;
}

export interface FromChatResult {
  message: MessagesMessage;
  warnings: string[];
}

const random = (): string => randomBase64url(18);

/** `msg_…` from the completion id (kept if it already is one), so logs can join the two. */
export function messageId(chatId: string | null | undefined): string {
  if (!chatId) return `msg_${random()}`;
  return chatId.startsWith('msg_') ? chatId : `msg_${chatId.replace(/[^A-Za-z0-9_-]/g, '_')}`;
}

/** A tool call id Anthropic would accept back as a `tool_use_id`. */
export function toolUseId(callId: string | null | undefined): string {
  if (!callId) return `toolu_${random()}`;
  return callId.replace(/[^A-Za-z0-9_-]/g, '_');
}

/**
 * The stop sequence a backend reports as matched: vLLM's `stop_reason` (the string) or
 * llama-server's `stopping_word`, when it is one of the request's stop_sequences.
 */
export function matchedStop(choice: object | null | undefined, stops: readonly string[] | null | undefined): string | null {
  if (!choice || !stops || stops.length === 0) return null;
  const c = choice as { stop_reason?: unknown; stopping_word?: unknown };
  for (const v of [c.stop_reason, c.stopping_word]) if (typeof v === 'string' && stops.includes(v)) return v;
  return null;
}

/**
 * finish_reason → stop_reason: stop → end_turn (stop_sequence when a matched stop sequence is
 * known), length → max_tokens, tool_calls / function_call → tool_use (and stop with tool calls
 * present), content_filter → refusal, anything else → end_turn.
 */
export function toStopReason(finish: string | null | undefined, hasToolCalls: boolean, stopSequence: string | null): StopReason {
  switch (finish) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      if (hasToolCalls) return 'tool_use';
      return stopSequence !== null ? 'stop_sequence' : 'end_turn';
  }
}

type ChatUsage = {
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  prompt_tokens_details?: { cached_tokens?: number | null; cache_creation_tokens?: number | null } | null;
};

/**
 * Chat usage → Anthropic usage. Chat's prompt_tokens include cached tokens; Anthropic's
 * input_tokens do not (total input = input + cache read + cache creation). So cache_read =
 * prompt_tokens_details.cached_tokens, cache_creation = prompt_tokens_details.cache_creation_tokens
 * (what the gateway's Anthropic backend reports), input = prompt − both.
 */
export function toMessagesUsage(u: ChatUsage | null | undefined): MessagesUsage {
  const num = (v: number | null | undefined): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  const read = num(u?.prompt_tokens_details?.cached_tokens);
  const created = num(u?.prompt_tokens_details?.cache_creation_tokens);
  return {
    input_tokens: Math.max(0, num(u?.prompt_tokens) - read - created),
    output_tokens: num(u?.completion_tokens),
    cache_creation_input_tokens: created,
    cache_read_input_tokens: read,
  };
}

/** Tool call arguments → a tool_use input object, or `{}` and a warning. */
export function parseToolInput(args: string, name: string, warn: (w: string) => void): Record<string, unknown> {
  if (args.trim() === '') return {};
  try {
    const v: unknown = JSON.parse(args);
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // reported below
  }
  warn(`tool call "${name}": arguments are not a JSON object; sent as input {}`);
  return {};
}

type ChatMessageOut = ChatCompletion['choices'][number]['message'] & { reasoning_content?: unknown; reasoning?: unknown };

export function fromChat(c: ChatCompletion, o: FromChatOptions): FromChatResult {
  const warnings: string[] = [];
  const choice = c.choices[0];
  if (c.choices.length > 1) warnings.push(`choices: ${c.choices.length - 1} extra choice(s) left out`);
  const m = choice?.message as ChatMessageOut | undefined;
  const content: MessageContentBlock[] = [];
  const reasoning = typeof m?.reasoning_content === 'string' ? m.reasoning_content : typeof m?.reasoning === 'string' ? m.reasoning : '';
  if (reasoning !== '' && o.omitThinking !== true) content.push({ type: 'thinking', thinking: reasoning, signature: gatewaySignature(reasoning) });
  const text = typeof m?.content === 'string' && m.content !== '' ? m.content : typeof m?.refusal === 'string' ? m.refusal : '';
  if (text !== '') content.push({ type: 'text', text });
  for (const tc of m?.tool_calls ?? []) {
    if (tc.type !== 'function') {
      warnings.push(`tool call of type "${tc.type}" left out`);
      continue;
    }
    const input = parseToolInput(tc.function.arguments, tc.function.name, (w) => warnings.push(w));
    content.push({ type: 'tool_use', id: toolUseId(tc.id), name: tc.function.name, input });
  }
  const stopSequence = choice?.finish_reason === 'stop' ? matchedStop(choice, o.stopSequences) : null;
  const hasTools = content.some((b) => b.type === 'tool_use');
  const refused = typeof m?.refusal === 'string' && m.refusal !== '' && (m.content === null || m.content === '');
  const stopReason = refused ? 'refusal' : toStopReason(choice?.finish_reason, hasTools, stopSequence);
  return {
    message: {
      id: messageId(c.id),
      type: 'message',
      role: 'assistant',
      model: o.model,
      content,
      stop_reason: stopReason,
      stop_sequence: stopReason === 'stop_sequence' ? stopSequence : null,
      stop_details: null,
      container: null,
      usage: toMessagesUsage(c.usage),
    },
    warnings,
  };
}
