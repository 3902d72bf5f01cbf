/**
 * Request validation of the fake Anthropic upstream, strict the way the Messages API is: a missing
 * `max_tokens`, a `system` role inside `messages`, roles that do not alternate, a `tool_result`
 * without its `tool_use` (and the reverse), empty text blocks, bad image sources and any unknown
 * field are rejected with the API's 400 `invalid_request_error` and a message naming the path.
 * `temperature`, `top_p` and `top_k` exist only for `anthropic-version: 2023-06-01`.
 *
 * Deliberately stricter than the live API in one place: the live API merges consecutive same-role
 * turns, this fake rejects them (as the API once did), so a gateway that forgets to merge is caught.
 */

type Json = Record<string, unknown>;

export const KNOWN_VERSIONS = new Set(['2023-06-01', '2026-10-21']);

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

class Invalid extends Error {}
const fail = (msg: string): never => {
  throw new Invalid(msg);
};

function onlyKeys(o: Json, allowed: readonly string[], at: string): void {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) fail(`${at ? `${at}.` : ''}${k}: Extra inputs are not permitted`);
}

function str(o: Json, k: string, at: string): string {
  const v = o[k];
  if (v === undefined) fail(`${at}.${k}: Field required`);
  if (typeof v !== 'string') fail(`${at}.${k}: Input should be a valid string`);
  return v as string;
}

const BASE_KEYS = [
  'model', 'messages', 'max_tokens', 'system', 'stop_sequences', 'stream', 'tools', 'tool_choice', 'metadata', 'thinking',
  'output_config', 'service_tier', 'cache_control', 'container', 'diagnostics', 'inference_geo', 'speed',
];
const SAMPLING_KEYS = ['temperature', 'top_p', 'top_k'];
const IMAGE_TYPES = ['image/jpeg', 'image/png', 'image/gif', 'image/webp'];
const BLOCK_KEYS: Record<string, readonly string[]> = {
  text: ['type', 'text', 'cache_control', 'citations'],
  image: ['type', 'source', 'cache_control'],
  document: ['type', 'source', 'title', 'context', 'citations', 'cache_control'],
  tool_use: ['type', 'id', 'name', 'input', 'cache_control'],
  tool_result: ['type', 'tool_use_id', 'content', 'is_error', 'cache_control'],
  thinking: ['type', 'thinking', 'signature'],
  redacted_thinking: ['type', 'data'],
};
const USER_BLOCKS = ['text', 'image', 'document', 'tool_result'];
const ASSISTANT_BLOCKS = ['text', 'tool_use', 'thinking', 'redacted_thinking'];

/** Returns null when the request is acceptable, else the API's error message. */
export function validateMessagesRequest(body: unknown, version: string): string | null {
  try {
    check(body, version);
    return null;
  } catch (e) {
    if (e instanceof Invalid) return e.message;
    throw e;
  }
}

function check(body: unknown, version: string): void {
  if (!isRecord(body)) fail('body: Input should be a valid dictionary');
  const b = body as Json;
  onlyKeys(b, version === '2023-06-01' ? [...BASE_KEYS, ...SAMPLING_KEYS] : BASE_KEYS, '');
  if (typeof b.model !== 'string' || b.model === '') fail('model: Field required');
  if (b.max_tokens === undefined) fail('max_tokens: Field required');
  if (!Number.isInteger(b.max_tokens) || (b.max_tokens as number) < 1) fail('max_tokens: Input should be a valid integer greater than or equal to 1');
  if (b.stream !== undefined && typeof b.stream !== 'boolean') fail('stream: Input should be a valid boolean');
  if (b.temperature !== undefined && (typeof b.temperature !== 'number' || b.temperature < 0 || b.temperature > 1)) fail('temperature: Input should be less than or equal to 1');
  if (b.top_p !== undefined && (typeof b.top_p !== 'number' || b.top_p < 0 || b.top_p > 1)) fail('top_p: Input should be less than or equal to 1');
  checkSystem(b.system);
  if (b.stop_sequences !== undefined && (!Array.isArray(b.stop_sequences) || b.stop_sequences.some((s) => typeof s !== 'string'))) {
    fail('stop_sequences: Input should be a valid list of strings');
  }
  if (b.metadata !== undefined) {
    if (!isRecord(b.metadata)) fail('metadata: Input should be a valid dictionary');
    onlyKeys(b.metadata as Json, ['user_id'], 'metadata');
  }
  if (b.output_config !== undefined) checkOutputConfig(b.output_config);
  const toolNames = checkTools(b.tools);
  if (b.tool_choice !== undefined) checkToolChoice(b.tool_choice, toolNames);
  checkMessages(b.messages);
}

