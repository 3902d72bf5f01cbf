import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { createParser } from 'eventsource-parser';
import { accumulateResponse } from 'openai/lib/responses/ResponseAccumulator';
import type { ChatCompletionChunk } from '../chat/schema.ts';
import type { ResponseContext } from './from-chat.ts';
import { parseResponsesRequest } from './schema.ts';
import { StreamFromChat } from './stream.ts';
import { ChunkPart, PlainHead, sseText, type EventPart } from '../stream-part.ts';
import { ContentHead, plainContent } from '../chat/content-text.ts';
import { toChat } from './to-chat.ts';
import type { Response, ResponseStreamEvent } from './types.ts';

function ctx(body: Record<string, unknown> = {}): ResponseContext {
  const request = parseResponsesRequest({ model: 'public', input: 'hi', stream: true, ...body });
  return { id: 'resp_s', createdAt: 1700000000, model: 'public', request, names: toChat(request).names };
}

type Delta = Record<string, unknown>;
function chunk(delta: Delta, finish: string | null = null): ChatCompletionChunk {
  return { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'b', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] } as ChatCompletionChunk;
}
const usageChunk = (p: number, c: number): ChatCompletionChunk =>
  ({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'b', choices: [], usage: { prompt_tokens: p, completion_tokens: c, total_tokens: p + c } }) as ChatCompletionChunk;

/** The events as the client reads them (the parts' JSON). */
const read = (parts: EventPart[]): ResponseStreamEvent[] =>
  parts.map((p) => {
    const ev = JSON.parse(p.data) as ResponseStreamEvent;
    assert.equal(p.event, ev.type, 'the part is named as its event');
    return ev;
  });

function run(chunks: ChatCompletionChunk[], c = ctx()): { events: ResponseStreamEvent[]; parts: EventPart[]; s: StreamFromChat } {
  const s = new StreamFromChat(c);
  const parts = [...s.start()];
  for (const ch of chunks) parts.push(...s.push(ch));
  parts.push(...s.finish());
  return { events: read(parts), parts, s };
}

/** Checks sequence numbers and that the SDK's own accumulator rebuilds the final response from the events. */
function checkWithSdk(events: ResponseStreamEvent[]): Response {
  events.forEach((e, i) => assert.equal(e.sequence_number, i, `sequence_number of event ${i} (${e.type})`));
  let snap: Response | undefined;
  for (const e of events) snap = accumulateResponse(e, snap);
  const last = events[events.length - 1];
  assert.ok(last && 'response' in last);
  assert.ok(snap);
  // Every item the deltas built equals the item the terminal event carries.
  assert.deepEqual(events.filter((e) => e.type === 'response.output_item.done').map((e) => (e as { item: unknown }).item), last.response.output);
  return last.response;
}

const types = (events: ResponseStreamEvent[]) => events.map((e) => e.type.replace(/^response\./, ''));

