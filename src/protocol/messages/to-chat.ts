/**
 * Anthropic Messages request → the canonical chat request, for backends that do not speak
 * Messages natively. Pure: returns the chat body and the warnings (what was dropped and why) for
 * the caller to log; throws the gateway's 400 (`code: "unsupported"`) only for content a chat
 * backend cannot receive at all (PDF and image references by URL or Files-API id). The full table
 * is in README.md beside this file.
 */
import type { ChatMessage, ChatRequest } from '../chat/schema.ts';
import { unsupported } from '../../errors/gateway-error.ts';
import {
  isCustomTool,
  isDocument,
  isImage,
  isText,
  isThinking,
  isToolResult,
  isToolUse,
  type ContentBlock,
  type DocumentBlock,
  type ImageBlock,
  type MessagesRequest,
  type ToolResultBlock,
} from './schema.ts';

export interface ToChatOptions {
  /**
   * Send the assistant's `thinking` blocks back as `reasoning_content` on its chat message
   * (llama-server reads it). Otherwise they are dropped with a warning. Default false.
   */
  reasoningContent?: boolean;
  /** Send `top_k` as a vendor extra (llama-server, vLLM take it). false drops it with a warning. Default true. */
  topK?: boolean;
}

export interface ToChatResult {
  chat: ChatRequest;
  /** One line per thing that was set but not sent (for the request's log line). */
  warnings: string[];
}

type UserMessage = Extract<ChatMessage, { role: 'user' }>;
type UserPart = Exclude<UserMessage['content'], string>[number];
type AssistantMessage = Extract<ChatMessage, { role: 'assistant' }> & { reasoning_content?: string };
type ToolCall = { id: string; type: 'function'; function: { name: string; arguments: string } };

/** Top-level fields this translation reads or deliberately ignores; anything else is warned about. */
const HANDLED = new Set([
  'model', 'max_tokens', 'messages', 'system', 'stream', 'stop_sequences', 'temperature', 'top_p', 'top_k',
  'metadata', 'tools', 'tool_choice', 'thinking', 'output_config',
]);

/** `Error: ` marks a tool_result with `is_error: true` in the text the model reads. */
export const TOOL_ERROR_PREFIX = 'Error: ';

const present = <T>(v: T | null | undefined): v is T => v !== undefined && v !== null;