function checkSystem(system: unknown): void {
  if (system === undefined || typeof system === 'string') return;
  if (!Array.isArray(system)) fail('system: Input should be a valid string or list');
  (system as unknown[]).forEach((blk, i) => {
    if (!isRecord(blk) || blk.type !== 'text') fail(`system.${i}.type: Input should be 'text'`);
    onlyKeys(blk as Json, BLOCK_KEYS.text ?? [], `system.${i}`);
    if (str(blk as Json, 'text', `system.${i}`) === '') fail('system: text content blocks must be non-empty');
  });
}

function checkOutputConfig(oc: unknown): void {
  if (!isRecord(oc)) fail('output_config: Input should be a valid dictionary');
  const o = oc as Json;
  onlyKeys(o, ['format', 'effort'], 'output_config');
  if (o.effort !== undefined && !['low', 'medium', 'high', 'xhigh', 'max'].includes(String(o.effort))) fail('output_config.effort: Input should be low, medium, high, xhigh or max');
  if (o.format !== undefined && o.format !== null) {
    if (!isRecord(o.format) || o.format.type !== 'json_schema') fail("output_config.format.type: Input should be 'json_schema'");
    onlyKeys(o.format as Json, ['type', 'schema'], 'output_config.format');
    if (!isRecord((o.format as Json).schema)) fail('output_config.format.schema: Field required');
  }
}

function checkTools(tools: unknown): Set<string> {
  const names = new Set<string>();
  if (tools === undefined) return names;
  if (!Array.isArray(tools)) fail('tools: Input should be a valid list');
  (tools as unknown[]).forEach((t, i) => {
    const at = `tools.${i}`;
    if (!isRecord(t)) fail(`${at}: Input should be a valid dictionary`);
    onlyKeys(t as Json, ['name', 'description', 'input_schema', 'strict', 'cache_control', 'type'], at);
    const name = str(t as Json, 'name', at);
    if (!/^[a-zA-Z0-9_-]{1,128}$/.test(name)) fail(`${at}.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`);
    const schema = (t as Json).input_schema;
    if (!isRecord(schema)) fail(`${at}.input_schema: Field required`);
    if ((schema as Json).type !== 'object') fail(`${at}.input_schema.type: Input should be 'object'`);
    if (names.has(name)) fail('tools: Tool names must be unique.');
    names.add(name);
  });
  return names;
}

function checkToolChoice(tc: unknown, tools: Set<string>): void {
  if (!isRecord(tc)) fail('tool_choice: Input should be a valid dictionary');
  const c = tc as Json;
  if (tools.size === 0) fail('tool_choice: tool_choice may only be specified while providing tools.');
  switch (c.type) {
    case 'auto':
    case 'any':
      onlyKeys(c, ['type', 'disable_parallel_tool_use'], 'tool_choice');
      break;
    case 'none':
      onlyKeys(c, ['type'], 'tool_choice');
      break;
    case 'tool':
      onlyKeys(c, ['type', 'name', 'disable_parallel_tool_use'], 'tool_choice');
      if (!tools.has(str(c, 'name', 'tool_choice'))) fail(`tool_choice.name: tool "${String(c.name)}" is not defined in tools`);
      break;
    default:
      fail("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'");
  }
}

