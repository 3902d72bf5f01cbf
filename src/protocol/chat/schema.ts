/**
 * Chat Completions request schema. The OpenAI wire shape is the internal type. The rule: the
 * gateway checks what it needs to route, limit, cache and translate, and forwards everything else
 * to OpenAI-compatible upstreams unchanged.
 * - Every object is loose: unknown keys (vendor extras such as `top_k`, `cache_prompt`, new OpenAI
 *   fields) pass, at every level (request, message, content part, tool, tool call, tool choice).
 * - Tools, tool choices, assistant tool calls and response formats of a type the gateway does not
 *   know pass as `{ type: string, … }`; translating backends refuse what they cannot express.
 * - `null` for an optional parameter means "not set", as OpenAI's SDKs send it.
 * - Schemas check and never transform (no defaults, coercions, transforms): parseRequest hands on
 *   the client's own object, so what goes upstream is the client's body.
 */
import { z } from 'zod';
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';

export type { ChatCompletion, ChatCompletionChunk };

/**
 * An object of any `type` but the known ones: a shape newer than this gateway, passed on. The check
 * aborts so that, for a known type with a bad shape, the union reports the known branch's issue.
 */
function otherType(known: readonly string[]) {
  return z.looseObject({
    type: z.string().refine((t) => !known.includes(t), { message: `a known type (${known.join(', ')}) with a bad shape`, abort: true }),
  });
}

const textPart = z.looseObject({ type: z.literal('text'), text: z.string() });
const imagePart = z.looseObject({
  type: z.literal('image_url'),
  image_url: z.looseObject({ url: z.string().min(1), detail: z.string().nullish() }),
});
const audioPart = z.looseObject({
  type: z.literal('input_audio'),
  input_audio: z.looseObject({ data: z.string(), format: z.string() }),
});
const filePart = z.looseObject({ type: z.literal('file'), file: z.looseObject({}) });
const refusalPart = z.looseObject({ type: z.literal('refusal'), refusal: z.string() });

export const userContentPartSchema = z.discriminatedUnion('type', [textPart, imagePart, audioPart, filePart]);
const assistantPart = z.discriminatedUnion('type', [textPart, refusalPart]);

const textOnly = z.union([z.string(), z.array(textPart)]);

const functionToolCall = z.looseObject({
  id: z.string(),
  type: z.literal('function'),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});
const customToolCall = z.looseObject({
  id: z.string(),
  type: z.literal('custom'),
  custom: z.looseObject({ name: z.string(), input: z.string() }),
});
const toolCallSchema = z.union([functionToolCall, customToolCall, otherType(['function', 'custom'])]);

export const chatMessageSchema = z.discriminatedUnion('role', [
  z.looseObject({ role: z.literal('system'), content: textOnly, name: z.string().nullish() }),
  z.looseObject({ role: z.literal('developer'), content: textOnly, name: z.string().nullish() }),
  z.looseObject({
    role: z.literal('user'),
    content: z.union([z.string(), z.array(userContentPartSchema)]),
    name: z.string().nullish(),
  }),
  z.looseObject({
    role: z.literal('assistant'),
    content: z.union([z.string(), z.array(assistantPart)]).nullish(),
    name: z.string().nullish(),
    refusal: z.string().nullish(),
    tool_calls: z.array(toolCallSchema).nullish(),
    function_call: z.looseObject({ name: z.string(), arguments: z.string() }).nullish(),
  }),
  z.looseObject({ role: z.literal('tool'), content: textOnly, tool_call_id: z.string() }),
  z.looseObject({ role: z.literal('function'), content: z.string().nullable(), name: z.string() }),
]);

const functionTool = z.looseObject({
  type: z.literal('function'),
  function: z.looseObject({
    name: z.string().min(1).max(64),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});
const customTool = z.looseObject({
  type: z.literal('custom'),
  custom: z.looseObject({ name: z.string().min(1) }),
});
const toolSchema = z.union([functionTool, customTool, otherType(['function', 'custom'])]);

const functionChoice = z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) });
const allowedToolsChoice = z.looseObject({
  type: z.literal('allowed_tools'),
  allowed_tools: z.looseObject({ mode: z.string(), tools: z.array(z.looseObject({})) }),
});
const toolChoiceSchema = z.union([
  z.string(),
  functionChoice,
  z.looseObject({ type: z.literal('custom'), custom: z.looseObject({ name: z.string() }) }),
  allowedToolsChoice,
  otherType(['function', 'custom', 'allowed_tools']),
]);

const jsonSchemaFormat = z.looseObject({
  type: z.literal('json_schema'),
  json_schema: z.looseObject({
    name: z.string().min(1),
    description: z.string().nullish(),
    schema: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});
const responseFormatSchema = z.union([
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  jsonSchemaFormat,
  otherType(['text', 'json_object', 'json_schema']),
]);

const stopSchema = z.union([z.string(), z.array(z.string()).max(16)]).nullish();

export const chatRequestSchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(chatMessageSchema).min(1),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  n: z.int().min(1).max(128).nullish(),
  max_tokens: z.int().min(1).nullish(),
  max_completion_tokens: z.int().min(1).nullish(),
  stop: stopSchema,
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  logit_bias: z.record(z.string(), z.number().min(-100).max(100)).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.int().min(0).max(20).nullish(),
  seed: z.int().nullish(),
  tools: z.array(toolSchema).max(128).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  response_format: responseFormatSchema.nullish(),
  user: z.string().nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
});

export type ChatRequest = z.infer<typeof chatRequestSchema>;
export type ChatMessage = z.infer<typeof chatMessageSchema>;
export type ChatTool = z.infer<typeof toolSchema>;
export type FunctionTool = z.infer<typeof functionTool>;
export type ChatToolCall = z.infer<typeof toolCallSchema>;
export type FunctionToolCall = z.infer<typeof functionToolCall>;
export type CustomToolCall = z.infer<typeof customToolCall>;
export type ResponseFormat = z.infer<typeof responseFormatSchema>;
export type JsonSchemaFormat = z.infer<typeof jsonSchemaFormat>;
export type ToolChoice = z.infer<typeof toolChoiceSchema>;
export type FunctionChoice = z.infer<typeof functionChoice>;
export type AllowedToolsChoice = z.infer<typeof allowedToolsChoice>;

/**
 * Narrowing helpers: a union with a `type: string` member does not narrow on `type`, and the
 * schema guarantees that member never carries a known type.
 */
export const isFunctionTool = (t: ChatTool): t is FunctionTool => t.type === 'function';
export const isFunctionToolCall = (c: ChatToolCall): c is FunctionToolCall => c.type === 'function';
export const isCustomToolCall = (c: ChatToolCall): c is CustomToolCall => c.type === 'custom';
export const isJsonSchemaFormat = (f: ResponseFormat): f is JsonSchemaFormat => f.type === 'json_schema';
export const isFunctionChoice = (c: Exclude<ToolChoice, string>): c is FunctionChoice => c.type === 'function';
export const isAllowedToolsChoice = (c: Exclude<ToolChoice, string>): c is AllowedToolsChoice => c.type === 'allowed_tools';
