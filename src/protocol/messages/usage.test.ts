import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createParser } from 'eventsource-parser';
import { startFakeAnthropic, type FakeAnthropic } from '../../../test/support/fake-anthropic-upstream.ts';
import { isContentEvent, NativeUsageReader, USAGE_EVENTS, usageOf } from './usage.ts';

const USAGE = { input_tokens: 10, cache_read_input_tokens: 50, cache_creation_input_tokens: 30, output_tokens: 7 };
const EXPECTED = { prompt_tokens: 90, completion_tokens: 7, total_tokens: 97, prompt_tokens_details: { cached_tokens: 50, cache_creation_tokens: 30 } };

describe('native Anthropic usage', () => {
  let fake: FakeAnthropic;
  before(async () => {
    fake = await startFakeAnthropic();
  });
  after(() => fake.close());

  const call = (stream: boolean): Promise<Response> =>
    fetch(`${fake.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-api-key': 'k' },
      body: JSON.stringify({ model: 'claude-test-1', max_tokens: 50, stream, messages: [{ role: 'user', content: 'hi there' }] }),
    });

  it('reads a JSON answer: prompt = input + cache read + cache creation, the cache counts kept for cost', async () => {
    fake.enqueue({ kind: 'reply', usage: USAGE });
    const res = await call(false);
    assert.equal(res.status, 200);
    assert.deepEqual(usageOf(await res.json()), EXPECTED);
    assert.equal(usageOf({ id: 'x' }), undefined);
  });

  it('reads a stream from message_start and message_delta (the later report wins), and finds the commit point', async () => {
    fake.enqueue({ kind: 'reply', usage: USAGE, content: [{ type: 'text', text: 'hello world' }] });
    const res = await call(true);
    const reader = new NativeUsageReader();
    const names: string[] = [];
    const parser = createParser({
      onEvent: (e) => {
        names.push(e.event ?? '');
        if (USAGE_EVENTS.has(e.event ?? '')) reader.add(JSON.parse(e.data));
      },
    });
    const decoder = new TextDecoder();
    for await (const bytes of res.body!) parser.feed(decoder.decode(bytes as Uint8Array, { stream: true }));
    // the fake's message_start says output_tokens 1; message_delta's 7 replaces it
    assert.deepEqual(reader.usage, EXPECTED);
    assert.deepEqual(names.slice(0, 3), ['message_start', 'ping', 'content_block_start']);
    assert.equal(names.findIndex((n) => isContentEvent(n)), 2);
    assert.equal(isContentEvent({ type: 'content_block_delta' }), true);
    assert.equal(isContentEvent({ type: 'message_start' }), false);
    assert.equal(isContentEvent('ping'), false);
  });

  it('says nothing until a usage report was seen', () => {
    const r = new NativeUsageReader();
    r.add({ type: 'ping' });
    r.add({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'x' } });
    assert.equal(r.usage, undefined);
    r.add({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 4 } });
    assert.deepEqual(r.usage, { prompt_tokens: 0, completion_tokens: 4, total_tokens: 4, prompt_tokens_details: { cached_tokens: 0, cache_creation_tokens: 0 } });
  });
});
