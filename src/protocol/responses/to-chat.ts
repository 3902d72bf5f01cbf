/**
 * Responses request → canonical Chat Completions request, for backends reached by translation.
 * The full table (what maps, what is left out with a warning, what is a 400) is in README.md here.
 *
 * Rules:
 * - What the backend cannot run but the client only offered (hosted tools, reasoning items, replayed
 *   hosted-tool calls, `truncation: "auto"`, …) is left out with a warning: an agent that always
 *   offers `web_search` must still work against a local model.
 * - What would change the answer's meaning (forcing a hosted tool, `background`, stored `prompt`,
 *   `file_id` images, unresolved `item_reference`, images in tool output) is a 400.
 * - Namespaced tools (`{type:"namespace", name:"ns", tools:[…]}`) are flattened to `ns__fn`; `names`
 *   maps each flat name back, and from-chat / stream.ts use it to answer with `name` + `namespace`.
 * - `developer` messages become `system` messages (every chat backend and template knows `system`).
 * - `previous_response_id` never reaches chat: the caller passes the stored conversation as
 *   `history` (input items, placed before `input`).
 */
import { GatewayError } from '../../errors/gateway-error.ts';
import { flatName, unsupportedParameter, unsupportedValue, type NameMap, type ToolName } from './names.ts';
import type { ChatMessage, ChatRequest, ChatTool, ChatToolCall } from '../chat/schema.ts';
import type {
  ContentPart,
  InputItem,
  JsonSchemaFormat,
  MessageItem,
  NamespaceTool,
  ResponsesCustomTool,
  ResponsesFunctionTool,
  ResponsesRequest,
  ResponsesTool,
} from './schema.ts';

export interface ToChatOptions {
  /** Items of the stored conversation (`previous_response_id`), placed before `input`. */
  history?: readonly InputItem[];
  /** Resolves an `item_reference` id to the item; without it, or when it returns undefined, a refusal. */
  resolveItem?: (id: string) => InputItem | undefined;
  /**
   * `drop` (default): reasoning items are left out with a warning. `carry`: their summary (or
   * reasoning text) goes on the next assistant message as `reasoning_content`, for backends that
   * take it back (DeepSeek-style interleaved thinking).
   */
  reasoning?: 'drop' | 'carry';
}

export interface ToChatResult {
  chat: ChatRequest;
  /** One sentence per thing left out, for the log and a response header. */
  warnings: string[];
  names: NameMap;
}

/** Joins a namespace and a tool name for chat. */
const present = (v: unknown): boolean => v !== undefined && v !== null;

type Assistant = Extract<ChatMessage, { role: 'assistant' }> & { reasoning_content?: string };
type UserPart = Exclude<Extract<ChatMessage, { role: 'user' }>['content'], string>[number];

class Translator {
  readonly warnings: string[] = [];
  readonly names = new Map<string, ToolName>();
  readonly tools: ChatTool[] = [];
  private readonly toolNames = new Set<string>();
  readonly messages: ChatMessage[] = [];
  /** Reasoning text waiting for the next assistant message (`reasoning: "carry"`). */
  private pendingReasoning: string[] = [];
  private droppedReasoning = 0;
  private droppedItems = new Map<string, number>();

  constructor(private readonly opts: ToChatOptions) {}

  warn(msg: string): void {
    if (!this.warnings.includes(msg)) this.warnings.push(msg);
  }

  // -------------------------------------------------------------------------- tools

  addTools(tools: readonly ResponsesTool[], param: string): void {
    tools.forEach((t, i) => this.addTool(t, `${param}[${i}]`));
  }

  private addTool(t: ResponsesTool, param: string): void {
    switch (t.type) {
      case 'function':
        return this.addFunction(t as ResponsesFunctionTool, t.name as string, param);
      case 'custom':
        return this.addCustom(t as ResponsesCustomTool, t.name as string, param);
      case 'namespace': {
        const ns = t as NamespaceTool;
        ns.tools.forEach((sub, j) => {
          const subParam = `${param}.tools[${j}]`;
          if (sub.type !== 'function' && sub.type !== 'custom') {
            this.warn(`${subParam}: a '${sub.type}' tool in namespace '${ns.name}' cannot be translated for this backend; it was left out.`);
            return;
          }
          const name = sub.name as string;
          const flat = flatName(ns.name, name);
          this.names.set(flat, { name, namespace: ns.name });
          if (sub.type === 'function') this.addFunction(sub as ResponsesFunctionTool, flat, subParam);
          else this.addCustom(sub as ResponsesCustomTool, flat, subParam);
        });
        return;
      }
      default:
        this.warn(`${param}: the hosted tool '${t.type}' cannot run on this backend; it was left out.`);
    }
  }