function checkMessages(messages: unknown): void {
  if (!Array.isArray(messages)) fail('messages: Field required');
  const list = messages as unknown[];
  if (list.length === 0) fail('messages: at least one message is required');
  let prevRole: string | undefined;
  let pendingToolUses: string[] = [];
  list.forEach((m, i) => {
    const at = `messages.${i}`;
    if (!isRecord(m)) fail(`${at}: Input should be a valid dictionary`);
    const msg = m as Json;
    onlyKeys(msg, ['role', 'content'], at);
    const role = msg.role;
    if (role === 'system') {
      fail('messages: Unexpected role "system". The Messages API accepts a top-level `system` parameter, not "system" as an input message role.');
    }
    if (role !== 'user' && role !== 'assistant') fail(`${at}.role: Input should be 'user' or 'assistant'`);
    if (role === prevRole) fail(`messages: roles must alternate between "user" and "assistant", but found multiple "${String(role)}" roles in a row`);
    const blocks = typeof msg.content === 'string' ? [{ type: 'text', text: msg.content }] : msg.content;
    if (!Array.isArray(blocks)) fail(`${at}.content: Input should be a valid string or list`);
    if ((blocks as unknown[]).length === 0) fail(`${at}.content: List should have at least 1 item`);
    const toolUses: string[] = [];
    const results: string[] = [];
    let seenOther = false;
    (blocks as unknown[]).forEach((blk, j) => {
      const bat = `${at}.content.${j}`;
      if (!isRecord(blk)) fail(`${bat}: Input should be a valid dictionary`);
      const block = blk as Json;
      const type = String(block.type);
      if (!(role === 'user' ? USER_BLOCKS : ASSISTANT_BLOCKS).includes(type)) fail(`${bat}.type: block type "${type}" is not allowed in ${String(role)} messages`);
      onlyKeys(block, BLOCK_KEYS[type] ?? [], bat);
      if (type === 'text' && str(block, 'text', bat).trim() === '') fail('messages: text content blocks must contain non-whitespace text');
      if (type === 'image') checkImage(block.source, `${bat}.source`);
      if (type === 'tool_use') {
        str(block, 'id', bat);
        str(block, 'name', bat);
        if (!isRecord(block.input)) fail(`${bat}.input: Input should be a valid dictionary`);
        toolUses.push(String(block.id));
      }
      if (type === 'tool_result') {
        const id = str(block, 'tool_use_id', bat);
        if (seenOther) fail(`${at}: tool_result blocks must come first in the user message content, before any other blocks`);
        if (!pendingToolUses.includes(id)) {
          fail(
            `${bat}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`,
          );
        }
        results.push(id);
      } else seenOther = true;
    });
    if (role === 'user' && pendingToolUses.length > 0) {
      const missing = pendingToolUses.filter((id) => !results.includes(id));
      if (missing.length > 0) {
        fail(
          `messages.${i - 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
        );
      }
    }
    pendingToolUses = role === 'assistant' ? toolUses : [];
    prevRole = String(role);
  });
}

function checkImage(source: unknown, at: string): void {
  if (!isRecord(source)) fail(`${at}: Field required`);
  const s = source as Json;
  if (s.type === 'base64') {
    onlyKeys(s, ['type', 'media_type', 'data'], at);
    if (!IMAGE_TYPES.includes(String(s.media_type))) fail(`${at}.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'`);
    if (typeof s.data !== 'string' || !/^[A-Za-z0-9+/]+=*$/.test(s.data)) fail(`${at}.data: invalid base64 data`);
  } else if (s.type === 'url') {
    onlyKeys(s, ['type', 'url'], at);
    if (!/^https?:\/\//.test(String(s.url))) fail(`${at}.url: Input should be a valid URL`);
  } else fail(`${at}.type: Input should be 'base64', 'url' or 'file'`);
}
