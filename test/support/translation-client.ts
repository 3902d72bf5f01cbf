/**
 * The client side of the translation properties: what a client receives, read from the raw HTTP
 * answer (JSON, or SSE parsed with eventsource-parser from the body decoded as strict UTF-8) into
 * `Observed`: every place the answer's text, reasoning, tool calls, usage and stop reason can be
 * read, each under a name for assertion messages.
 */
import assert from 'node:assert/strict';
import { createParser } from 'eventsource-parser';

export type Json = Record<string, unknown>;

export interface SeenTool {
  id: string | undefined;
  name: string;
  /** the arguments' JSON text (a Messages `input` object printed) */
  args: string;
}

/** Usage in the chat sense (prompt tokens include cached and written); absent fields unset. */
export interface SeenUsage {
  input?: number | undefined;
  /** Messages only: `input_tokens`, the prompt tokens neither read from nor written to the cache */
  uncached?: number | undefined;
  output?: number | undefined;
  total?: number | undefined;
  cached?: number | undefined;
  written?: number | undefined;
}

export interface Observed {
  texts: Array<[where: string, text: string]>;
  /** the reasoning text: chat `reasoning_content`, a Responses reasoning summary, a thinking block */
  reasonings: Array<[where: string, text: string]>;
  /** Messages thinking blocks: their text and signature */
  signatures: Array<[where: string, thinking: string, signature: string]>;
  tools: Array<[where: string, calls: SeenTool[]]>;
  usages: Array<[where: string, usage: SeenUsage]>;
  stops: Array<[where: string, stop: unknown]>;
  /** Responses: the id to read the stored response by */
  responseId?: string;
  /** Messages streams: message_start's usage.input_tokens */
  startInput?: number;
}

export const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const rec = (v: unknown, what: string): Json => {
  assert.ok(isRecord(v), `${what} is an object: ${JSON.stringify(v)}`);
  return v;
};
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export function emptyObserved(): Observed {
  return { texts: [], reasonings: [], signatures: [], tools: [], usages: [], stops: [] };
}


export interface SseEvent {
  event: string | undefined;
  data: string;
}

/** The body as strict UTF-8 (a broken sequence throws). */
export async function bodyText(res: Response): Promise<string> {
  return new TextDecoder('utf-8', { fatal: true }).decode(await res.arrayBuffer());
}

export function parseSse(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  const parser = createParser({ onEvent: (e) => events.push({ event: e.event, data: e.data }) });
  parser.feed(text);
  return events;
}

// ---------------------------------------------------------------------------
// Chat Completions and Completions

function chatUsage(u: unknown): SeenUsage {
  const r = rec(u, 'usage');
  const details = isRecord(r['prompt_tokens_details']) ? r['prompt_tokens_details'] : {};
  return { input: num(r['prompt_tokens']), output: num(r['completion_tokens']), total: num(r['total_tokens']), cached: num(details['cached_tokens']) ?? 0 };
}

function chatTools(calls: unknown): SeenTool[] {
  return arr(calls).map((c) => {
    const r = rec(c, 'tool call');
    const f = rec(r['function'], 'tool call function');
    return { id: typeof r['id'] === 'string' ? r['id'] : undefined, name: str(f['name']), args: str(f['arguments']) };
  });
}

export function readChatJson(ingress: 'chat' | 'completions', body: Json, o: Observed): void {
  const choice = rec(arr(body['choices'])[0], 'choices[0]');
  if (ingress === 'chat') {
    const m = rec(choice['message'], 'message');
    o.texts.push(['message.content', str(m['content'])]);
    o.reasonings.push(['message.reasoning_content', str(m['reasoning_content'] ?? m['reasoning'])]);
    o.tools.push(['message.tool_calls', chatTools(m['tool_calls'])]);
  } else {
    o.texts.push(['choices[0].text', str(choice['text'])]);
  }
  o.stops.push(['finish_reason', choice['finish_reason']]);
  o.usages.push(['usage', chatUsage(body['usage'])]);
}

