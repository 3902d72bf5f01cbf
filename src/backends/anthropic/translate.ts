/**
 * OpenAI Chat Completions request → Anthropic Messages request, as a pure function.
 *
 * The rules (documented in the README, "Anthropic backend"):
 * - `system` / `developer` messages, wherever they are, become the top-level `system` (in order);
 *   consecutive same-role turns are merged; `tool` messages become `tool_result` blocks in a user
 *   turn, assistant `tool_calls` become `tool_use` blocks; images and PDF files become blocks.
 * - Parameters Anthropic cannot honour and that change what the client gets back (`n > 1`,
 *   `logprobs`, `top_logprobs`, audio output, legacy `functions`; custom tools, their calls in the
 *   history and `tool_choice` naming one; `allowed_tools` with a mode other than auto/required;
 *   tool, tool call, tool choice and response format types this gateway does not know) are a 400
 *   `unsupported_parameter` naming the parameter (`tools[0]`, `messages[1].tool_calls[0]`, …).
 * - `tool_choice: {type: "allowed_tools"}` sends only the allowed tools upstream, with
 *   `tool_choice` auto (mode auto) or any (mode required): the model can call exactly those tools.
 * - `null` for an optional parameter means absent.
 * - Parameters that only tune sampling or bookkeeping (`logit_bias`, penalties, `seed`, `store`,
 *   unknown vendor extras, and `temperature`/`top_p` on API versions that removed them) are dropped
 *   and reported in `dropped` so the caller can log a warning.
 */
import type {
  ContentBlockParam,
  DocumentBlockParam,
  ImageBlockParam,
  MessageCreateParamsBase,
  OutputConfig,
  TextBlockParam,
  Tool,
  ToolChoice,
  ToolResultBlockParam,
} from '@anthropic-ai/sdk/resources/messages';
import { GatewayError, invalidRequest } from '../../errors/gateway-error.ts';
import {
  isAllowedToolsChoice,
  isCustomToolCall,
  isFunctionChoice,
  isFunctionTool,
  isFunctionToolCall,
  isJsonSchemaFormat,
  type ChatMessage,
  type ChatRequest,
  type FunctionTool,
} from '../../protocol/chat/schema.ts';

export interface TranslateOptions {
  /** max_tokens when the client sent neither max_tokens nor max_completion_tokens. */
  defaultMaxTokens: number;
  /** The `anthropic-version` sent upstream: decides whether temperature/top_p/top_k exist. */
  anthropicVersion: string;
}

type Turn = { role: 'user' | 'assistant'; content: ContentBlockParam[] };

/** What goes upstream: the SDK's params plus the sampling fields older API versions still accept. */
export type AnthropicRequest = Omit<MessageCreateParamsBase, 'messages'> & {
  messages: Turn[];
  temperature?: number;
  top_p?: number;
  top_k?: number;
};

export interface Translated {
  body: AnthropicRequest;
  /** Client parameters that were set but not sent upstream (names only). */
  dropped: string[];
}

/** The first API version without temperature, top_p and top_k. */
const NO_SAMPLING_FROM = '2026-10-21';

export const JSON_OBJECT_INSTRUCTION =
  'Respond with a single valid JSON object and nothing else: no prose before or after it, no Markdown code fences.';

const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

/** Fields this translation reads; anything else the client sent is an unknown extra and dropped. */
const HANDLED = new Set([
  'model', 'messages', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'top_k',
  'stop', 'tools', 'tool_choice', 'parallel_tool_calls', 'response_format', 'user', 'safety_identifier', 'reasoning_effort',
  'n', 'logprobs', 'top_logprobs', 'audio', 'modalities', 'functions', 'function_call',
]);
/** Dropped only when set to something other than their no-op value. */
const NOOP: Record<string, unknown> = { presence_penalty: 0, frequency_penalty: 0, store: false };

export function unsupportedParameter(param: string, why: string): GatewayError {
  return new GatewayError('unsupported_parameter', `Unsupported parameter: '${param}' ${why}`, { param });
}

function unsupportedValue(param: string, message: string): GatewayError {
  return new GatewayError('unsupported_value', message, { param });
}

function invalid(param: string, message: string): GatewayError {
  return invalidRequest(message, param);
}

const present = <T>(v: T): v is NonNullable<T> => v !== undefined && v !== null;

