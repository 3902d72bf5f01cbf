import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { GatewayError } from '../../errors/gateway-error.ts';
import type { ChatCompletionChunk } from '../chat/schema.ts';
import { EventsFromChat, StreamFromChat, printEvent, sse, type MessagesStreamEvent } from './stream.ts';
import { gatewaySignature } from './signature.ts';
import { ChunkPart, PlainHead, type EventPart } from '../stream-part.ts';
import { ContentHead, plainContent } from '../chat/content-text.ts';

type Delta = Record<string, unknown>;
const chunk = (delta: Delta, finish: string | null = null, extra: Record<string, unknown> = {}): ChatCompletionChunk =>
  ({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'b', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish, ...extra }] }) as ChatCompletionChunk;
const usageChunk = (prompt: number, completion: number, cached = 0): ChatCompletionChunk =>
  ({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'b', choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached } } }) as ChatCompletionChunk;

function run(chunks: ChatCompletionChunk[], opts: Partial<ConstructorParameters<typeof EventsFromChat>[0]> = {}): { events: MessagesStreamEvent[]; s: EventsFromChat } {
  const s = new EventsFromChat({ model: 'claude-public', ...opts });
  const events = [...s.start(), ...chunks.flatMap((c) => s.push(c)), ...s.finish()];
  return { events, s };
}

/** Thinking, text, two tool calls (the second's name and arguments split over chunks), usage. */
const TOOLS_SEQUENCE: ChatCompletionChunk[] = [
  chunk({ role: 'assistant', content: '' }),
  chunk({ reasoning_content: 'Need ' }),
  chunk({ reasoning_content: 'weather.' }),
  chunk({ content: 'Checking ' }),
  chunk({ content: 'both.' }),
  chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
  chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { arguments: '{"city"' } }] }),
  chunk({ tool_calls: [{ index: 1, function: { name: 'get_weather', arguments: ':"Rome"}' } }] }),
  chunk({}, 'tool_calls'),
  usageChunk(30, 12, 10),
];