export function readChatStream(ingress: 'chat' | 'completions', events: SseEvent[], o: Observed): void {
  assert.equal(events.at(-1)?.data, '[DONE]', 'the stream ends with data: [DONE]');
  let text = '';
  let reasoning = '';
  let stop: unknown;
  const calls: SeenTool[] = [];
  for (const e of events.slice(0, -1)) {
    const c = rec(JSON.parse(e.data), 'chunk');
    assert.equal(c['error'], undefined, `an error event: ${e.data}`);
    if (c['usage'] !== null && c['usage'] !== undefined) o.usages.push(['usage chunk', chatUsage(c['usage'])]);
    for (const ch of arr(c['choices'])) {
      const choice = rec(ch, 'choice');
      if (choice['finish_reason'] !== null && choice['finish_reason'] !== undefined) stop = choice['finish_reason'];
      if (ingress === 'completions') {
        text += str(choice['text']);
        continue;
      }
      const delta = rec(choice['delta'], 'delta');
      text += str(delta['content']);
      reasoning += str(delta['reasoning_content'] ?? delta['reasoning']);
      for (const tc of arr(delta['tool_calls'])) {
        const t = rec(tc, 'tool call delta');
        const i = num(t['index']) ?? 0;
        const f = isRecord(t['function']) ? t['function'] : {};
        const seen = (calls[i] ??= { id: undefined, name: '', args: '' });
        if (typeof t['id'] === 'string') seen.id = t['id'];
        seen.name += str(f['name']);
        seen.args += str(f['arguments']);
      }
    }
  }
  o.texts.push(['content deltas', text]);
  if (ingress === 'chat') o.reasonings.push(['reasoning_content deltas', reasoning]);
  o.tools.push(['tool_calls deltas', calls]);
  o.stops.push(['finish_reason', stop]);
}

// ---------------------------------------------------------------------------
// Responses

/** The text, function calls, usage and status of a Response object. */
export function readResponse(where: string, r: Json, o: Observed): void {
  let text = '';
  let reasoning = '';
  const calls: SeenTool[] = [];
  for (const it of arr(r['output'])) {
    const item = rec(it, 'output item');
    if (item['type'] === 'reasoning') for (const part of arr(item['summary'])) reasoning += str(rec(part, 'summary part')['text']);
    if (item['type'] === 'message') for (const part of arr(item['content'])) text += str(rec(part, 'content part')['text']);
    if (item['type'] === 'function_call') calls.push({ id: str(item['call_id']), name: str(item['name']), args: str(item['arguments']) });
  }
  o.texts.push([where, text]);
  o.reasonings.push([where, reasoning]);
  o.tools.push([where, calls]);
  o.stops.push([`${where} status`, r['status']]);
  const u = rec(r['usage'], `${where} usage`);
  const details = isRecord(u['input_tokens_details']) ? u['input_tokens_details'] : {};
  o.usages.push([where, { input: num(u['input_tokens']), output: num(u['output_tokens']), total: num(u['total_tokens']), cached: num(details['cached_tokens']) ?? 0 }]);
  o.responseId = str(r['id']);
}

export function readResponsesStream(events: SseEvent[], o: Observed): void {
  let deltas = '';
  let done = '';
  let itemText = '';
  let summaryDeltas = '';
  let summaryDone = '';
  let itemSummary = '';
  const itemCalls: SeenTool[] = [];
  const byItem = new Map<string, SeenTool>();
  const doneArgs = new Map<string, string>();
  let terminal: Json | undefined;
  events.forEach((e, i) => {
    const d = rec(JSON.parse(e.data), 'event');
    assert.equal(d['type'], e.event, 'the event line names the data type');
    assert.equal(d['sequence_number'], i, 'sequence numbers rise by one from 0');
    switch (d['type']) {
      case 'error':
      case 'response.failed':
        assert.fail(`an error event: ${e.data}`);
        break;
      case 'response.output_text.delta':
        deltas += str(d['delta']);
        break;
      case 'response.output_text.done':
        done += str(d['text']);
        break;
      case 'response.reasoning_summary_text.delta':
        summaryDeltas += str(d['delta']);
        break;
      case 'response.reasoning_summary_text.done':
        summaryDone += str(d['text']);
        break;
      case 'response.output_item.added': {
        const item = rec(d['item'], 'item');
        if (item['type'] === 'function_call') byItem.set(str(item['id']), { id: str(item['call_id']), name: str(item['name']), args: '' });
        break;
      }
      case 'response.function_call_arguments.delta': {
        const seen = byItem.get(str(d['item_id']));
        assert.ok(seen, `arguments delta for an item never added: ${e.data}`);
        seen.args += str(d['delta']);
        break;
      }
      case 'response.function_call_arguments.done':
        doneArgs.set(str(d['item_id']), str(d['arguments']));
        break;
      case 'response.output_item.done': {
        const item = rec(d['item'], 'item');
        if (item['type'] === 'message') for (const part of arr(item['content'])) itemText += str(rec(part, 'part')['text']);
        if (item['type'] === 'reasoning') for (const part of arr(item['summary'])) itemSummary += str(rec(part, 'summary part')['text']);
        if (item['type'] === 'function_call') itemCalls.push({ id: str(item['call_id']), name: str(item['name']), args: str(item['arguments']) });
        break;
      }
      case 'response.completed':
      case 'response.incomplete':
        terminal = rec(d['response'], 'response');
        break;
      default:
        break;
    }
  });
  o.texts.push(['output_text deltas', deltas], ['output_text.done', done], ['output_item.done', itemText]);
  o.reasonings.push(['reasoning_summary_text deltas', summaryDeltas], ['reasoning_summary_text.done', summaryDone], ['output_item.done', itemSummary]);
  const streamed = [...byItem.entries()];
  o.tools.push(['arguments deltas', streamed.map(([, t]) => t)]);
  o.tools.push(['function_call_arguments.done', streamed.map(([id, t]) => ({ ...t, args: doneArgs.get(id) ?? '<none>' }))]);
  o.tools.push(['output_item.done', itemCalls]);
  assert.ok(terminal, 'the stream ends with response.completed or response.incomplete');
  readResponse('response.completed', terminal, o);
}

