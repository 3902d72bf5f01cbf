/**
 * Anthropic Messages request schema (`POST /v1/messages` and `/v1/messages/count_tokens`).
 *
 * The rule is chat.ts's: check what the gateway needs to route, limit, count and translate, and let
 * everything else pass so native backends receive the client's own body.
 * - Every object is loose: unknown keys (`cache_control`, `citations`, `context_management`,
 *   `output_config`, `service_tier`, `container`, new fields) pass at every level.
 * - Content blocks, tools and tool choices of a type the gateway does not know pass as
 *   `{ type: string, … }`; a known type with a bad shape is a 400 naming the field.
 * - `role: "system"` turns inside `messages` are accepted (Claude Code sends them).
 * - `null` for an optional field means "not set". Schemas check and never transform.
 */
import { z } from 'zod';
import { parseRequest } from '../validate.ts';

/**
 * An object with a string `type`: the known types are checked against their own schema (a bad
 * shape is reported at its field, e.g. `messages[0].content[1].text`), any other type passes as a
 * shape newer than this gateway.
 */
function byType(known: Record<string, z.ZodType>) {
  return z.looseObject({ type: z.string() }).check((ctx) => {
    const schema = Object.hasOwn(known, ctx.value.type) ? known[ctx.value.type] : undefined;
    const r = schema?.safeParse(ctx.value);
    if (!r || r.success) return;
    for (const issue of r.error.issues) {
      ctx.issues.push({ code: 'custom', message: issue.message, path: [...issue.path], input: ctx.value });
    }
  });
}

export const textBlockSchema = z.looseObject({ type: z.literal('text'), text: z.string() });

const imageSource = byType({
  base64: z.looseObject({ media_type: z.string().min(1), data: z.string() }),
  url: z.looseObject({ url: z.string().min(1) }),
  file: z.looseObject({ file_id: z.string().min(1) }),
});
export const imageBlockSchema = z.looseObject({ type: z.literal('image'), source: imageSource });

const documentSource = byType({
  base64: z.looseObject({ media_type: z.string().min(1), data: z.string() }),
  text: z.looseObject({ media_type: z.string().nullish(), data: z.string() }),
  url: z.looseObject({ url: z.string().min(1) }),
  file: z.looseObject({ file_id: z.string().min(1) }),
  content: z.looseObject({ content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]) }),
});
export const documentBlockSchema = z.looseObject({
  type: z.literal('document'),
  source: documentSource,
  title: z.string().nullish(),
  context: z.string().nullish(),
});

export const toolUseBlockSchema = z.looseObject({
  type: z.literal('tool_use'),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.unknown(),
});

/** What a tool_result may hold: text, image, document, search_result, tool_reference, newer types. */
const toolResultPart = byType({ text: textBlockSchema, image: imageBlockSchema, document: documentBlockSchema });
export const toolResultBlockSchema = z.looseObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(toolResultPart)]).nullish(),
  is_error: z.boolean().nullish(),
});

export const thinkingBlockSchema = z.looseObject({ type: z.literal('thinking'), thinking: z.string(), signature: z.string().nullish() });
export const redactedThinkingBlockSchema = z.looseObject({ type: z.literal('redacted_thinking'), data: z.string() });

export const contentBlockSchema = byType({
  text: textBlockSchema,
  image: imageBlockSchema,
  document: documentBlockSchema,
  tool_use: toolUseBlockSchema,
  tool_result: toolResultBlockSchema,
  thinking: thinkingBlockSchema,
  redacted_thinking: redactedThinkingBlockSchema,
});

const content = z.union([z.string(), z.array(contentBlockSchema)]);
const systemContent = z.union([z.string(), z.array(textBlockSchema)]);

export const messageParamSchema = z.discriminatedUnion('role', [
  z.looseObject({ role: z.literal('user'), content }),
  z.looseObject({ role: z.literal('assistant'), content }),
  z.looseObject({ role: z.literal('system'), content: systemContent }),
]);

/** A client tool: no `type` (or `custom`), a name and a JSON Schema for its input. */
export const customToolSchema = z.looseObject({
  type: z.literal('custom').nullish(),
  name: z.string().min(1),
  description: z.string().nullish(),
  input_schema: z.record(z.string(), z.unknown()),
});
/** A custom tool, or a server tool (web_search_20250305, bash_20250124, …) or newer type, passed as it is. */
export const toolSchema = z.union([customToolSchema, byType({ custom: customToolSchema })]);

const parallel = { disable_parallel_tool_use: z.boolean().nullish() };
export const toolChoiceSchema = byType({
  auto: z.looseObject(parallel),
  any: z.looseObject(parallel),
  tool: z.looseObject({ name: z.string().min(1), ...parallel }),
});

const fields = {
  model: z.string().min(1),
  messages: z.array(messageParamSchema).min(1),
  system: systemContent.nullish(),
  tools: z.array(toolSchema).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  thinking: z.looseObject({ type: z.string() }).nullish(),
};

export const messagesRequestSchema = z.looseObject({
  ...fields,
  max_tokens: z.int().min(1),
  stream: z.boolean().nullish(),
  stop_sequences: z.array(z.string()).nullish(),
  temperature: z.number().min(0).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_k: z.int().min(0).nullish(),
  metadata: z.looseObject({ user_id: z.string().nullish() }).nullish(),
});

/** count_tokens takes the same prompt without the generation parameters (max_tokens is not required). */
export const countTokensRequestSchema = z.looseObject(fields);

export type MessagesRequest = z.infer<typeof messagesRequestSchema>;
export type CountTokensRequest = z.infer<typeof countTokensRequestSchema>;
export type MessageParam = z.infer<typeof messageParamSchema>;
export type ContentBlock = z.infer<typeof contentBlockSchema>;
export type TextBlock = z.infer<typeof textBlockSchema>;
export type ImageBlock = z.infer<typeof imageBlockSchema>;
export type DocumentBlock = z.infer<typeof documentBlockSchema>;
export type ToolUseBlock = z.infer<typeof toolUseBlockSchema>;
export type ToolResultBlock = z.infer<typeof toolResultBlockSchema>;
export type ThinkingBlock = z.infer<typeof thinkingBlockSchema>;
export type MessagesTool = z.infer<typeof toolSchema>;
export type CustomTool = z.infer<typeof customToolSchema>;
export type MessagesToolChoice = z.infer<typeof toolChoiceSchema>;

/**
 * Narrowing helpers: the unions have a `type: string` member, so `type` alone does not narrow; the
 * schema guarantees that member never carries a known type, so checking `type` is enough.
 */
const blockOf =
  <B extends { type: string }>(type: B['type']) =>
  (b: { type: unknown }): b is B =>
    b.type === type;
export const isText = blockOf<TextBlock>('text');
export const isImage = blockOf<ImageBlock>('image');
export const isDocument = blockOf<DocumentBlock>('document');
export const isToolUse = blockOf<ToolUseBlock>('tool_use');
export const isToolResult = blockOf<ToolResultBlock>('tool_result');
export const isThinking = blockOf<ThinkingBlock>('thinking');
export const isCustomTool = (t: MessagesTool): t is CustomTool => t.type === undefined || t.type === null || t.type === 'custom';

/** Parses a `/v1/messages` body, or throws the gateway's 400 (invalid_request_error) naming the field. */
export function parseMessagesRequest(body: unknown): MessagesRequest {
  return parseRequest(messagesRequestSchema, body);
}

/** Parses a `/v1/messages/count_tokens` body, or throws the gateway's 400 naming the field. */
export function parseCountTokensRequest(body: unknown): CountTokensRequest {
  return parseRequest(countTokensRequestSchema, body);
}