  private claim(name: string, param: string): boolean {
    if (this.toolNames.has(name)) {
      throw new GatewayError('invalid_request', `Invalid value for '${param}': duplicate tool name '${name}'.`, { param });
    }
    this.toolNames.add(name);
    return true;
  }

  private addFunction(t: ResponsesFunctionTool, name: string, param: string): void {
    this.claim(name, `${param}.name`);
    const fn: Record<string, unknown> = { name };
    if (present(t.description)) fn.description = t.description;
    if (present(t.parameters)) fn.parameters = t.parameters;
    if (present(t.strict)) fn.strict = t.strict;
    this.tools.push({ type: 'function', function: fn as { name: string } });
  }

  private addCustom(t: ResponsesCustomTool, name: string, param: string): void {
    this.claim(name, `${param}.name`);
    const custom: Record<string, unknown> = { name };
    if (present(t.description)) custom.description = t.description;
    const format = t.format;
    if (format) {
      if (format.type === 'grammar') custom.format = { type: 'grammar', grammar: { syntax: format.syntax, definition: format.definition } };
      else custom.format = format;
    }
    this.tools.push({ type: 'custom', custom: custom as { name: string } });
  }

  // -------------------------------------------------------------------------- items

  item(item: InputItem, param: string, resolved = false): void {
    const type = item.type ?? ('role' in item ? 'message' : 'item_reference');
    switch (type) {
      case 'message':
        return this.message(item as MessageItem, param);
      case 'function_call': {
        const name = item.namespace ? flatName(item.namespace as string, item.name as string) : (item.name as string);
        return this.toolCall({ id: item.call_id as string, type: 'function', function: { name, arguments: item.arguments as string } });
      }
      case 'custom_tool_call': {
        const name = item.namespace ? flatName(item.namespace as string, item.name as string) : (item.name as string);
        return this.toolCall({ id: item.call_id as string, type: 'custom', custom: { name, input: item.input as string } });
      }
      case 'function_call_output':
      case 'custom_tool_call_output':
        this.messages.push({ role: 'tool', tool_call_id: item.call_id as string, content: this.toolOutput(item.output, `${param}.output`) });
        return;
      case 'reasoning':
        return this.reasoning(item);
      case 'additional_tools':
        return this.addTools(item.tools as ResponsesTool[], `${param}.tools`);
      case 'item_reference': {
        const id = item.id as string;
        if (resolved) throw unsupportedValue(param, `Invalid value for '${param}': an item reference resolved to another item reference ('${id}').`);
        if (!this.opts.resolveItem) {
          throw unsupportedParameter(param, `Unsupported parameter: '${param}': item references ('${id}') cannot be resolved for this model; send the item itself.`);
        }
        const found = this.opts.resolveItem(id);
        if (!found) {
          throw new GatewayError('item_not_found', `Item with id '${id}' not found.`, { param: 'input' });
        }
        return this.item(found, param, true);
      }
      default:
        this.droppedItems.set(String(type), (this.droppedItems.get(String(type)) ?? 0) + 1);
    }
  }

  private lastAssistant(): Assistant | undefined {
    const last = this.messages[this.messages.length - 1];
    return last?.role === 'assistant' ? (last as Assistant) : undefined;
  }

  private toolCall(call: ChatToolCall): void {
    let msg = this.lastAssistant();
    if (!msg || this.pendingReasoning.length > 0) {
      msg = { role: 'assistant', content: null };
      this.pushAssistant(msg);
    }
    (msg.tool_calls ??= []).push(call);
  }

  private pushAssistant(msg: Assistant): void {
    if (this.pendingReasoning.length > 0) {
      msg.reasoning_content = this.pendingReasoning.join('\n\n');
      this.pendingReasoning = [];
    }
    this.messages.push(msg);
  }

  private reasoning(item: InputItem): void {
    const texts: string[] = [];
    for (const list of [item.summary, item.content]) {
      if (!Array.isArray(list)) continue;
      for (const p of list as Array<{ text?: unknown }>) if (typeof p.text === 'string' && p.text !== '') texts.push(p.text);
      if (texts.length > 0) break; // the summary, else the raw reasoning text
    }
    if (this.opts.reasoning === 'carry' && texts.length > 0) this.pendingReasoning.push(texts.join('\n\n'));
    else this.droppedReasoning++;
  }

  private toolOutput(output: unknown, param: string): string {
    if (typeof output === 'string') return output;
    const texts: string[] = [];
    (output as ContentPart[]).forEach((p, j) => {
      if (p.type === 'input_text' || p.type === 'output_text') texts.push(p.text as string);
      else throw unsupportedValue(`${param}[${j}]`, `Unsupported value: '${param}[${j}].type' '${p.type}' in a tool output cannot be sent to this model; only text parts can.`);
    });
    return texts.join('\n');
  }