// ---------------------------------------------------------------------------
// Messages

function messagesUsage(u: unknown): SeenUsage {
  const r = rec(u, 'usage');
  const uncached = num(r['input_tokens']);
  const cached = num(r['cache_read_input_tokens']);
  const written = num(r['cache_creation_input_tokens']);
  return { uncached, cached, written, output: num(r['output_tokens']) };
}

export function readMessage(where: string, m: Json, o: Observed): void {
  let text = '';
  let thinking = '';
  const calls: SeenTool[] = [];
  for (const b of arr(m['content'])) {
    const block = rec(b, 'content block');
    if (block['type'] === 'text') text += str(block['text']);
    if (block['type'] === 'thinking') {
      thinking += str(block['thinking']);
      o.signatures.push([where, str(block['thinking']), str(block['signature'])]);
    }
    if (block['type'] === 'tool_use') calls.push({ id: str(block['id']), name: str(block['name']), args: JSON.stringify(block['input']) });
  }
  o.texts.push([where, text]);
  o.reasonings.push([where, thinking]);
  o.tools.push([where, calls]);
  o.stops.push([`${where} stop_reason`, m['stop_reason']]);
  o.usages.push([where, { ...messagesUsage(m['usage']), cached: num(rec(m['usage'], 'usage')['cache_read_input_tokens']) ?? 0, written: num(rec(m['usage'], 'usage')['cache_creation_input_tokens']) ?? 0 }]);
}

export function readMessagesStream(events: SseEvent[], o: Observed): void {
  let text = '';
  let thinking = '';
  const thinkingBlocks = new Map<number, { thinking: string; signature: string }>();
  const calls = new Map<number, SeenTool>();
  let stop: unknown;
  let stopped = false;
  for (const e of events) {
    const d = rec(JSON.parse(e.data), 'event');
    assert.equal(d['type'], e.event, 'the event line names the data type');
    switch (d['type']) {
      case 'error':
        assert.fail(`an error event: ${e.data}`);
        break;
      case 'message_start': {
        const u = messagesUsage(rec(d['message'], 'message')['usage']);
        o.startInput = u.uncached;
        break;
      }
      case 'content_block_start': {
        const b = rec(d['content_block'], 'content_block');
        if (b['type'] === 'text') text += str(b['text']);
        if (b['type'] === 'thinking') thinkingBlocks.set(num(d['index']) ?? -1, { thinking: str(b['thinking']), signature: str(b['signature']) });
        if (b['type'] === 'tool_use') calls.set(num(d['index']) ?? -1, { id: str(b['id']), name: str(b['name']), args: '' });
        break;
      }
      case 'content_block_delta': {
        const delta = rec(d['delta'], 'delta');
        if (delta['type'] === 'text_delta') text += str(delta['text']);
        const block = thinkingBlocks.get(num(d['index']) ?? -1);
        if (delta['type'] === 'thinking_delta' && block) block.thinking += str(delta['thinking']);
        if (delta['type'] === 'signature_delta' && block) block.signature += str(delta['signature']);
        if (delta['type'] === 'input_json_delta') {
          const seen = calls.get(num(d['index']) ?? -1);
          assert.ok(seen, `input_json_delta for a block that is no tool_use: ${e.data}`);
          seen.args += str(delta['partial_json']);
        }
        break;
      }
      case 'message_delta':
        stop = rec(d['delta'], 'delta')['stop_reason'];
        o.usages.push(['message_delta usage', messagesUsage(d['usage'])]);
        break;
      case 'message_stop':
        stopped = true;
        break;
      default:
        break;
    }
  }
  assert.ok(stopped, 'the stream ends with message_stop');
  o.texts.push(['text deltas', text]);
  for (const b of thinkingBlocks.values()) {
    thinking += b.thinking;
    o.signatures.push(['thinking block deltas', b.thinking, b.signature]);
  }
  o.reasonings.push(['thinking deltas', thinking]);
  o.tools.push(['input_json deltas', [...calls.values()]]);
  o.stops.push(['message_delta stop_reason', stop]);
}