describe('chat chunks → Anthropic stream events', () => {
  it('sends the exact event order for a text answer', () => {
    const { events } = run([chunk({ role: 'assistant', content: '' }), chunk({ content: 'Hel' }), chunk({ content: 'lo' }), chunk({}, 'stop'), usageChunk(9, 2)], {
      inputTokens: 8,
      id: 'msg_chatcmpl-1',
    });
    assert.deepEqual(events, [
      {
        type: 'message_start',
        message: {
          id: 'msg_chatcmpl-1', type: 'message', role: 'assistant', model: 'claude-public', content: [], stop_reason: null, stop_sequence: null,
          stop_details: null, container: null, usage: { input_tokens: 8, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
        },
      },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'lo' } },
      { type: 'content_block_stop', index: 0 },
      {
        type: 'message_delta',
        delta: { stop_reason: 'end_turn', stop_sequence: null, stop_details: null },
        usage: { input_tokens: 9, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      },
      { type: 'message_stop' },
    ]);
  });

  it('closes each block before the next opens: thinking, text, then one tool_use per chat tool call index', () => {
    const { events } = run(TOOLS_SEQUENCE);
    const shape = events.map((e) =>
      e.type === 'content_block_start' ? `start ${e.index} ${e.content_block.type}` : e.type === 'content_block_delta' ? `delta ${e.index} ${e.delta.type}` : e.type === 'content_block_stop' ? `stop ${e.index}` : e.type,
    );
    assert.deepEqual(shape, [
      'message_start',
      'start 0 thinking', 'delta 0 thinking_delta', 'delta 0 thinking_delta', 'delta 0 signature_delta', 'stop 0',
      'start 1 text', 'delta 1 text_delta', 'delta 1 text_delta', 'stop 1',
      'start 2 tool_use', 'delta 2 input_json_delta', 'delta 2 input_json_delta', 'stop 2',
      'start 3 tool_use', 'delta 3 input_json_delta', 'stop 3',
      'message_delta', 'message_stop',
    ]);
    const second = events.find((e) => e.type === 'content_block_start' && e.index === 3);
    assert.deepEqual(second, { type: 'content_block_start', index: 3, content_block: { type: 'tool_use', id: 'call_b', name: 'get_weather', input: {} } });
    // arguments received before the name was known are sent right after the block opens
    assert.deepEqual(events[events.indexOf(second!) + 1], { type: 'content_block_delta', index: 3, delta: { type: 'input_json_delta', partial_json: '{"city":"Rome"}' } });
    const md = events.find((e) => e.type === 'message_delta');
    assert.deepEqual(md, {
      type: 'message_delta',
      delta: { stop_reason: 'tool_use', stop_sequence: null, stop_details: null },
      usage: { input_tokens: 20, output_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 10 },
    });
  });

  it("signs each thinking block: one signature_delta over its whole text right before its content_block_stop", () => {
    const { events } = run([
      chunk({ reasoning_content: 'Need ' }),
      chunk({ reasoning_content: 'weather.' }),
      chunk({ content: 'Checking.' }),
      chunk({ reasoning: 'Second thought.' }),
      chunk({}, 'stop'),
    ]);
    const sig = (text: string): string => `swy1.${createHash('sha256').update(text).digest('base64url')}`;
    assert.deepEqual(events.slice(1, 4), [
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Need ' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'weather.' } },
    ]);
    assert.deepEqual(events.slice(4, 6), [
      { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: sig('Need weather.') } },
      { type: 'content_block_stop', index: 0 },
    ]);
    // the second thinking block is closed by finish(): its own signature, then its stop
    const stop2 = events.findIndex((e) => e.type === 'content_block_stop' && e.index === 2);
    assert.deepEqual(events[stop2 - 1], { type: 'content_block_delta', index: 2, delta: { type: 'signature_delta', signature: sig('Second thought.') } });
    assert.equal(events.filter((e) => e.type === 'content_block_delta' && e.delta.type === 'signature_delta').length, 2);
    assert.equal(sig('Need weather.'), gatewaySignature('Need weather.'));
    assert.match(sig('x'), /^swy1\.[A-Za-z0-9_-]{43}$/);
    // no thinking block, no signature
    assert.ok(!run([chunk({ reasoning_content: 'hidden' }), chunk({ content: 'a' })], { omitThinking: true }).events.some((e) => e.type === 'content_block_delta' && e.delta.type === 'signature_delta'));
  });

  it('drops (with a warning) arguments for a tool call whose block is closed', () => {
    const { events, s } = run([
      chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: '{' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'b', function: { name: 'g', arguments: '{}' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    assert.equal(events.filter((e) => e.type === 'content_block_start').length, 2);
    assert.deepEqual(s.warnings, ['tool call 0: arguments after its block closed were dropped']);
  });

  it('reports stop_sequence when the backend names the match, max_tokens for length, and usage 0 when none came', () => {
    const stopped = run([chunk({ content: 'a' }), chunk({}, 'stop', { stop_reason: 'END' })], { stopSequences: ['END'] }).events.at(-2);
    assert.deepEqual(stopped, { type: 'message_delta', delta: { stop_reason: 'stop_sequence', stop_sequence: 'END', stop_details: null }, usage: { output_tokens: 0 } });
    const long = run([chunk({ content: 'a' }), chunk({}, 'length')]).events.at(-2);
    assert.equal(long?.type === 'message_delta' && long.delta.stop_reason, 'max_tokens');
  });

  it('ends with one error event on fail(), and nothing after it', () => {
    const s = new EventsFromChat({ model: 'm' });
    s.start();
    s.push(chunk({ content: 'partial' }));
    const events = s.fail(new GatewayError('upstream_connection_lost', 'Backend "x" dropped the connection mid-stream.'));
    assert.deepEqual(events, [{ type: 'error', error: { type: 'api_error', message: 'Backend "x" dropped the connection mid-stream.' } }]);
    assert.deepEqual(s.finish(), []);
    assert.deepEqual(s.push(chunk({ content: 'more' })), []);
  });

  it('names the message after the first chunk when push() comes before start()', () => {
    const s = new EventsFromChat({ model: 'm' });
    const [first] = s.push(chunk({ content: 'x' }));
    assert.equal(first?.type === 'message_start' && first.message.id, 'msg_chatcmpl-1');
  });

  it('frames events as Anthropic does', () => {
    assert.equal(sse({ type: 'ping' }), 'event: ping\ndata: {"type":"ping"}\n\n');
  });
});

describe('the translated stream through the real @anthropic-ai/sdk', () => {
  let frames = '';
  let server: http.Server;
  let client: Anthropic;
  before(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.end(frames);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    client = new Anthropic({ apiKey: 'test', baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, maxRetries: 0 });
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  const params = { model: 'claude-public', max_tokens: 100, messages: [{ role: 'user' as const, content: 'weather in Paris and Rome?' }] };

  it('accumulates into the Message a client would get (thinking, text, tool inputs parsed, stop reason, usage)', async () => {
    const s = new EventsFromChat({ model: 'claude-public' });
    frames = [...s.start(), s.ping(), ...TOOLS_SEQUENCE.flatMap((c) => s.push(c)), ...s.finish()].map(sse).join('');
    const msg = await client.messages.stream(params).finalMessage();
    assert.equal(msg.role, 'assistant');
    assert.equal(msg.model, 'claude-public');
    assert.match(msg.id, /^msg_/);
    assert.deepEqual(msg.content, [
      { type: 'thinking', thinking: 'Need weather.', signature: gatewaySignature('Need weather.') },
      { type: 'text', text: 'Checking both.' },
      { type: 'tool_use', id: 'call_a', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'call_b', name: 'get_weather', input: { city: 'Rome' } },
    ]);
    assert.equal(msg.stop_reason, 'tool_use');
    assert.equal(msg.stop_sequence, null);
    assert.equal(msg.usage.input_tokens, 20);
    assert.equal(msg.usage.output_tokens, 12);
    assert.equal(msg.usage.cache_read_input_tokens, 10);
  });

  it('raises the error event as an API error of its type', async () => {
    const s = new EventsFromChat({ model: 'claude-public' });
    frames = [...s.start(), ...s.push(chunk({ content: 'partial' })), ...s.fail(new GatewayError('circuit_open', 'Every target is unavailable.'))]
      .map(sse)
      .join('');
    await assert.rejects(client.messages.stream(params).finalMessage(), (err: unknown) => {
      assert.ok(err instanceof Anthropic.APIError, String(err));
      assert.match(err.message, /overloaded_error/);
      assert.match(err.message, /Every target is unavailable/);
      return true;
    });
  });
});

describe('StreamFromChat: the events as wire parts, a plain token written from its escaped text', () => {
  it('the same events, byte for byte, as the parsed chunks give', () => {
    const chunks = [...TOOLS_SEQUENCE.slice(0, 5), chunk({ content: ' "q" caf\u00e9\n\\' }), ...TOOLS_SEQUENCE.slice(5, -2), chunk({ content: 'after' }), ...TOOLS_SEQUENCE.slice(-2)];
    const slow = run(chunks, { id: 'msg_t' }).events.map((e) => JSON.stringify(e));
    let finished = 0;
    const s = new StreamFromChat(new EventsFromChat({ model: 'claude-public', id: 'msg_t' }), () => finished++);
    const head = new ContentHead();
    const plainHead = new PlainHead();
    const parts: EventPart[] = s.start();
    let byText = 0;
    for (const c of chunks) {
      const t = JSON.stringify(c);
      const part = ChunkPart.plain<ChatCompletionChunk>(t, plainHead);
      if (part && !part.finishes && part.deltaCarries() === false) continue;
      const escaped = part && !part.finishes ? plainContent(t, head) : undefined;
      if (escaped === undefined) parts.push(...s.push(JSON.parse(t) as ChatCompletionChunk));
      else {
        s.text(escaped, parts);
        byText++;
      }
    }
    parts.push(...s.finish({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }));
    assert.deepEqual(parts.map((p) => p.data), slow);
    assert.deepEqual(parts.map((p) => p.event), run(chunks).events.map((e) => e.type));
    assert.equal(byText, 4, 'every text token');
    assert.equal(finished, 1);
    const last = parts.at(-1);
    assert.ok(last?.final && last.event === 'message_stop');
    assert.deepEqual(last.usage, { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
    assert.deepEqual(parts.filter((p) => p.content).map((p) => p.event)[0], 'content_block_start');
  });
});

describe('printEvent', () => {
  it('prints every event exactly as JSON.stringify does', () => {
    const { events } = run([...TOOLS_SEQUENCE.slice(0, 4), chunk({ content: 'a "b"\n' }), ...TOOLS_SEQUENCE.slice(4)]);
    const kinds = new Set<string>();
    for (const e of [...events, new EventsFromChat({ model: 'm' }).ping()]) {
      assert.equal(printEvent(e), JSON.stringify(e));
      kinds.add(`${e.type}:${'content_block' in e ? e.content_block.type : 'delta' in e && 'type' in e.delta ? e.delta.type : ''}`);
    }
    for (const k of ['content_block_start:text', 'content_block_delta:text_delta', 'content_block_delta:signature_delta', 'content_block_stop:', 'message_stop:']) assert.ok(kinds.has(k), k);
  });
});
