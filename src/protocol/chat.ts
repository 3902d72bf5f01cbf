/**
 * Chat Completions request schema. The OpenAI wire shape is the internal type: known fields are
 * checked for type and range, unknown top-level fields (vendor extras such as `top_k`,
 * `cache_prompt`, `reasoning_effort`) pass through to OpenAI-compatible upstreams untouched.
 */
import { z } from 'zod';
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';

export type { ChatCompletion, ChatCompletionChunk };

const textPart = z.looseObject({ type: z.literal('text'), text: z.string() });
const imagePart = z.looseObject({
  type: z.literal('image_url'),
  image_url: z.looseObject({ url: z.string().min(1), detail: z.enum(['auto', 'low', 'high']).optional() }),
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

const toolCallSchema = z.looseObject({
  id: z.string(),
  type: z.literal('function'),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});

export const chatMessageSchema = z.discriminatedUnion('role', [
  z.looseObject({ role: z.literal('system'), content: textOnly, name: z.string().optional() }),
  z.looseObject({ role: z.literal('developer'), content: textOnly, name: z.string().optional() }),
  z.looseObject({
    role: z.literal('user'),
    content: z.union([z.string(), z.array(userContentPartSchema)]),
    name: z.string().optional(),
  }),
  z.looseObject({
    role: z.literal('assistant'),
    content: z.union([z.string(), z.array(assistantPart)]).nullish(),
    name: z.string().optional(),
    refusal: z.string().nullish(),
    tool_calls: z.array(toolCallSchema).optional(),
    function_call: z.looseObject({ name: z.string(), arguments: z.string() }).nullish(),
  }),
  z.looseObject({ role: z.literal('tool'), content: textOnly, tool_call_id: z.string() }),
  z.looseObject({ role: z.literal('function'), content: z.string().nullable(), name: z.string() }),
]);

const toolSchema = z.looseObject({
  type: z.literal('function'),
  function: z.looseObject({
    name: z.string().min(1).max(64),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});

const toolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) }),
]);

const responseFormatSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    json_schema: z.looseObject({
      name: z.string().min(1),
      description: z.string().optional(),
      schema: z.record(z.string(), z.unknown()).optional(),
      strict: z.boolean().nullish(),
    }),
  }),
]);

const stopSchema = z.union([z.string(), z.array(z.string()).max(16)]).nullish();

export const chatRequestSchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(chatMessageSchema).min(1),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
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
  tools: z.array(toolSchema).max(128).optional(),
  tool_choice: toolChoiceSchema.optional(),
  parallel_tool_calls: z.boolean().optional(),
  response_format: responseFormatSchema.optional(),
  user: z.string().optional(),
  metadata: z.record(z.string(), z.string()).nullish(),
});

export type ChatRequest = z.infer<typeof chatRequestSchema>;
export type ChatMessage = z.infer<typeof chatMessageSchema>;