describe('StreamFromChat', () => {
  it('a text answer: OpenAI event order, deltas, completed with usage', () => {
    const { events } = run([chunk({ role: 'assistant', content: '' }), chunk({ content: 'Hel' }), chunk({ content: 'lo' }), chunk({}, 'stop'), usageChunk(7, 2)]);
    assert.deepEqual(types(events), [
      'created', 'in_progress', 'output_item.added', 'content_part.added', 'output_text.delta', 'output_text.delta',
      'output_text.done', 'content_part.done', 'output_item.done', 'completed',
    ]);
    const created = events[0];
    assert.ok(created?.type === 'response.created');
    assert.equal(created.response.status, 'in_progress');
    assert.deepEqual(created.response.output, []);
    assert.equal(created.response.usage, null);
    const delta = events[4];
    assert.ok(delta?.type === 'response.output_text.delta');
    assert.match(delta.item_id, /^msg_/);
    assert.deepEqual({ ...delta, item_id: 'x' }, { type: 'response.output_text.delta', sequence_number: 4, item_id: 'x', output_index: 0, content_index: 0, delta: 'Hel', logprobs: [] });
    const res = checkWithSdk(events);
    assert.equal(res.status, 'completed');
    assert.equal(typeof res.completed_at, 'number');
    assert.deepEqual(res.usage, { input_tokens: 7, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 9 });
    const msg = res.output[0];
    assert.ok(msg?.type === 'message');
    assert.equal(msg.status, 'completed');
    assert.deepEqual(msg.content, [{ type: 'output_text', annotations: [], logprobs: [], text: 'Hello' }]);
  });

  it('reasoning, then text, then two tool calls by index (one namespaced, arguments in pieces)', () => {
    const c = ctx({ tools: [{ type: 'function', name: 'get_weather' }, { type: 'namespace', name: 'fs', description: '', tools: [{ type: 'function', name: 'read' }] }] });
    const { events } = run(
      [
        chunk({ role: 'assistant', reasoning_content: 'Think' }),
        chunk({ reasoning_content: 'ing' }),
        chunk({ content: 'Checking.' }),
        chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
        chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'fs__read', arguments: '{}' } }] }),
        chunk({}, 'tool_calls'),
      ],
      c,
    );
    assert.deepEqual(types(events), [
      'created', 'in_progress',
      'output_item.added', 'reasoning_summary_part.added', 'reasoning_summary_text.delta', 'reasoning_summary_text.delta',
      'reasoning_summary_text.done', 'reasoning_summary_part.done', 'output_item.done',
      'output_item.added', 'content_part.added', 'output_text.delta', 'output_text.done', 'content_part.done', 'output_item.done',
      'output_item.added', 'function_call_arguments.delta', 'function_call_arguments.delta', 'function_call_arguments.done', 'output_item.done',
      'output_item.added', 'function_call_arguments.delta', 'function_call_arguments.done', 'output_item.done',
      'completed',
    ]);
    const res = checkWithSdk(events);
    assert.deepEqual(res.output.map((o) => o.type), ['reasoning', 'message', 'function_call', 'function_call']);
    const [rs, , a, b] = res.output;
    assert.ok(rs?.type === 'reasoning' && a?.type === 'function_call' && b?.type === 'function_call');
    assert.deepEqual(rs.summary, [{ type: 'summary_text', text: 'Thinking' }]);
    assert.deepEqual({ ...a, id: 'x' }, { id: 'x', type: 'function_call', status: 'completed', arguments: '{"city":"Paris"}', call_id: 'call_a', name: 'get_weather' });
    assert.deepEqual({ ...b, id: 'x' }, { id: 'x', type: 'function_call', status: 'completed', arguments: '{}', call_id: 'call_b', name: 'read', namespace: 'fs' });
    const added = events.find((e) => e.type === 'response.output_item.added' && e.output_index === 3);
    assert.ok(added?.type === 'response.output_item.added');
    assert.deepEqual({ ...added.item, id: 'x' }, { id: 'x', type: 'function_call', status: 'in_progress', arguments: '', call_id: 'call_b', name: 'read', namespace: 'fs' });
    const done = events.find((e) => e.type === 'response.function_call_arguments.done' && e.output_index === 2);
    assert.ok(done?.type === 'response.function_call_arguments.done');
    assert.equal(done.arguments, '{"city":"Paris"}');
    assert.equal(done.name, 'get_weather');
  });

  it('a custom tool call streams custom_tool_call_input events', () => {
    const { events } = run([chunk({ tool_calls: [{ index: 0, id: 'call_p', type: 'custom', custom: { name: 'apply_patch', input: '*** Begin' } }] }), chunk({ tool_calls: [{ index: 0, custom: { input: ' Patch' } }] }), chunk({}, 'tool_calls')]);
    assert.deepEqual(types(events).slice(2), ['output_item.added', 'custom_tool_call_input.delta', 'custom_tool_call_input.delta', 'custom_tool_call_input.done', 'output_item.done', 'completed']);
    const res = checkWithSdk(events);
    const call = res.output[0];
    assert.ok(call?.type === 'custom_tool_call');
    assert.equal(call.input, '*** Begin Patch');
    assert.equal(call.call_id, 'call_p');
  });

  it('an empty answer is one empty message; a refusal is its own part', () => {
    const empty = run([chunk({ role: 'assistant', content: '' }), chunk({}, 'stop')]);
    assert.deepEqual(types(empty.events).slice(2), ['output_item.added', 'content_part.added', 'output_text.done', 'content_part.done', 'output_item.done', 'completed']);
    const m = checkWithSdk(empty.events).output[0];
    assert.ok(m?.type === 'message');
    assert.deepEqual(m.content, [{ type: 'output_text', annotations: [], logprobs: [], text: '' }]);

    const refusal = run([chunk({ refusal: 'No' }), chunk({ refusal: '.' }), chunk({}, 'stop')]);
    assert.deepEqual(types(refusal.events).slice(2), ['output_item.added', 'content_part.added', 'refusal.delta', 'refusal.delta', 'refusal.done', 'content_part.done', 'output_item.done', 'completed']);
    const r = checkWithSdk(refusal.events).output[0];
    assert.ok(r?.type === 'message');
    assert.deepEqual(r.content, [{ type: 'refusal', refusal: 'No.' }]);
  });

  it('finish_reason length → response.incomplete, the open item incomplete', () => {
    const { events } = run([chunk({ content: 'Once' }), chunk({}, 'length')], ctx({ max_output_tokens: 1 }));
    const last = events[events.length - 1];
    assert.equal(last?.type, 'response.incomplete');
    const res = checkWithSdk(events);
    assert.equal(res.status, 'incomplete');
    assert.deepEqual(res.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(res.output[0]?.type === 'message' && res.output[0].status, 'incomplete');
  });

  it('committed turns true with the first output item, not with role-only chunks', () => {
    const s = new StreamFromChat(ctx());
    s.start();
    assert.deepEqual(s.push(chunk({ role: 'assistant', content: '' })), []);
    assert.equal(s.committed, false);
    assert.equal(s.push(chunk({ content: 'x' })).length, 3);
    assert.equal(s.committed, true);
  });

  it('fail before the commit point → response.failed; after it → an error event; nothing after either', () => {
    const before = new StreamFromChat(ctx());
    const ev = read([...before.start(), ...before.fail({ message: 'upstream down', code: 'server_error' })]);
    assert.deepEqual(types(ev), ['created', 'in_progress', 'failed']);
    const failed = ev[2];
    assert.ok(failed?.type === 'response.failed');
    assert.equal(failed.response.status, 'failed');
    assert.deepEqual(failed.response.error, { code: 'server_error', message: 'upstream down' });
    assert.deepEqual(before.finish(), []);

    const after = new StreamFromChat(ctx());
    const ev2 = read([...after.start(), ...after.push(chunk({ content: 'par' })), ...after.fail({ message: 'cut' })]);
    const err = ev2[ev2.length - 1];
    assert.deepEqual(err, { type: 'error', sequence_number: ev2.length - 1, code: 'server_error', message: 'cut', param: null });
    assert.deepEqual(after.push(chunk({ content: 'more' })), []);
  });

  it('sseText(): event and data lines that an SSE parser reads back', () => {
    const { events, parts } = run([chunk({ content: 'a\nb' }), chunk({}, 'stop')]);
    const text = parts.map(sseText).join('');
    assert.ok(text.startsWith('event: response.created\ndata: {"type":"response.created","sequence_number":0,'));
    assert.equal(text.includes('[DONE]'), false);
    const seen: Array<{ event: string | undefined; data: unknown }> = [];
    const parser = createParser({ onEvent: (m) => seen.push({ event: m.event, data: JSON.parse(m.data) }) });
    parser.feed(text);
    assert.deepEqual(seen.map((s) => s.data), JSON.parse(JSON.stringify(events)));
    assert.deepEqual(seen.map((s) => s.event), events.map((e) => e.type));
  });
});