export function toChat(req: MessagesRequest, opts: ToChatOptions = {}): ToChatResult {
  const warnings = new Set<string>();
  const warn = (w: string): void => void warnings.add(w);
  const extra = req as Record<string, unknown>;

  const system: string[] = [];
  if (typeof req.system === 'string') system.push(req.system);
  else if (req.system) system.push(...req.system.map((b) => b.text));

  const messages: ChatMessage[] = [];
  req.messages.forEach((m, i) => {
    const at = `messages[${i}]`;
    if (m.role === 'system') {
      system.push(...(typeof m.content === 'string' ? [m.content] : m.content.map((b) => b.text)));
    } else if (m.role === 'user') {
      messages.push(...userTurn(m.content, at, warn));
    } else {
      const a = assistantTurn(m.content, at, warn, opts.reasoningContent === true);
      if (a) messages.push(a);
    }
  });
  const systemText = system.filter((t) => t !== '').join('\n\n');
  if (systemText !== '') messages.unshift({ role: 'system', content: systemText });

  const chat: ChatRequest = { model: req.model, messages, max_tokens: req.max_tokens };
  if (req.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  if (present(req.temperature)) chat.temperature = req.temperature;
  if (present(req.top_p)) chat.top_p = req.top_p;
  if (present(req.top_k)) {
    if (opts.topK === false) warn('top_k: dropped (this backend does not take it)');
    else chat.top_k = req.top_k;
  }
  if (req.stop_sequences && req.stop_sequences.length > 0) chat.stop = [...req.stop_sequences];
  if (present(req.metadata?.user_id) && req.metadata.user_id !== '') chat.user = req.metadata.user_id;

  translateTools(req, chat, warn);
  translateThinkingAndOutput(req, chat, warn);

  for (const [k, v] of Object.entries(extra)) {
    if (HANDLED.has(k) || !present(v)) continue;
    warn(`${k}: dropped (not supported by this backend)`);
  }
  return { chat, warnings: [...warnings] };
}

function translateTools(req: MessagesRequest, chat: ChatRequest, warn: (w: string) => void): void {
  const names = new Set<string>();
  const tools: NonNullable<ChatRequest['tools']> = [];
  (req.tools ?? []).forEach((t, i) => {
    if (!isCustomTool(t)) {
      warn(`tools[${i}]: server tool "${t.type}" left out (only Anthropic runs server tools)`);
      return;
    }
    const fn: { name: string; description?: string; parameters: Record<string, unknown> } = { name: t.name, parameters: t.input_schema };
    if (present(t.description) && t.description !== '') fn.description = t.description;
    if (t.strict === true) warn(`tools[${i}].strict: dropped (schema-guaranteed tool input is Anthropic's)`);
    if (t.defer_loading === true) warn(`tools[${i}].defer_loading: ignored (the tool is offered to the model upfront)`);
    names.add(t.name);
    tools.push({ type: 'function', function: fn });
  });
  const choice = req.tool_choice;
  if (tools.length === 0) {
    if (present(choice) && choice.type !== 'auto' && choice.type !== 'none') warn(`tool_choice: dropped (no tool this backend can call)`);
    return;
  }
  chat.tools = tools;
  if (!present(choice)) return;
  const noParallel = 'disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use === true;
  switch (choice.type) {
    case 'auto':
      chat.tool_choice = 'auto';
      break;
    case 'any':
      chat.tool_choice = 'required';
      break;
    case 'none':
      chat.tool_choice = 'none';
      break;
    case 'tool': {
      const name = typeof choice.name === 'string' ? choice.name : '';
      if (names.has(name)) chat.tool_choice = { type: 'function', function: { name } };
      else warn(`tool_choice: dropped (tool "${name}" is not one this backend can call)`);
      break;
    }
    default:
      warn(`tool_choice: type "${choice.type}" dropped (not supported by this backend)`);
  }
  if (noParallel && chat.tool_choice !== 'none') chat.parallel_tool_calls = false;
}

function translateThinkingAndOutput(req: MessagesRequest, chat: ChatRequest, warn: (w: string) => void): void {
  if (present(req.thinking) && req.thinking.type !== 'disabled') warn(`thinking: dropped (extended thinking is Anthropic's; the backend decides whether it reasons)`);
  const output = (req as Record<string, unknown>).output_config;
  if (!present(output)) return;
  if (typeof output !== 'object' || output === null || Array.isArray(output)) {
    warn('output_config: dropped (not an object)');
    return;
  }
  for (const [k, v] of Object.entries(output)) {
    if (!present(v)) continue;
    const format = v as { type?: unknown; schema?: unknown };
    if (k === 'format' && format.type === 'json_schema' && typeof format.schema === 'object' && format.schema !== null && !Array.isArray(format.schema)) {
      chat.response_format = { type: 'json_schema', json_schema: { name: 'output', schema: format.schema as Record<string, unknown> } };
    } else warn(`output_config.${k}: dropped (not supported by this backend)`);
  }
}

const dataUrl = (mediaType: string, data: string): string => `data:${mediaType};base64,${data}`;

function imagePart(b: ImageBlock, at: string): UserPart {
  const s = b.source;
  if (s.type === 'base64' && 'data' in s) return { type: 'image_url', image_url: { url: dataUrl(String(s.media_type), String(s.data)) } };
  if (s.type === 'url' && 'url' in s) return { type: 'image_url', image_url: { url: String(s.url) } };
  throw unsupported(`${at}.source: images of source type "${s.type}" can only be sent to Anthropic backends; send them as base64 or url.`, `${at}.source`);
}

function documentParts(b: DocumentBlock, at: string): UserPart[] {
  const s = b.source;
  const framed = (body: string): UserPart => ({ type: 'text', text: [b.title ?? '', b.context ?? '', body].filter((t) => t !== '').join('\n\n') });
  switch (s.type) {
    case 'text':
      return [framed(String(s.data))];
    case 'content': {
      const c = s.content as string | Array<{ type: string }>;
      if (typeof c === 'string') return [framed(c)];
      const parts: UserPart[] = [];
      c.forEach((p, j) => {
        if (isText(p)) parts.push({ type: 'text', text: p.text });
        else if (isImage(p)) parts.push(imagePart(p, `${at}.source.content[${j}]`));
      });
      if (b.title) parts.unshift({ type: 'text', text: b.title });
      return parts;
    }
    case 'base64': {
      const mediaType = String(s.media_type);
      if (mediaType !== 'application/pdf') {
        throw unsupported(`${at}.source: documents of media type "${mediaType}" are not supported; send text as a "text" source.`, `${at}.source.media_type`);
      }
      const filename = present(b.title) && b.title !== '' ? b.title : 'document.pdf';
      return [{ type: 'file', file: { filename, file_data: dataUrl(mediaType, String(s.data)) } }];
    }
    default:
      throw unsupported(
        `${at}.source: documents of source type "${s.type}" can only be sent to Anthropic backends; send PDFs as base64 and text as a "text" source.`,
        `${at}.source`,
      );
  }
}

/** A search_result block (user content or tool result) as the text the model reads. */
function searchResultText(b: Record<string, unknown>): string | undefined {
  const content = Array.isArray(b.content) ? b.content : [];
  const texts = content.flatMap((p: unknown) => (typeof p === 'object' && p !== null && isText(p as ContentBlock) ? [(p as { text: string }).text] : []));
  if (texts.length === 0) return undefined;
  const head = [b.title, b.source].filter((v): v is string => typeof v === 'string' && v !== '');
  return [...head, ...texts].join('\n');
}

/** A user turn: tool_result blocks become `tool` messages (first, as chat needs), the rest one user message. */
function userTurn(content: string | ContentBlock[], at: string, warn: (w: string) => void): ChatMessage[] {
  if (typeof content === 'string') return [{ role: 'user', content }];
  const out: ChatMessage[] = [];
  const toolImages: UserPart[] = [];
  const parts: UserPart[] = [];
  content.forEach((b, j) => {
    const here = `${at}.content[${j}]`;
    if (isToolResult(b)) out.push(toolMessage(b, here, toolImages, warn));
    else if (isText(b)) parts.push({ type: 'text', text: b.text });
    else if (isImage(b)) parts.push(imagePart(b, here));
    else if (isDocument(b)) parts.push(...documentParts(b, here));
    else if (b.type === 'search_result') {
      const text = searchResultText(b);
      if (text !== undefined) parts.push({ type: 'text', text });
    } else warn(`${here}: "${b.type}" block dropped (not supported in a user turn by this backend)`);
  });
  const all = [...toolImages, ...parts];
  if (all.length === 1 && all[0]?.type === 'text') out.push({ role: 'user', content: all[0].text });
  else if (all.length > 0) out.push({ role: 'user', content: all });
  return out;
}

function toolMessage(b: ToolResultBlock, at: string, images: UserPart[], warn: (w: string) => void): ChatMessage {
  const texts: string[] = [];
  const c = b.content;
  if (typeof c === 'string') texts.push(c);
  else if (c) {
    c.forEach((p, k) => {
      const here = `${at}.content[${k}]`;
      if (isText(p)) texts.push(p.text);
      else if (isImage(p)) images.push(imagePart(p, here));
      else if (isDocument(p)) {
        for (const d of documentParts(p, here)) {
          if (d.type === 'text') texts.push(d.text);
          else images.push(d);
        }
      } else if (p.type === 'search_result') {
        const text = searchResultText(p);
        if (text !== undefined) texts.push(text);
      } else warn(`${here}: "${p.type}" block dropped (not supported in a tool result by this backend)`);
    });
  }
  const text = texts.join('\n');
  return { role: 'tool', tool_call_id: b.tool_use_id, content: b.is_error === true ? `${TOOL_ERROR_PREFIX}${text}` : text };
}

function assistantTurn(content: string | ContentBlock[], at: string, warn: (w: string) => void, reasoning: boolean): AssistantMessage | undefined {
  if (typeof content === 'string') return content === '' ? undefined : { role: 'assistant', content };
  const texts: string[] = [];
  const thinking: string[] = [];
  const calls: ToolCall[] = [];
  content.forEach((b, j) => {
    const here = `${at}.content[${j}]`;
    if (isText(b)) texts.push(b.text);
    else if (isToolUse(b)) calls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
    else if (isThinking(b)) {
      if (reasoning) thinking.push(b.thinking);
      else warn(`${here}: thinking block dropped (this backend takes no reasoning history)`);
    } else if (b.type === 'redacted_thinking') warn(`${here}: redacted_thinking block dropped (only Anthropic can read it)`);
    else warn(`${here}: "${b.type}" block dropped (not supported in an assistant turn by this backend)`);
  });
  const text = texts.join('');
  if (text === '' && calls.length === 0 && thinking.length === 0) return undefined;
  const msg: AssistantMessage = { role: 'assistant', content: text === '' && calls.length > 0 ? null : text };
  if (calls.length > 0) msg.tool_calls = calls;
  if (thinking.length > 0) msg.reasoning_content = thinking.join('\n');
  return msg;
}