export function toAnthropicRequest(req: ChatRequest, opts: TranslateOptions): Translated {
  const extra = req as Record<string, unknown>;
  if (present(req.n) && req.n !== 1) throw unsupportedParameter('n', 'is not supported by Anthropic models: only one choice (n = 1) can be generated.');
  if (req.logprobs === true) throw unsupportedParameter('logprobs', 'is not supported by Anthropic models.');
  if (present(req.top_logprobs) && req.top_logprobs !== 0) throw unsupportedParameter('top_logprobs', 'is not supported by Anthropic models.');
  if (present(extra.audio)) throw unsupportedParameter('audio', 'is not supported: Anthropic models cannot produce audio.');
  const modalities = extra.modalities;
  if (Array.isArray(modalities) && modalities.some((m) => m !== 'text')) throw unsupportedParameter('modalities', 'is not supported: Anthropic models only produce text.');
  for (const legacy of ['functions', 'function_call'] as const) {
    if (present(extra[legacy])) throw unsupportedParameter(legacy, 'is not supported with Anthropic models; use "tools" and "tool_choice".');
  }

  const dropped: string[] = [];
  const sampling = opts.anthropicVersion < NO_SAMPLING_FROM;
  const system: TextBlockParam[] = [];
  const messages = toTurns(req.messages, system);
  if (messages.length === 0) throw invalid('messages', 'messages must contain at least one user or assistant message (the Anthropic API does not accept a system prompt alone).');

  const body: AnthropicRequest = {
    model: req.model,
    max_tokens: req.max_completion_tokens ?? req.max_tokens ?? opts.defaultMaxTokens,
    messages,
  };
  for (const p of ['temperature', 'top_p', 'top_k'] as const) {
    const v = extra[p];
    if (!present(v)) continue;
    if (!sampling || typeof v !== 'number') dropped.push(p);
    else if (p === 'temperature') body.temperature = Math.min(v, 1); // OpenAI allows 0–2, Anthropic 0–1
    else body[p] = v;
  }
  if (present(req.stop)) {
    const stops = (typeof req.stop === 'string' ? [req.stop] : (req.stop ?? [])).filter((s) => s !== '');
    if (stops.length > 0) body.stop_sequences = stops;
  }
  const userId = req.user ?? (typeof extra.safety_identifier === 'string' ? extra.safety_identifier : undefined);
  if (userId) body.metadata = { user_id: userId };

  const { tools, choice } = toToolsAndChoice(req);
  if (tools.length > 0) {
    body.tools = tools;
    if (choice) body.tool_choice = choice;
  }

  const output: OutputConfig = {};
  const rf = req.response_format;
  if (present(rf) && rf.type !== 'text') {
    if (rf.type === 'json_object') system.push({ type: 'text', text: JSON_OBJECT_INSTRUCTION });
    else if (isJsonSchemaFormat(rf)) {
      output.format = { type: 'json_schema', schema: rf.json_schema.schema ?? { type: 'object' } };
    } else throw unsupportedParameter('response_format', `of type "${rf.type}" is not supported with Anthropic models.`);
  }
  const effort = extra.reasoning_effort;
  if (present(effort)) {
    const mapped = effort === 'minimal' ? 'low' : effort;
    if (mapped === 'low' || mapped === 'medium' || mapped === 'high' || mapped === 'xhigh' || mapped === 'max') output.effort = mapped;
    else if (mapped !== 'none') dropped.push('reasoning_effort');
  }
  if (output.format || output.effort) body.output_config = output;

  if (system.length === 1 && system[0]) body.system = system[0].text;
  else if (system.length > 1) body.system = system;

  for (const [k, v] of Object.entries(extra)) {
    if (HANDLED.has(k) || !present(v)) continue;
    if (k in NOOP && NOOP[k] === v) continue;
    dropped.push(k);
  }
  return { body, dropped };
}

function textOf(content: string | Array<{ type: 'text'; text: string }>): string[] {
  return typeof content === 'string' ? [content] : content.map((p) => p.text);
}

const textBlocks = (texts: string[]): TextBlockParam[] => texts.filter((t) => t !== '').map((text) => ({ type: 'text', text }));

