/**
 * The `anthropic` backend's native Messages API methods against the strict fake Anthropic server:
 * the client's body reaches the upstream byte for byte (cache_control, thinking signatures,
 * beta-only fields), with the backend's key and the client's version and betas; the JSON answer
 * comes back parsed; a stream's events come back as their exact text with the commit point, the
 * end and the usage (cache reads and writes) read on the way; error answers, a mid-stream `error`
 * event and malformed events become the gateway's errors, the key never shown; an abort stops the
 * upstream read. Thinking blocks the gateway signed are left out (Anthropic refuses them).
 */
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { anthropicBackendSchema } from '../src/config/schema.ts';
import { GatewayError } from '../src/errors/gateway-error.ts';
import { AnthropicBackend } from '../src/backends/anthropic/backend.ts';
import type { CallContext, JsonObject, NativeCall } from '../src/backends/contract.ts';
import type { EventPart } from '../src/protocol/stream-part.ts';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic-upstream.ts';
import { gatewaySignature } from '../src/protocol/messages/signature.ts';

const KEY = 'sk-ant-api03-native-test-secret';
let fake: FakeAnthropic;
const backends: AnthropicBackend[] = [];

function backend(extra: Record<string, unknown> = {}): AnthropicBackend {
  // base_url as users write it, with /v1: the native path adds /v1/messages itself
  const b = new AnthropicBackend('claude', anthropicBackendSchema.parse({ type: 'anthropic', api_key: KEY, base_url: `${fake.url}/v1`, ...extra }));
  backends.push(b);
  return b;
}

function ctx(signal = new AbortController().signal): CallContext {
  return { signal, requestId: 'req-native-1' };
}

/** What Claude Code sends, trimmed: cache_control on system blocks and tools, a signed thinking turn, a tool round trip, a beta-only field. */
function claudeCodeBody(stream: boolean): JsonObject {
  return {
    model: 'claude-sonnet-4-5-20250929',
    max_tokens: 1024,
    system: [
      { type: 'text', text: 'You are a coding agent.' },
      { type: 'text', text: 'Project rules: é ü 日本 "quoted"', cache_control: { type: 'ephemeral' } },
    ],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'list the files', cache_control: { type: 'ephemeral', ttl: '1h' } }] },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'I should call ls.', signature: 'EqQBCkYIBxgCKkBsig+/=' },
          { type: 'tool_use', id: 'toolu_01', name: 'bash', input: { command: 'ls' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: [{ type: 'text', text: 'a.ts b.ts' }], is_error: false }] },
    ],
    tools: [{ name: 'bash', description: 'run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } }, cache_control: { type: 'ephemeral' } }],
    metadata: { user_id: '{"device_id":"d1","session_id":"s1"}' },
    thinking: { type: 'enabled', budget_tokens: 512 },
    context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] },
    temperature: 1,
    stream,
  };
}

const BETAS = 'context-management-2025-06-27,interleaved-thinking-2025-05-14';
const call = (stream: boolean, headers: Record<string, string> = { 'anthropic-version': '2023-06-01', 'anthropic-beta': BETAS }): NativeCall => ({
  body: claudeCodeBody(stream),
  headers,
});

async function collect(it: AsyncIterable<EventPart>): Promise<EventPart[]> {
  const out: EventPart[] = [];
  for await (const p of it) out.push(p);
  return out;
}

