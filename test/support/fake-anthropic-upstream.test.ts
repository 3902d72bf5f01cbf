/**
 * The fake Anthropic upstream checked against the official `@anthropic-ai/sdk` (so it speaks the
 * protocol the SDK expects) and raw HTTP (so its strictness is what the tests rely on).
 */
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startFakeAnthropic, type FakeAnthropic } from './fake-anthropic-upstream.ts';

const KEY = 'sk-ant-fake-test-key';

describe('fake Anthropic upstream', () => {
  let fake: FakeAnthropic;
  let sdk: Anthropic;

  const post = async (body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown> }> => {
    const res = await fetch(`${fake.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY, 'anthropic-version': '2026-10-21', ...headers },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };
  const rejects = async (body: Record<string, unknown>, pattern: RegExp, headers: Record<string, string> = {}): Promise<void> => {
    const r = await post({ model: 'm', max_tokens: 10, ...body }, headers);
    assert.equal(r.status, 400, JSON.stringify(r.json));
    assert.equal(r.json['type'], 'error');
    const err = r.json['error'] as { type: string; message: string };
    assert.equal(err.type, 'invalid_request_error');
    assert.match(err.message, pattern);
  };
  const hi = { role: 'user', content: 'hi' };
  const toolTurn = { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'f', input: {} }] };

  before(async () => {
    fake = await startFakeAnthropic({ apiKey: KEY });
    sdk = new Anthropic({ apiKey: KEY, baseURL: fake.url, maxRetries: 0, logLevel: 'off', openTelemetry: false });
  });
  after(() => fake.close());
  beforeEach(() => fake.reset());

  test('answers the SDK (non-streaming) with a Message', async () => {
    const m = await sdk.messages.create({ model: 'claude-test', max_tokens: 20, messages: [{ role: 'user', content: 'hello' }] });
    assert.equal(m.type, 'message');
    assert.deepEqual(m.content, [{ type: 'text', text: 'echo: hello' }]);
    assert.equal(m.stop_reason, 'end_turn');
    assert.equal(m.usage.input_tokens, 1);
    assert.equal(fake.requests[0]?.headers['authorization'], `Bearer ${KEY}`);
  });

  test('streams the real event sequence, tool use included', async () => {
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'a b' }, { type: 'tool_use', id: 'toolu_9', name: 'f', input: { x: 1 } }] });
    const s = await sdk.messages.create({ model: 'm', max_tokens: 20, messages: [{ role: 'user', content: 'go' }], stream: true });
    const types: string[] = [];
    let json = '';
    for await (const ev of s) {
      types.push(ev.type === 'content_block_delta' ? `delta:${ev.delta.type}` : ev.type);
      if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta') json += ev.delta.partial_json;
    }
    assert.deepEqual(types.filter((t, i) => t !== types[i - 1]), [
      'message_start',
      'content_block_start',
      'delta:text_delta',
      'content_block_stop',
      'content_block_start',
      'delta:input_json_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    assert.deepEqual(JSON.parse(json), { x: 1 });
  });

  test('an error event mid-stream makes the SDK iteration throw', async () => {
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'a b c d' }], errorAfter: { deltas: 1, type: 'overloaded_error', message: 'Overloaded' } });
    const s = await sdk.messages.create({ model: 'm', max_tokens: 20, messages: [{ role: 'user', content: 'go' }], stream: true });
    await assert.rejects(
      (async () => {
        for await (const _ of s) {
          // drain
        }
      })(),
      (e: unknown) => e instanceof Anthropic.APIError && e.type === 'overloaded_error',
    );
  });

  test('errors use the API body and status, headers included', async () => {
    fake.enqueue({ kind: 'error', status: 429, type: 'rate_limit_error', message: 'slow down', headers: { 'retry-after': '3' } });
    await assert.rejects(sdk.messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => {
      assert.ok(e instanceof Anthropic.RateLimitError);
      assert.equal(e.headers.get('retry-after'), '3');
      assert.equal(e.apiMessage, 'slow down');
      return true;
    });
  });

  test('auth and version headers are required', async () => {
    const r = await post({ model: 'm', max_tokens: 1, messages: [hi] }, { 'x-api-key': 'wrong' });
    assert.equal(r.status, 401);
    assert.equal((r.json['error'] as { type: string }).type, 'authentication_error');
    await rejects({ messages: [hi] }, /anthropic-version/, { 'anthropic-version': '1999-01-01' });
  });

  test('is strict: max_tokens, system role, alternation, tool pairing, unknown fields, sampling by version', async () => {
    const r = await post({ model: 'm', messages: [hi] });
    assert.equal(r.status, 400);
    assert.match((r.json['error'] as { message: string }).message, /max_tokens: Field required/);
    await rejects({ messages: [{ role: 'system', content: 's' }, hi] }, /Unexpected role "system"/);
    await rejects({ messages: [hi, hi] }, /roles must alternate/);
    await rejects({ messages: [hi, { role: 'assistant', content: 'a' }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1' }] }] }, /unexpected `tool_use_id`/);
    await rejects({ messages: [hi, toolTurn, hi] }, /without `tool_result` blocks/);
    await rejects(
      { messages: [hi, toolTurn, { role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'tool_result', tool_use_id: 'toolu_1' }] }] },
      /must come first/,
    );
    await rejects({ messages: [hi], frequency_penalty: 0 }, /frequency_penalty: Extra inputs are not permitted/);
    await rejects({ messages: [{ role: 'user', content: [{ type: 'text', text: 'x', name: 'n' }] }] }, /messages\.0\.content\.0\.name: Extra inputs/);
    await rejects({ messages: [{ role: 'user', content: [{ type: 'text', text: '' }] }] }, /non-whitespace/);
    await rejects({ messages: [hi], temperature: 0.5 }, /temperature: Extra inputs are not permitted/);
    const old = await post({ model: 'm', max_tokens: 5, messages: [hi], temperature: 0.5 }, { 'anthropic-version': '2023-06-01' });
    assert.equal(old.status, 200);
    await rejects({ messages: [hi], tool_choice: { type: 'auto' } }, /tool_choice may only be specified while providing tools/);
  });
});