  private message(m: MessageItem, param: string): void {
    const content = m.content as string | ContentPart[];
    switch (m.role) {
      case 'system':
      case 'developer':
        this.messages.push({ role: 'system', content: this.text(content, `${param}.content`, m.role) });
        return;
      case 'assistant': {
        const msg: Assistant = { role: 'assistant', content: null };
        if (typeof content === 'string') msg.content = content;
        else {
          const texts: string[] = [];
          const refusals: string[] = [];
          content.forEach((p, j) => {
            if (p.type === 'output_text' || p.type === 'input_text') texts.push(p.text as string);
            else if (p.type === 'refusal') refusals.push(p.refusal as string);
            else throw unsupportedValue(`${param}.content[${j}]`, `Unsupported value: an assistant message cannot carry a '${p.type}' part.`);
          });
          // A refusal is replayed as the assistant's text: chat backends read no `refusal` input.
          msg.content = [...texts, ...refusals].join('');
        }
        this.pushAssistant(msg);
        return;
      }
      case 'user':
        this.messages.push({ role: 'user', content: typeof content === 'string' ? content : content.map((p, j) => this.userPart(p, `${param}.content[${j}]`)) });
        return;
    }
  }

  /** System and developer messages: text only. */
  private text(content: string | ContentPart[], param: string, role: string): string {
    if (typeof content === 'string') return content;
    return content
      .map((p, j) => {
        if (p.type === 'input_text' || p.type === 'output_text') return p.text as string;
        throw unsupportedValue(`${param}[${j}]`, `Unsupported value: a ${role} message can only carry text for this model, not '${p.type}'.`);
      })
      .join('\n');
  }

  private userPart(p: ContentPart, param: string): UserPart {
    switch (p.type) {
      case 'input_text':
      case 'output_text':
        return { type: 'text', text: p.text as string };
      case 'input_image': {
        if (typeof p.image_url === 'string' && p.image_url !== '') {
          const image_url: { url: string; detail?: string } = { url: p.image_url };
          if (p.detail === 'low' || p.detail === 'high' || p.detail === 'auto') image_url.detail = p.detail;
          return { type: 'image_url', image_url };
        }
        throw unsupportedValue(`${param}.file_id`, `Unsupported value: '${param}.file_id': images by file id cannot be sent to this model; send image_url (a URL or a data: URL).`);
      }
      case 'input_file': {
        if (typeof p.file_data === 'string') {
          const file: Record<string, unknown> = { file_data: p.file_data };
          if (typeof p.filename === 'string') file.filename = p.filename;
          return { type: 'file', file };
        }
        throw unsupportedValue(param, `Unsupported value: '${param}': files by file_id or file_url cannot be sent to this model; send file_data.`);
      }
      case 'input_audio': {
        const a = p.input_audio as { data?: unknown; format?: unknown } | undefined;
        if (a && typeof a.data === 'string' && typeof a.format === 'string') return { type: 'input_audio', input_audio: { data: a.data, format: a.format } };
        throw unsupportedValue(param, `Unsupported value: '${param}': input_audio needs input_audio.data and input_audio.format.`);
      }
      default:
        throw unsupportedValue(`${param}.type`, `Unsupported value: '${param}.type' '${p.type}' cannot be sent to this model.`);
    }
  }

  finish(): void {
    if (this.pendingReasoning.length > 0) {
      this.droppedReasoning += this.pendingReasoning.length;
      this.pendingReasoning = [];
    }
    if (this.droppedReasoning > 0) this.warn(`${this.droppedReasoning} reasoning item(s) in the input were left out: this backend takes no reasoning input.`);
    for (const [type, n] of this.droppedItems) {
      this.warn(`${n} '${type}' input item(s) were left out: this backend cannot take them.`);
    }
  }
}

const HOSTED_CHOICE = (type: string) => !['function', 'custom', 'allowed_tools'].includes(type);

function toolChoice(tr: Translator, choice: NonNullable<ResponsesRequest['tool_choice']>): ChatRequest['tool_choice'] {
  if (typeof choice === 'string') return choice;
  switch (choice.type) {
    case 'function':
      return { type: 'function', function: { name: choice.name as string } };
    case 'custom':
      return { type: 'custom', custom: { name: choice.name as string } };
    case 'allowed_tools': {
      const tools: Array<Record<string, unknown>> = [];
      (choice.tools as Array<{ type: string; name?: unknown }>).forEach((t, i) => {
        if ((t.type === 'function' || t.type === 'custom') && typeof t.name === 'string') tools.push({ type: t.type, [t.type]: { name: t.name } });
        else tr.warn(`tool_choice.tools[${i}]: the hosted tool '${t.type}' cannot run on this backend; it was left out of the allowed tools.`);
      });
      return { type: 'allowed_tools', allowed_tools: { mode: choice.mode as string, tools } };
    }
    default:
      throw unsupportedParameter('tool_choice', `Unsupported parameter: 'tool_choice' forces the hosted tool '${choice.type}', which this model cannot run.`);
  }
}

