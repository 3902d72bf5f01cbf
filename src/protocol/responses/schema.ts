/**
 * OpenAI Responses API request schema (`POST /v1/responses`). Same rule as the chat schema: the
 * gateway checks what it needs to route, limit, cache and translate, and forwards the rest.
 * - Every object is loose (unknown keys pass at every level) and `null` means "not set".
 * - Input items, content parts, tools and tool choices of a type the gateway does not know pass as
 *   `{ type: string, … }`; the translation to chat decides what it can express (to-chat.ts).
 * - An input item without `type` is a message when it has a `role` and an item reference
 *   otherwise, as OpenAI reads it (`EasyInputMessage`, `ItemReference` with `type` optional).
 * - Schemas check and never transform: parseResponsesRequest hands on the client's own object.
 */
import { z } from 'zod';
import { parseRequest } from '../validate.ts';

type Pick = (rec: Record<string, unknown>) => z.ZodType | undefined;

/**
 * An object checked by the schema its `type` picks (`undefined`: a type newer than this gateway,
 * passed on), so that an error names the object's own field rather than a union's.
 */
function byType<T>(pick: Pick) {
  return z.unknown().superRefine((value, ctx) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      ctx.addIssue({ code: 'custom', message: 'expected an object' });
      return;
    }
    const rec = value as Record<string, unknown>;
    if (rec.type !== undefined && rec.type !== null && typeof rec.type !== 'string') {
      ctx.addIssue({ code: 'custom', message: 'expected a string', path: ['type'] });
      return;
    }
    const schema = pick(rec);
    if (!schema) return;
    const r = schema.safeParse(value);
    if (!r.success) for (const issue of r.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
  }) as unknown as z.ZodType<T>;
}

/** `byType` over a fixed table; `type` is required. */
function typed<T>(table: Record<string, z.ZodType>) {
  return byType<T>((rec) => {
    if (typeof rec.type !== 'string') return z.looseObject({ type: z.string() });
    return Object.hasOwn(table, rec.type) ? table[rec.type] : undefined;
  });
}

export const MESSAGE_ROLES = ['user', 'assistant', 'system', 'developer'] as const;

// ---------------------------------------------------------------------------
// content parts

const inputText = z.looseObject({ type: z.literal('input_text'), text: z.string() });
const inputImage = z.looseObject({
  type: z.literal('input_image'),
  image_url: z.string().min(1).nullish(),
  file_id: z.string().min(1).nullish(),
  detail: z.string().nullish(),
});
const inputFile = z.looseObject({ type: z.literal('input_file') });
const inputAudio = z.looseObject({ type: z.literal('input_audio') });
const outputText = z.looseObject({ type: z.literal('output_text'), text: z.string() });
const refusal = z.looseObject({ type: z.literal('refusal'), refusal: z.string() });
type KnownPart = z.infer<typeof inputText> | z.infer<typeof inputImage> | z.infer<typeof outputText> | z.infer<typeof refusal>;
/** A content part: the known ones checked, any other `{type: string, …}` passed on. */
export type ContentPart = KnownPart | { type: string; [k: string]: unknown };
const contentPart = typed<ContentPart>({
  input_text: inputText, input_image: inputImage, input_file: inputFile, input_audio: inputAudio,
  output_text: outputText, refusal,
});

// ---------------------------------------------------------------------------
// input items

const messageItem = z.looseObject({
  type: z.literal('message').nullish(),
  role: z.enum(MESSAGE_ROLES),
  content: z.union([z.string(), z.array(contentPart)]),
  id: z.string().nullish(),
  status: z.string().nullish(),
});

/** `output` of function_call_output / custom_tool_call_output: a string or content parts. */
const toolOutput = z.union([z.string(), z.array(contentPart)]);

const functionCallItem = z.looseObject({
  type: z.literal('function_call'),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
  namespace: z.string().nullish(),
  id: z.string().nullish(),
  status: z.string().nullish(),
});
const functionCallOutputItem = z.looseObject({
  type: z.literal('function_call_output'),
  call_id: z.string().min(1),
  output: toolOutput,
});
const customToolCallItem = z.looseObject({
  type: z.literal('custom_tool_call'),
  call_id: z.string().min(1),
  name: z.string().min(1),
  input: z.string(),
  namespace: z.string().nullish(),
  id: z.string().nullish(),
});
const customToolCallOutputItem = z.looseObject({
  type: z.literal('custom_tool_call_output'),
  call_id: z.string().min(1),
  output: toolOutput,
});
const summaryPart = z.looseObject({ type: z.string(), text: z.string() });
const reasoningItem = z.looseObject({
  type: z.literal('reasoning'),
  id: z.string().nullish(),
  summary: z.array(summaryPart).nullish(),
  content: z.array(summaryPart).nullish(),
  encrypted_content: z.string().nullish(),
});
const itemReference = z.looseObject({ type: z.literal('item_reference'), id: z.string().min(1) });
/** Codex: `{type:"additional_tools", role:"developer", tools:[…]}` offers more tools mid-input. */
const additionalToolsItem = z.looseObject({
  type: z.literal('additional_tools'),
  tools: z.array(z.looseObject({ type: z.string() })),
});

const ITEM_SCHEMAS: Record<string, z.ZodType> = {
  message: messageItem,
  function_call: functionCallItem,
  function_call_output: functionCallOutputItem,
  custom_tool_call: customToolCallItem,
  custom_tool_call_output: customToolCallOutputItem,
  reasoning: reasoningItem,
  item_reference: itemReference,
  additional_tools: additionalToolsItem,
};