async function rejection(p: Promise<unknown>): Promise<GatewayError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof GatewayError, `expected a GatewayError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a rejection');
}

before(async () => {
  fake = await startFakeAnthropic({ apiKey: KEY });
});
after(async () => {
  for (const b of backends) await b.close();
  await fake.close();
});
beforeEach(() => fake.reset());

describe('anthropic native messages: the request', () => {
  test('the body reaches POST /v1/messages as the client sent it, with x-api-key, the client version and betas', async () => {
    const content = [
      { type: 'thinking' as const, thinking: 'ls showed two files', signature: 'EqQBsig2+/=' },
      { type: 'text' as const, text: 'a.ts and b.ts' },
    ];
    fake.enqueue({ kind: 'reply', content, usage: { input_tokens: 9, cache_read_input_tokens: 300, output_tokens: 8 } });
    const c = call(false);
    const res = await backend().messages(c, ctx());
    assert.equal(fake.requests.length, 1);
    const r = fake.requests[0]!;
    assert.equal(r.method, 'POST');
    assert.equal(r.path, '/v1/messages');
    assert.equal(r.raw, JSON.stringify(c.body));
    assert.equal(r.headers['x-api-key'], KEY);
    assert.equal(r.headers.authorization, undefined);
    assert.equal(r.headers['anthropic-version'], '2023-06-01');
    assert.equal(r.headers['anthropic-beta'], BETAS);
    assert.match(String(r.headers['content-type']), /^application\/json/);
    assert.equal(res.type, 'message');
    assert.equal(res.model, 'claude-sonnet-4-5-20250929');
    assert.deepEqual(res.content, content);
    assert.equal(res.stop_reason, 'end_turn');
    assert.deepEqual(res.usage, { input_tokens: 9, cache_creation_input_tokens: 0, cache_read_input_tokens: 300, output_tokens: 8, service_tier: 'standard' });
  });

  test('anthropic-version: the client’s, else the configured one, else 2023-06-01; configured betas join the client’s', async () => {
    const body = { model: 'claude-test-1', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] };
    await backend({ anthropic_version: '2026-10-21', headers: { 'anthropic-beta': 'files-api-2025-04-14' } }).messages({ body, headers: { 'anthropic-beta': 'a-1, files-api-2025-04-14' } }, ctx());
    await backend().messages({ body }, ctx());
    await backend({ anthropic_version: '2026-10-21' }).messages({ body, headers: { 'Anthropic-Version': '2023-06-01' } }, ctx());
    const seen = fake.requests.map((r) => [r.headers['anthropic-version'], r.headers['anthropic-beta']]);
    assert.deepEqual(seen, [
      ['2026-10-21', 'a-1,files-api-2025-04-14'],
      ['2023-06-01', undefined],
      ['2023-06-01', undefined],
    ]);
  });
});

describe('anthropic native messages: thinking blocks the gateway signed, and unsigned ones', () => {
  test('messages, streams and count_tokens leave them out; Anthropic-signed thinking and redacted_thinking pass unchanged', async () => {
    const withGatewayTurn = (stream: boolean): JsonObject => {
      const body = claudeCodeBody(stream);
      const messages = body.messages as JsonObject[];
      const gatewayTurn = {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'translated reasoning', signature: gatewaySignature('translated reasoning') },
          { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix/LafPsn4a' },
          { type: 'text', text: 'done' },
        ],
      };
      // thinking no one signed (an empty or missing signature: Anthropic refuses it as well)
      const unsignedTurn = { role: 'assistant', content: [{ type: 'thinking', thinking: 'old gateway', signature: '' }, { type: 'thinking', thinking: 'other tool' }] };
      return { ...body, messages: [...messages, gatewayTurn, { role: 'user', content: 'next' }, unsignedTurn, { role: 'user', content: 'and next' }] };
    };
    const expected = (body: JsonObject): JsonObject => {
      const messages = (body.messages as JsonObject[]).slice();
      messages[3] = { role: 'assistant', content: [{ type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix/LafPsn4a' }, { type: 'text', text: 'done' }] };
      // the unsigned turn held nothing else: it is left out, and the user turns around it become one
      messages.splice(4, 3, { role: 'user', content: [{ type: 'text', text: 'next' }, { type: 'text', text: 'and next' }] });
      return { ...body, messages };
    };
    const b = backend();
    const json = withGatewayTurn(false);
    const before = JSON.stringify(json);
    const headers = call(false).headers;
    await b.messages({ body: json, headers }, ctx());
    await collect(await b.messagesStream({ body: withGatewayTurn(true), headers }, ctx()));
    await b.countMessageTokens({ body: withGatewayTurn(false), headers }, ctx());
    assert.equal(JSON.stringify(json), before, "the caller's body is not modified");
    assert.deepEqual(fake.requests.map((r) => r.path), ['/v1/messages', '/v1/messages', '/v1/messages/count_tokens']);
    assert.equal(fake.requests[0]!.raw, JSON.stringify(expected(json)));
    assert.equal(fake.requests[1]!.raw, JSON.stringify(expected(withGatewayTurn(true))));
    assert.equal(fake.requests[2]!.raw, JSON.stringify(expected(withGatewayTurn(false))));
    // the Anthropic-signed thinking block of the earlier turn is there, as it was
    assert.deepEqual((fake.requests[0]!.body as { messages: JsonObject[] }).messages[1], (claudeCodeBody(false).messages as JsonObject[])[1]);
  });
});

describe('anthropic native messages: streams', () => {
  test('events are forwarded as their exact text; content, final and usage are read on the way', async () => {
    const events = [
      { event: 'message_start', text: '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"cache_creation_input_tokens":20,"cache_read_input_tokens":100,"output_tokens":1}}}' },
      { event: 'ping', text: '{"type": "ping"}' },
      { event: 'content_block_start', text: '{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}' },
      { event: 'content_block_delta', text: '{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm \\u00e9"}}' },
      { event: 'content_block_delta', text: '{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB+/="}}' },
      { event: 'content_block_stop', text: '{"type":"content_block_stop","index":0}' },
      { event: 'some_future_event', text: '{"type":"some_future_event","x":[1,2]}' },
      { event: 'message_delta', text: '{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}' },
      { event: 'message_stop', text: '{"type":"message_stop"}' },
    ];
    fake.enqueue({ kind: 'events', events });
    const parts = await collect(await backend().messagesStream(call(true), ctx()));
    assert.deepEqual(
      parts.map((p) => [p.event, p.data]),
      events.map((e) => [e.event, e.text]),
    );
    assert.deepEqual(
      parts.map((p) => [p.content, p.final]),
      [[false, false], [false, false], [true, false], [true, false], [true, false], [false, false], [false, false], [false, false], [false, true]],
    );
    const details = { cached_tokens: 100, cache_creation_tokens: 20 };
    assert.deepEqual(parts[0]!.usage, { prompt_tokens: 125, completion_tokens: 1, total_tokens: 126, prompt_tokens_details: details });
    assert.deepEqual(parts[7]!.usage, { prompt_tokens: 125, completion_tokens: 7, total_tokens: 132, prompt_tokens_details: details });
    assert.deepEqual(
      parts.map((p, i) => (i === 0 || i === 7 ? 'set' : p.usage)),
      ['set', undefined, undefined, undefined, undefined, undefined, undefined, 'set', undefined],
    );
  });

  test('a generated stream: stream: true is sent, every event arrives, the last one ends the answer', async () => {
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'one two three' }], usage: { input_tokens: 3, cache_read_input_tokens: 40, output_tokens: 3 } });
    const c = call(false);
    const parts = await collect(await backend().messagesStream(c, ctx()));
    assert.equal((fake.requests[0]!.body as JsonObject).stream, true);
    assert.deepEqual(parts.map((p) => p.event), ['message_start', 'ping', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
    assert.equal(parts.filter((p) => p.final).length, 1);
    assert.deepEqual(parts.at(-2)!.usage, { prompt_tokens: 43, completion_tokens: 3, total_tokens: 46, prompt_tokens_details: { cached_tokens: 40, cache_creation_tokens: 0 } });
    assert.equal(parts.map((p) => (JSON.parse(p.data) as { delta?: { text?: string } }).delta?.text ?? '').join(''), 'one two three');
  });

  test('an `error` event mid-stream: overloaded is upstream_unavailable (retryable), others upstream_stream_error; the key is redacted', async () => {
    const b = backend();
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'a b c d e' }], errorAfter: { deltas: 2, type: 'overloaded_error', message: `Overloaded ${KEY}` } });
    const got: EventPart[] = [];
    const e = await rejection(
      (async () => {
        for await (const p of await b.messagesStream(call(true), ctx())) got.push(p);
      })(),
    );
    assert.deepEqual(got.map((p) => p.event), ['message_start', 'ping', 'content_block_start', 'content_block_delta', 'content_block_delta']);
    assert.deepEqual([e.kind, e.status, e.retryable], ['upstream_unavailable', 503, true]);
    assert.doesNotMatch(e.message, /native-test-secret/);
    assert.match(e.message, /Overloaded \[redacted\]/);

    fake.enqueue({ kind: 'reply', errorAfter: { deltas: 1, type: 'api_error', message: 'Internal server error' } });
    const e2 = await rejection(collect(await b.messagesStream(call(true), ctx())));
    assert.deepEqual([e2.kind, e2.retryable], ['upstream_stream_error', true]);
  });

  test('an event whose data is not a JSON object is upstream_malformed_response', async () => {
    const b = backend();
    for (const [event, text] of [
      ['content_block_delta', 'not json'],
      ['message_start', '{"type":"message_start",'],
      ['message_delta', '[1]'],
    ] as const) {
      fake.enqueue({ kind: 'events', events: [{ event: 'ping', data: { type: 'ping' } }, { event, text }] });
      const e = await rejection(collect(await b.messagesStream(call(true), ctx())));
      assert.equal(e.kind, 'upstream_malformed_response', `${event} ${text}`);
    }
  });

  test('an abort stops the upstream read', async () => {
    const ac = new AbortController();
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'w '.repeat(200) }], delayMs: 5 });
    const it = (await backend().messagesStream(call(true), ctx(ac.signal)))[Symbol.asyncIterator]();
    const first = await it.next();
    assert.equal(first.done, false);
    ac.abort(new Error('client went away'));
    await assert.rejects(
      (async () => {
        for (;;) if ((await it.next()).done) return;
      })(),
      /client went away/,
    );
    await fake.waitForClientAbort();
    assert.equal(fake.clientAborts, 1);
  });

  test('a consumer that stops early closes the upstream read', async () => {
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'w '.repeat(200) }], delayMs: 5 });
    for await (const p of await backend().messagesStream(call(true), ctx())) if (p.content) break;
    await fake.waitForClientAbort();
    assert.equal(fake.clientAborts, 1);
  });
});

describe('anthropic native messages: error answers', () => {
  test('statuses → gateway errors as on the translated path; retry-after kept; the key never shown', async () => {
    const b = backend();
    const table: Array<[number, string, string, number, boolean]> = [
      // upstream status, Anthropic type → code, client status, retryable
      [400, 'invalid_request_error', 'upstream_rejected', 400, false],
      [403, 'permission_error', 'upstream_auth_failed', 502, true],
      [404, 'not_found_error', 'model_not_found', 404, false],
      [413, 'request_too_large', 'request_too_large', 413, false],
      [429, 'rate_limit_error', 'upstream_rate_limited', 429, true],
      [500, 'api_error', 'upstream_error', 502, true],
      [529, 'overloaded_error', 'upstream_unavailable', 503, true],
    ];
    for (const [status, type, code, clientStatus, retryable] of table) {
      for (const stream of [false, true]) {
        fake.enqueue({ kind: 'error', status, type, message: `problem ${KEY}`, headers: { 'retry-after': '7' } });
        const e = await rejection(stream ? b.messagesStream(call(true), ctx()) : b.messages(call(false), ctx()));
        assert.deepEqual([e.kind, e.status, e.retryable], [code, clientStatus, retryable], `${status} ${type} stream=${stream}`);
        assert.doesNotMatch(e.message, /native-test-secret/);
        if (status === 429) assert.equal(e.retryAfter, 7);
      }
    }
  });

  test('the strict upstream’s 400 reaches the client with its message; a wrong key is upstream_auth_failed', async () => {
    const bad = { ...claudeCodeBody(false), bogus_field: 1 };
    const e = await rejection(backend().messages({ body: bad, headers: { 'anthropic-version': '2023-06-01', 'anthropic-beta': BETAS } }, ctx()));
    assert.deepEqual([e.kind, e.status], ['upstream_rejected', 400]);
    assert.equal(e.message, 'bogus_field: Extra inputs are not permitted');

    const e2 = await rejection(backend({ api_key: 'sk-ant-wrong-key-12345' }).messages(call(false), ctx()));
    assert.deepEqual([e2.kind, e2.status], ['upstream_auth_failed', 502]);
    assert.doesNotMatch(e2.message, /wrong-key/);
  });

  test('a 2xx answer that is not a Message is upstream_malformed_response', async () => {
    fake.enqueue({ kind: 'events', events: [{ event: 'message_stop', data: { type: 'message_stop' } }] });
    const e = await rejection(backend().messages(call(false), ctx()));
    assert.equal(e.kind, 'upstream_malformed_response');
  });
});
