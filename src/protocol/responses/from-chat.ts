/**
 * Canonical chat completion → Responses `Response` object, as OpenAI's API returns it (the field
 * list follows the openai SDK's `Response` interface; `output_text` is left out because the SDK adds
 * it itself, as it does for OpenAI's own answers).
 * - Output items in OpenAI's order: `reasoning` (from `reasoning_content`), `message`, then one
 *   `function_call` / `custom_tool_call` per tool call, names reversed through the NameMap.
 * - `finish_reason` `length` → `status: "incomplete"`, `incomplete_details.reason:
 *   "max_output_tokens"`; `content_filter` → reason `content_filter`; anything else → `completed`.
 * - The request's settings are echoed with OpenAI's defaults for what the client left out.
 * - Usage always has every field (zeros when the backend reported none), because clients read it
 *   without checks (Codex, the Vercel AI SDK).
 */
import { randomHex } from '../../lib/random-id.ts';
import type { ChatCompletion } from '../chat/schema.ts';
import type { ResponsesRequest } from './schema.ts';
import { responsesName, type NameMap } from './names.ts';
import type { Response, ResponseOutputItem, ResponseUsage } from './types.ts';

/** What a response needs besides the completion: fixed by the caller when the request arrives. */
export interface ResponseContext {
  /** `resp_…` (newResponseId()). */
  id: string;
  /** Unix seconds. */
  createdAt: number;
  /** The public model name the client asked for. */
  model: string;
  request: ResponsesRequest;
  /** From toChat(): reverses flattened namespace names. */
  names?: NameMap;
}

/** OpenAI-style ids: a prefix and 48 hex digits. */
export function newId(prefix: 'resp' | 'msg' | 'fc' | 'ctc' | 'rs'): string {
  return `${prefix}_${randomHex(24)}`;
}
export const newResponseId = (): string => newId('resp');

/** Chat usage → Responses usage (zeros when absent). */
export function toResponsesUsage(u: ChatCompletion['usage'] | null | undefined): ResponseUsage {
  const details = (u?.prompt_tokens_details ?? {}) as { cached_tokens?: number; cache_creation_tokens?: number; cache_write_tokens?: number };
  const input = u?.prompt_tokens ?? 0;
  const output = u?.completion_tokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: details.cached_tokens ?? 0, cache_write_tokens: details.cache_write_tokens ?? details.cache_creation_tokens ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: u?.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: u?.total_tokens ?? input + output,
  };
}