/** One input item as the schema leaves it: checked when its type is known, loose otherwise. */
export type InputItem = { type?: string | null; [k: string]: unknown };
const inputItem = byType<InputItem>((rec) => {
  if (rec.type === undefined || rec.type === null) {
    return 'role' in rec ? messageItem : z.looseObject({ id: z.string().min(1) });
  }
  const t = rec.type as string;
  return Object.hasOwn(ITEM_SCHEMAS, t) ? ITEM_SCHEMAS[t] : undefined;
});

// ---------------------------------------------------------------------------
// tools

const functionTool = z.looseObject({
  type: z.literal('function'),
  name: z.string().min(1).max(128),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});
const customTool = z.looseObject({
  type: z.literal('custom'),
  name: z.string().min(1),
  description: z.string().nullish(),
  format: z.looseObject({ type: z.string() }).nullish(),
});
const namespaceTool = z.looseObject({
  type: z.literal('namespace'),
  name: z.string().min(1),
  description: z.string().nullish(),
  tools: z.array(typed<ResponsesFunctionTool | ResponsesCustomTool | OtherTool>({ function: functionTool, custom: customTool })),
});
type OtherTool = { type: string; [k: string]: unknown };
export type ResponsesTool = ResponsesFunctionTool | ResponsesCustomTool | NamespaceTool | OtherTool;
const toolSchema = typed<ResponsesTool>({ function: functionTool, custom: customTool, namespace: namespaceTool });

const toolChoiceObject = typed<{ type: string; [k: string]: unknown }>({
  function: z.looseObject({ type: z.literal('function'), name: z.string().min(1) }),
  custom: z.looseObject({ type: z.literal('custom'), name: z.string().min(1) }),
  allowed_tools: z.looseObject({ type: z.literal('allowed_tools'), mode: z.string(), tools: z.array(z.looseObject({ type: z.string() })) }),
});
/** `auto` / `none` / `required`, or an object picked by its `type`. */
export type ResponsesToolChoice = string | { type: string; [k: string]: unknown };
const toolChoiceSchema = z.unknown().superRefine((v, ctx) => {
  if (typeof v === 'string') return;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    ctx.addIssue({ code: 'custom', message: 'expected a string or an object' });
    return;
  }
  const r = toolChoiceObject.safeParse(v);
  if (!r.success) for (const issue of r.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
}) as unknown as z.ZodType<ResponsesToolChoice>;

// ---------------------------------------------------------------------------
// text.format

const jsonSchemaFormat = z.looseObject({
  type: z.literal('json_schema'),
  name: z.string().min(1),
  schema: z.record(z.string(), z.unknown()),
  description: z.string().nullish(),
  strict: z.boolean().nullish(),
});
export type JsonSchemaFormat = z.infer<typeof jsonSchemaFormat>;
export type TextFormat = { type: 'text' } | { type: 'json_object' } | JsonSchemaFormat | { type: string; [k: string]: unknown };
const textFormat = typed<TextFormat>({
  text: z.looseObject({ type: z.literal('text') }),
  json_object: z.looseObject({ type: z.literal('json_object') }),
  json_schema: jsonSchemaFormat,
});

// ---------------------------------------------------------------------------
// the request

export const responsesRequestSchema = z.looseObject({
  model: z.string().min(1),
  /** Optional as in OpenAI's API (a stored `prompt` may carry it); translation requires some. */
  input: z.union([z.string(), z.array(inputItem)]).nullish(),
  instructions: z.string().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({}).nullish(),
  tools: z.array(toolSchema).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  max_output_tokens: z.int().min(1).nullish(),
  max_tool_calls: z.int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_logprobs: z.int().min(0).max(20).nullish(),
  text: z.looseObject({ format: textFormat.nullish(), verbosity: z.string().nullish() }).nullish(),
  reasoning: z.looseObject({ effort: z.string().nullish(), summary: z.string().nullish() }).nullish(),
  store: z.boolean().nullish(),
  previous_response_id: z.string().min(1).nullish(),
  include: z.array(z.string()).nullish(),
  truncation: z.string().nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  user: z.string().nullish(),
  safety_identifier: z.string().nullish(),
  prompt_cache_key: z.string().nullish(),
  service_tier: z.string().nullish(),
  background: z.boolean().nullish(),
});

export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;

/** The item shapes the schema checks, for the translation (other types are `{type: string}`). */
export type MessageItem = z.infer<typeof messageItem>;
export type FunctionCallItem = z.infer<typeof functionCallItem>;
export type FunctionCallOutputItem = z.infer<typeof functionCallOutputItem>;
export type CustomToolCallItem = z.infer<typeof customToolCallItem>;
export type CustomToolCallOutputItem = z.infer<typeof customToolCallOutputItem>;
export type ReasoningItem = z.infer<typeof reasoningItem>;
export type ItemReference = z.infer<typeof itemReference>;
export type AdditionalToolsItem = z.infer<typeof additionalToolsItem>;
export type ResponsesFunctionTool = z.infer<typeof functionTool>;
export type ResponsesCustomTool = z.infer<typeof customTool>;
export type NamespaceTool = z.infer<typeof namespaceTool>;

/** Parses a `/v1/responses` body, or throws the gateway's 400 `invalid_request_error` with `param`. */
export function parseResponsesRequest(body: unknown): ResponsesRequest {
  return parseRequest(responsesRequestSchema, body);
}