/** Messages → alternating user/assistant turns; system/developer text is collected into `system`. */
function toTurns(msgs: ChatMessage[], system: TextBlockParam[]): Turn[] {
  const turns: Turn[] = [];
  const push = (role: Turn['role'], blocks: ContentBlockParam[]): void => {
    if (blocks.length === 0) return;
    const last = turns[turns.length - 1];
    if (last && last.role === role) {
      // tool_result blocks must open a user turn: put them before text the turn already has.
      const results = blocks.filter((b) => b.type === 'tool_result');
      if (role === 'user' && results.length > 0 && last.content.some((b) => b.type !== 'tool_result')) {
        const firstOther = last.content.findIndex((b) => b.type !== 'tool_result');
        last.content.splice(firstOther, 0, ...results);
        last.content.push(...blocks.filter((b) => b.type !== 'tool_result'));
      } else last.content.push(...blocks);
    } else turns.push({ role, content: [...blocks] });
  };
  msgs.forEach((m, i) => {
    const at = `messages[${i}]`;
    switch (m.role) {
      case 'system':
      case 'developer':
        system.push(...textBlocks(textOf(m.content)));
        return;
      case 'user':
        push('user', typeof m.content === 'string' ? textBlocks([m.content]) : m.content.map((p, j) => userPart(p, `${at}.content[${j}]`)).filter((b) => b !== null));
        return;
      case 'assistant': {
        const blocks: ContentBlockParam[] = [];
        if (typeof m.content === 'string') blocks.push(...textBlocks([m.content]));
        else if (Array.isArray(m.content)) blocks.push(...textBlocks(m.content.map((p) => (p.type === 'text' ? p.text : p.refusal))));
        if (m.function_call) throw unsupportedParameter(`${at}.function_call`, 'is not supported with Anthropic models; use "tool_calls".');
        (m.tool_calls ?? []).forEach((tc, j) => {
          const param = `${at}.tool_calls[${j}]`;
          if (isCustomToolCall(tc)) throw unsupportedParameter(param, 'is a custom tool call: Anthropic models have no custom (free-form input) tools.');
          if (!isFunctionToolCall(tc)) throw unsupportedParameter(param, `has type "${tc.type}", which is not supported with Anthropic models.`);
          blocks.push({ type: 'tool_use', id: tc.id, name: tc.function.name, input: parseArguments(tc.function.arguments, `${param}.function.arguments`) });
        });
        push('assistant', blocks);
        return;
      }
      case 'tool': {
        const texts = textOf(m.content).filter((t) => t !== '');
        const result: ToolResultBlockParam = { type: 'tool_result', tool_use_id: m.tool_call_id };
        if (typeof m.content === 'string') {
          if (m.content !== '') result.content = m.content;
        } else if (texts.length > 0) result.content = textBlocks(texts);
        push('user', [result]);
        return;
      }
      case 'function':
        throw unsupportedValue(`${at}.role`, `${at}: the legacy "function" role is not supported with Anthropic models; use "tool" messages.`);
      default: {
        const never: never = m;
        throw invalid(`${at}.role`, `unknown role in ${JSON.stringify(never)}`);
      }
    }
  });
  return turns;
}