/** `status` and `incomplete_details` for a chat finish_reason. */
export function statusOf(finishReason: string | null | undefined): Pick<Response, 'status' | 'incomplete_details'> {
  if (finishReason === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/**
 * A response's members fixed by its request, in OpenAI's order, as the runs between the members
 * that change while the response is made (status, completed_at, error, incomplete_details,
 * output, usage): responseShell puts them together, and a stream prints each run once.
 */
export function shellRuns(ctx: ResponseContext) {
  const r = ctx.request;
  const tier = r.service_tier && r.service_tier !== 'auto' ? r.service_tier : 'default';
  return {
    /** before `status` */
    head: { id: ctx.id, object: 'response', created_at: ctx.createdAt },
    /** between `status` and `completed_at` */
    background: { background: r.background ?? false },
    /** between `incomplete_details` and `output` */
    request: {
      instructions: r.instructions ?? null,
      max_output_tokens: r.max_output_tokens ?? null,
      max_tool_calls: r.max_tool_calls ?? null,
      model: ctx.model,
    },
    /** between `output` and `usage` */
    settings: {
      parallel_tool_calls: r.parallel_tool_calls ?? true,
      previous_response_id: r.previous_response_id ?? null,
      prompt_cache_key: r.prompt_cache_key ?? null,
      reasoning: { effort: r.reasoning?.effort ?? null, summary: r.reasoning?.summary ?? null },
      safety_identifier: r.safety_identifier ?? null,
      service_tier: tier,
      store: r.store ?? true,
      temperature: r.temperature ?? 1,
      text: { format: r.text?.format ?? { type: 'text' }, verbosity: r.text?.verbosity ?? 'medium' },
      tool_choice: r.tool_choice ?? 'auto',
      tools: r.tools ?? [],
      top_logprobs: r.top_logprobs ?? 0,
      top_p: r.top_p ?? 1,
      truncation: r.truncation ?? 'disabled',
    },
    /** after `usage` */
    tail: { user: r.user ?? null, metadata: r.metadata ?? {} },
  };
}
export type ShellRuns = ReturnType<typeof shellRuns>;

/** The members of a response that change while it is made. */
export interface LiveMembers {
  status?: Response['status'];
  completed_at?: number | null | undefined;
  error: Response['error'];
  incomplete_details: Response['incomplete_details'];
  usage?: ResponseUsage | null | undefined;
}

/** The live members of a response with no output yet. */
export function inProgress(): LiveMembers {
  return { status: 'in_progress', completed_at: null, error: null, incomplete_details: null, usage: null };
}

/**
 * The response with no output yet (`status: "in_progress"`, `usage: null`): the body of
 * `response.created` / `response.in_progress`, and the base of the final object.
 */
export function responseShell(ctx: ResponseContext): Response {
  const r = shellRuns(ctx);
  const live = inProgress();
  const shell = {
    ...r.head,
    status: live.status,
    ...r.background,
    completed_at: live.completed_at,
    error: live.error,
    incomplete_details: live.incomplete_details,
    ...r.request,
    output: [],
    ...r.settings,
    usage: live.usage,
    ...r.tail,
  };
  // The request's values are checked loosely (strings where OpenAI has enums): the wire shape is the SDK's.
  return shell as unknown as Response;
}

/** Sets the terminal fields of a response (status, details, completed_at, usage) in place. */
export function settle<R extends LiveMembers>(res: R, finishReason: string | null | undefined, usage: ResponseUsage, now = Math.floor(Date.now() / 1000)): R {
  const s = statusOf(finishReason);
  res.status = s.status;
  res.incomplete_details = s.incomplete_details;
  res.completed_at = s.status === 'completed' ? now : null;
  res.usage = usage;
  return res;
}

type ChatMessageOut = ChatCompletion['choices'][number]['message'] & { reasoning_content?: string | null; reasoning?: string | null };

/** The reasoning text a chat backend returned, under either field name in use. */
export function reasoningText(m: { reasoning_content?: unknown; reasoning?: unknown }): string {
  if (typeof m.reasoning_content === 'string') return m.reasoning_content;
  if (typeof m.reasoning === 'string') return m.reasoning;
  return '';
}

/** The output items of one chat message, each `status` set to `itemStatus`. */
export function outputItems(message: ChatMessageOut, names: NameMap | undefined, itemStatus: 'completed' | 'incomplete' = 'completed'): ResponseOutputItem[] {
  const out: ResponseOutputItem[] = [];
  const reasoning = reasoningText(message);
  if (reasoning !== '') out.push({ id: newId('rs'), type: 'reasoning', summary: [{ type: 'summary_text', text: reasoning }] });
  const calls = message.tool_calls ?? [];
  const text = message.content ?? '';
  const refusal = message.refusal ?? '';
  if (text !== '' || refusal !== '' || calls.length === 0) {
    const content: Array<{ type: 'output_text'; annotations: []; logprobs: []; text: string } | { type: 'refusal'; refusal: string }> = [];
    if (text !== '' || refusal === '') content.push({ type: 'output_text', annotations: [], logprobs: [], text });
    if (refusal !== '') content.push({ type: 'refusal', refusal });
    out.push({ id: newId('msg'), type: 'message', status: itemStatus, content, role: 'assistant' });
  }
  for (const call of calls) {
    if (call.type === 'function') {
      out.push({ id: newId('fc'), type: 'function_call', status: itemStatus, arguments: call.function.arguments, call_id: call.id, ...responsesName(names, call.function.name) });
    } else if (call.type === 'custom') {
      out.push({ id: newId('ctc'), type: 'custom_tool_call', status: itemStatus, call_id: call.id, input: call.custom.input, ...responsesName(names, call.custom.name) } as ResponseOutputItem);
    }
  }
  return out;
}

/** A non-streamed chat completion → the Response object the client gets. */
export function fromChat(completion: ChatCompletion, ctx: ResponseContext): Response {
  const choice = completion.choices[0];
  const res = responseShell(ctx);
  const finish = choice?.finish_reason;
  const itemStatus = statusOf(finish).status === 'completed' ? 'completed' : 'incomplete';
  res.output = choice ? outputItems(choice.message as ChatMessageOut, ctx.names, itemStatus) : [];
  return settle(res, finish, toResponsesUsage(completion.usage));
}