describe('StreamFromChat.text: a plain token written from its escaped text', () => {
  /** The parts of a stream, each chunk given as the gateway gives it (gateway/ingress.ts). */
  function byText(texts: string[], c = ctx()): { parts: EventPart[]; byText: number } {
    const s = new StreamFromChat(c);
    const head = new ContentHead();
    const plainHead = new PlainHead();
    const parts = [...s.start()];
    let n = 0;
    for (const t of texts) {
      const part = ChunkPart.plain<ChatCompletionChunk>(t, plainHead);
      if (part && !part.finishes && part.deltaCarries() === false) continue;
      const escaped = part && !part.finishes ? plainContent(t, head) : undefined;
      if (escaped === undefined) parts.push(...s.push(JSON.parse(t) as ChatCompletionChunk));
      else {
        s.text(escaped, parts);
        n++;
      }
    }
    parts.push(...s.finish());
    return { parts, byText: n };
  }
  const sameIds = (parts: EventPart[]): string[] => parts.map((p) => p.data.replace(/"(msg|rs|fc)_[0-9a-f]{48}"/g, '"$1_id"').replace(/"(completed_at)":\d+/g, '"$1":0'));

  it('the same events, byte for byte, as the parsed chunks give; the text decoded once at the end', () => {
    const tokens = ['Hel', 'lo "you"', ' caf\u00e9\n', '\u{1F600}', ' \\ end'];
    const chunks = [chunk({ role: 'assistant', content: '' }), ...tokens.map((t) => chunk({ content: t })), chunk({}, 'stop'), usageChunk(5, 5)];
    const fast = byText(chunks.map((ch) => JSON.stringify(ch)));
    const { parts: slow } = run(chunks);
    assert.deepEqual(sameIds(fast.parts), sameIds(slow));
    assert.equal(fast.byText, tokens.length, 'every token went by text()');
    const res = checkWithSdk(read(fast.parts));
    const msg = res.output[0];
    assert.ok(msg?.type === 'message');
    assert.deepEqual(msg.content, [{ type: 'output_text', annotations: [], logprobs: [], text: tokens.join('') }]);
    const deltas = fast.parts.filter((p) => p.event === 'response.output_text.delta');
    assert.equal(deltas.length, tokens.length);
    assert.ok(deltas.every((p) => p.content && !p.final));
  });

  it('the first token of a message with JSON escapes or %XX comes back as sent (a regression: it was URL-decoded)', () => {
    const tokens = ['50%41 "off" \\ \n', ' then %41', 'tail \u2028'];
    const chunks = [chunk({ role: 'assistant', content: '' }), ...tokens.map((t) => chunk({ content: t })), chunk({}, 'stop')];
    const fast = byText(chunks.map((ch) => JSON.stringify(ch)));
    assert.equal(fast.byText, tokens.length);
    const events = read(fast.parts);
    const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => (e as { delta: string }).delta);
    assert.deepEqual(deltas, tokens);
    const done = events.find((e) => e.type === 'response.output_text.done') as { text: string } | undefined;
    assert.equal(done?.text, tokens.join(''));
    const res = checkWithSdk(events);
    assert.deepEqual(res.output[0]?.type === 'message' ? res.output[0].content : undefined, [{ type: 'output_text', annotations: [], logprobs: [], text: tokens.join('') }]);
  });

  it('any text, in any split into tokens: the text path gives the parsed path events, the text exact', () => {
    // lone surrogates cannot cross JSON over UTF-8 and are left out
    const nasty = fc.constantFrom('"', '\\', '\n', '\r', '\t', '\u0000', '\u001f', '\u2028', '%41', '%', '\\u0041', 'data: ', '\n\ndata: [DONE]\n\n', '{"a":1}', '\u{1F600}', 'e\u0301', '\uFEFF');
    const token = fc.array(fc.oneof(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }), fc.string({ unit: 'binary', minLength: 1, maxLength: 6 }), nasty), { minLength: 1, maxLength: 3 }).map((a) => a.join(''));
    fc.assert(
      fc.property(fc.array(token, { minLength: 1, maxLength: 8 }), (tokens) => {
        const chunks = [chunk({ role: 'assistant', content: '' }), ...tokens.map((t) => chunk({ content: t })), chunk({}, 'stop'), usageChunk(3, tokens.length)];
        const fast = byText(chunks.map((ch) => JSON.stringify(ch)));
        assert.deepEqual(sameIds(fast.parts), sameIds(run(chunks).parts));
        const events = read(fast.parts);
        assert.deepEqual(events.filter((e) => e.type === 'response.output_text.delta').map((e) => (e as { delta: string }).delta), tokens);
        const res = checkWithSdk(events);
        const msg = res.output[0];
        assert.ok(msg?.type === 'message');
        assert.deepEqual(msg.content, [{ type: 'output_text', annotations: [], logprobs: [], text: tokens.join('') }]);
      }),
      { seed: 33, numRuns: 300 },
    );
  });

  it('a token after reasoning, after a refusal, after a tool call opens its part as push() would', () => {
    const chunks = [
      chunk({ role: 'assistant', reasoning_content: 'think' }),
      chunk({ content: 'a' }),
      chunk({ refusal: 'no' }),
      chunk({ content: 'b' }),
      chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'f', arguments: '{}' } }] }),
      chunk({ content: 'c' }),
      chunk({}, 'stop'),
    ];
    const fast = byText(chunks.map((ch) => JSON.stringify(ch)));
    assert.equal(fast.byText, 3);
    assert.deepEqual(sameIds(fast.parts), sameIds(run(chunks).parts));
    const res = checkWithSdk(read(fast.parts));
    assert.deepEqual(res.output.map((o) => o.type), ['reasoning', 'message', 'function_call', 'message']);
  });
});