function parseArguments(args: string, param: string): Record<string, unknown> {
  if (args.trim() === '') return {};
  let v: unknown;
  try {
    v = JSON.parse(args);
  } catch {
    throw invalid(param, `${param} is not valid JSON; Anthropic needs tool call arguments as a JSON object.`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalid(param, `${param} must be a JSON object.`);
  return v as Record<string, unknown>;
}

type UserPart = Extract<ChatMessage, { role: 'user' }>['content'] extends string | Array<infer P> ? P : never;

function userPart(p: UserPart, at: string): ContentBlockParam | null {
  switch (p.type) {
    case 'text':
      return p.text === '' ? null : { type: 'text', text: p.text };
    case 'image_url':
      return imageBlock(p.image_url.url, `${at}.image_url.url`);
    case 'input_audio':
      throw unsupportedValue(`${at}.type`, `${at}: audio input is not supported by Anthropic models.`);
    case 'file':
      return documentBlock(p.file, at);
    default: {
      const never: never = p;
      throw invalid(`${at}.type`, `unknown content part ${JSON.stringify(never)}`);
    }
  }
}

const DATA_URL = /^data:([^;,]+)((?:;[^;,]+)*?),(.*)$/s;

function imageBlock(url: string, param: string): ImageBlockParam {
  if (/^https?:\/\//i.test(url)) return { type: 'image', source: { type: 'url', url } };
  const m = DATA_URL.exec(url);
  if (!m) throw unsupportedValue(param, `${param}: images must be an http(s) URL or a base64 data URL.`);
  const mediaType = (m[1] ?? '').toLowerCase().replace('image/jpg', 'image/jpeg');
  if (!(m[2] ?? '').toLowerCase().includes(';base64')) throw unsupportedValue(param, `${param}: data URLs must be base64-encoded.`);
  if (!IMAGE_TYPES.has(mediaType)) {
    throw unsupportedValue(param, `${param}: image type "${mediaType}" is not supported by Anthropic (use image/jpeg, image/png, image/gif or image/webp).`);
  }
  return { type: 'image', source: { type: 'base64', media_type: mediaType as 'image/png', data: m[3] ?? '' } };
}

function documentBlock(file: Record<string, unknown>, at: string): DocumentBlockParam {
  const data = file.file_data;
  const m = typeof data === 'string' ? DATA_URL.exec(data) : null;
  if (!m || (m[1] ?? '').toLowerCase() !== 'application/pdf' || !(m[2] ?? '').includes(';base64')) {
    throw unsupportedValue(`${at}.file`, `${at}: only PDF files sent inline as "file_data" (a base64 data URL) are supported with Anthropic models.`);
  }
  const doc: DocumentBlockParam = { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: m[3] ?? '' } };
  if (typeof file.filename === 'string' && file.filename !== '') doc.title = file.filename;
  return doc;
}

function toTool(t: FunctionTool): Tool {
  const params = t.function.parameters ?? {};
  const tool: Tool = { name: t.function.name, input_schema: { ...params, type: 'object' } };
  if (t.function.description) tool.description = t.function.description;
  if (t.function.strict === true) tool.strict = true;
  return tool;
}

/** `tools` and `tool_choice` together: `allowed_tools` decides which tools go upstream. */
function toToolsAndChoice(req: ChatRequest): { tools: Tool[]; choice: ToolChoice | undefined } {
  const defs: FunctionTool[] = (req.tools ?? []).map((t, i) => {
    if (t.type === 'custom') throw unsupportedParameter(`tools[${i}]`, 'is a custom tool: Anthropic models have no custom (free-form input) tools; use a function tool.');
    if (!isFunctionTool(t)) throw unsupportedParameter(`tools[${i}]`, `has type "${t.type}", which is not supported with Anthropic models.`);
    return t;
  });
  const all = defs.map(toTool);
  const flag = req.parallel_tool_calls === false ? { disable_parallel_tool_use: true } : {};
  const c = req.tool_choice;
  if (!present(c)) return { tools: all, choice: req.parallel_tool_calls === false ? { type: 'auto', ...flag } : undefined };
  if (typeof c === 'string') {
    if (c === 'none') return { tools: all, choice: { type: 'none' } };
    if (c === 'auto') return { tools: all, choice: { type: 'auto', ...flag } };
    if (c === 'required') return { tools: all, choice: { type: 'any', ...flag } };
    throw unsupportedParameter('tool_choice', `"${c}" is not supported with Anthropic models (use none, auto or required).`);
  }
  if (isFunctionChoice(c)) return { tools: all, choice: { type: 'tool', name: c.function.name, ...flag } };
  if (c.type === 'custom') throw unsupportedParameter('tool_choice', 'names a custom tool: Anthropic models have no custom tools.');
  if (!isAllowedToolsChoice(c)) throw unsupportedParameter('tool_choice', `of type "${c.type}" is not supported with Anthropic models.`);
  const { mode, tools: allowed } = c.allowed_tools;
  if (mode !== 'auto' && mode !== 'required') throw unsupportedParameter('tool_choice', `with allowed_tools mode "${mode}" is not supported with Anthropic models (use auto or required).`);
  const names = new Set<string>();
  allowed.forEach((a, k) => {
    const at = `tool_choice.allowed_tools.tools[${k}]`;
    const fn = a.function;
    const name = a.type === 'function' && typeof fn === 'object' && fn !== null && 'name' in fn ? fn.name : undefined;
    if (typeof name !== 'string') throw unsupportedParameter(at, 'is not supported with Anthropic models: only function tools ({"type":"function","function":{"name":…}}) can be allowed.');
    if (!all.some((t) => t.name === name)) throw invalid(at, `${at}: no function tool named "${name}" is defined in tools.`);
    names.add(name);
  });
  if (names.size === 0) throw invalid('tool_choice.allowed_tools.tools', 'tool_choice.allowed_tools.tools must name at least one tool.');
  // Anthropic has no "only these" choice: sending only these tools is what lets the model call exactly them.
  return { tools: all.filter((t) => names.has(t.name)), choice: { type: mode === 'auto' ? 'auto' : 'any', ...flag } };
}