function responseFormat(format: NonNullable<NonNullable<ResponsesRequest['text']>['format']>): ChatRequest['response_format'] | undefined {
  switch (format.type) {
    case 'text':
      return undefined;
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema': {
      const f = format as JsonSchemaFormat;
      const json_schema: { name: string; schema: Record<string, unknown>; description?: string; strict?: boolean } = { name: f.name, schema: f.schema };
      if (present(f.description)) json_schema.description = f.description as string;
      if (present(f.strict)) json_schema.strict = f.strict as boolean;
      return { type: 'json_schema', json_schema };
    }
    default:
      throw unsupportedValue('text.format.type', `Unsupported value: 'text.format.type' '${format.type}' cannot be translated for this model.`);
  }
}

/** Translates a parsed Responses request into the canonical chat request. Throws GatewayError 400s. */
export function toChat(req: ResponsesRequest, opts: ToChatOptions = {}): ToChatResult {
  if (req.background === true) throw unsupportedParameter('background', "Unsupported parameter: 'background' responses are not supported for this model.");
  const extra = req as Record<string, unknown>;
  if (present(extra.prompt)) throw unsupportedParameter('prompt', "Unsupported parameter: stored 'prompt' templates cannot be used with this model.");
  if (present(extra.conversation)) throw unsupportedParameter('conversation', "Unsupported parameter: 'conversation' is not supported; use previous_response_id.");

  const tr = new Translator(opts);
  if (req.tools) tr.addTools(req.tools, 'tools');

  if (present(req.instructions) && req.instructions !== '') tr.messages.push({ role: 'system', content: req.instructions as string });
  (opts.history ?? []).forEach((item) => tr.item(item, 'previous_response_id'));
  const input = req.input;
  if (typeof input === 'string') tr.messages.push({ role: 'user', content: input });
  else if (input) input.forEach((item, i) => tr.item(item, `input[${i}]`));
  tr.finish();

  if (!tr.messages.some((m) => m.role !== 'system')) {
    throw new GatewayError('invalid_request', "Missing required parameter: 'input'.", { param: 'input', wireCode: 'missing_required_parameter' });
  }

  const chat: ChatRequest & Record<string, unknown> = { model: req.model, messages: tr.messages };
  if (req.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  if (tr.tools.length > 0) {
    chat.tools = tr.tools;
    if (present(req.tool_choice)) chat.tool_choice = toolChoice(tr, req.tool_choice as NonNullable<ResponsesRequest['tool_choice']>);
    if (present(req.parallel_tool_calls)) chat.parallel_tool_calls = req.parallel_tool_calls as boolean;
  } else if (present(req.tool_choice)) {
    const c = req.tool_choice as NonNullable<ResponsesRequest['tool_choice']>;
    if (typeof c !== 'string' && HOSTED_CHOICE(c.type)) toolChoice(tr, c); // throws
    if (c === 'required' || (typeof c !== 'string' && c.type !== 'allowed_tools')) {
      throw unsupportedParameter('tool_choice', "Unsupported parameter: 'tool_choice' requires a tool call, but no tool this model can call was offered.");
    }
  }
  if (present(req.max_output_tokens)) chat.max_completion_tokens = req.max_output_tokens as number;
  if (present(req.temperature)) chat.temperature = req.temperature as number;
  if (present(req.top_p)) chat.top_p = req.top_p as number;
  if (present(req.user)) chat.user = req.user as string;
  if (present(req.metadata)) chat.metadata = req.metadata as Record<string, string>;
  if (present(req.safety_identifier)) chat.safety_identifier = req.safety_identifier;
  if (present(req.prompt_cache_key)) chat.prompt_cache_key = req.prompt_cache_key;
  if (present(req.service_tier)) chat.service_tier = req.service_tier;
  if (present(req.reasoning?.effort)) chat.reasoning_effort = req.reasoning?.effort;
  if (present(req.text?.verbosity)) chat.verbosity = req.text?.verbosity;
  if (present(req.text?.format)) {
    const rf = responseFormat(req.text?.format as NonNullable<NonNullable<ResponsesRequest['text']>['format']>);
    if (rf) chat.response_format = rf;
  }
  if (req.truncation === 'auto') tr.warn("truncation 'auto' is not supported by this backend: the input is sent whole.");
  if (present(req.max_tool_calls)) tr.warn('max_tool_calls is not supported by this backend; it was left out.');
  if (present(req.top_logprobs) && req.top_logprobs !== 0) tr.warn('top_logprobs is not supported for translated responses; it was left out.');

  return { chat, warnings: tr.warnings, names: tr.names };
}
