/**
 * The `openai` backend's native Responses API (`responses: true`): the client's body goes to
 * POST {base_url}/responses as it is, and the stream's events come back as the upstream wrote them,
 * read for the commit point, the end and usage — checked against the strict fake Responses upstream.
 */
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { OpenAIBackend } from '../src/backends/openai/backend.ts';
import type { CallContext, JsonObject, NativeCall } from '../src/backends/contract.ts';
import { openaiBackendSchema } from '../src/config/schema.ts';
import { GatewayError } from '../src/errors/gateway-error.ts';
import { sseText, type EventPart } from '../src/protocol/stream-part.ts';
import { startFakeResponses, type FakeResponsesUpstream } from './support/fake-responses-upstream.ts';
import { startJsonUpstream, type JsonUpstream } from './support/json-upstream.ts';

const KEY = 'sk-native-responses-key';

function backend(baseUrl: string, flag: { responses?: boolean } = { responses: true }): OpenAIBackend {
  return new OpenAIBackend('native', openaiBackendSchema.parse({ type: 'openai', base_url: baseUrl, api_key: KEY, ...flag }));
}

function ctx(signal: AbortSignal = new AbortController().signal): CallContext {
  return { signal, requestId: 'req-native-1' };
}

/** The methods of a backend built with the flag (they exist). */
function native(b: OpenAIBackend): { json: (c: NativeCall, x: CallContext) => Promise<JsonObject>; stream: (c: NativeCall, x: CallContext) => Promise<AsyncIterable<EventPart>> } {
  const { responses, responsesStream } = b;
  assert.ok(responses && responsesStream);
  return { json: responses, stream: responsesStream };
}

async function collect(it: AsyncIterable<EventPart>): Promise<EventPart[]> {
  const out: EventPart[] = [];
  for await (const p of it) out.push(p);
  return out;
}

/** Runs `fn` recording every string or buffer written to a server response meanwhile (the fake's stream). */
async function recordingServerWrites<T>(fn: () => Promise<T>): Promise<{ result: T; written: string }> {
  const proto = http.ServerResponse.prototype;
  const write = proto.write;
  const end = proto.end;
  let written = '';
  const keep = (chunk: unknown): void => {
    if (typeof chunk === 'string' || Buffer.isBuffer(chunk)) written += chunk.toString();
  };
  proto.write = function (this: http.ServerResponse, chunk: unknown, ...rest: unknown[]) {
    keep(chunk);
    return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
  } as typeof proto.write;
  proto.end = function (this: http.ServerResponse, chunk?: unknown, ...rest: unknown[]) {
    if (typeof chunk !== 'function') keep(chunk);
    return (end as (...a: unknown[]) => http.ServerResponse).call(this, chunk, ...rest);
  } as typeof proto.end;
  try {
    const result = await fn();
    return { result, written };
  } finally {
    proto.write = write;
    proto.end = end;
  }
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

const TYPES_WITH_REASONING = [
  'response.created', 'response.in_progress',
  'response.output_item.added', 'response.reasoning_summary_part.added', 'response.reasoning_summary_text.delta',
  'response.reasoning_summary_text.done', 'response.reasoning_summary_part.done', 'response.output_item.done',
  'response.output_item.added', 'response.content_part.added',
  'response.output_text.delta', 'response.output_text.delta', 'response.output_text.delta',
  'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed',
];

describe('openai backend, native Responses API', () => {
  let up: FakeResponsesUpstream;
  let b: OpenAIBackend;

  before(async () => {
    up = await startFakeResponses({ apiKey: KEY });
    b = backend(up.url);
  });
  afterEach(() => up.reset());
  after(async () => {
    await b.close();
    await up.close();
  });

  test('without `responses: true` the backend has no native methods (the gateway translates)', async () => {
    for (const flag of [{}, { responses: false }]) {
      const plain = backend(up.url, flag);
      await plain.close();
      assert.equal(plain.responses, undefined);
      assert.equal(plain.responsesStream, undefined);
      assert.equal('responses' in plain, false);
      assert.equal('responsesStream' in plain, false);
    }
    assert.equal(typeof b.responses, 'function');
    assert.equal(typeof b.responsesStream, 'function');
  });

  test('JSON: the body reaches POST /v1/responses exactly as given; the Response object comes back', async () => {
    const body = {
      model: 'gpt-5-mini',
      input: [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: [{ type: 'input_text', text: 'hi' }] }],
      stream: false,
      store: false,
      include: ['reasoning.encrypted_content'],
      reasoning: { effort: 'low', summary: 'auto' },
      text: { verbosity: 'low' },
      prompt_cache_key: 'k1',
      client_metadata: { vendor: 'extra' },
      tools: [{ type: 'web_search' }],
    };
    const res = await native(b).json({ body }, ctx());
    assert.equal(up.requests.length, 1);
    const r = up.requests[0];
    assert.equal(r?.method, 'POST');
    assert.equal(r?.path, '/v1/responses');
    assert.deepEqual(r?.body, body);
    assert.equal(r?.headers.authorization, `Bearer ${KEY}`);
    assert.equal(r?.headers['x-request-id'], 'req-native-1');
    assert.equal(r?.headers.accept, 'application/json');
    assert.equal(res.object, 'response');
    assert.match(String(res.id), /^resp_/);
    assert.equal(res.status, 'completed');
    assert.deepEqual((res.usage as { total_tokens?: unknown }).total_tokens !== undefined, true);
    const msg = (res.output as Array<{ type: string; content: Array<{ text: string }> }>)[0];
    assert.equal(msg?.content[0]?.text, 'Hello from gpt-5-mini');
  });

  test('call headers go upstream; the backend keeps its own credentials', async () => {
    await native(b).json({ body: { model: 'm', input: 'x' }, headers: { 'OpenAI-Beta': 'responses=v9', authorization: 'Bearer sk-client-key-0000' } }, ctx());
    const h = up.requests[0]?.headers;
    assert.equal(h?.['openai-beta'], 'responses=v9');
    assert.equal(h?.authorization, `Bearer ${KEY}`);
  });

  test('stream: every event forwarded with its name and exact data; commit point, end and usage read on the way', async () => {
    up.enqueue({ kind: 'stream', text: 'one two three', reasoning: 'thinking', usage: { input_tokens: 11, output_tokens: 4 } });
    const body = { model: 'gpt-5', input: 'count', stream: true, store: false };
    const { result: parts, written } = await recordingServerWrites(async () => collect(await native(b).stream({ body }, ctx())));
    assert.deepEqual(up.requests[0]?.body, body);
    assert.equal(up.requests[0]?.headers.accept, 'text/event-stream');
    // byte for byte: the parts written as SSE are what the upstream wrote
    assert.ok(written.length > 0);
    assert.equal(parts.map(sseText).join(''), written);
    assert.deepEqual(parts.map((p) => p.event), TYPES_WITH_REASONING);
    for (const p of parts) assert.equal((JSON.parse(p.data) as { type: string }).type, p.event);
    // the commit point: the reasoning summary's delta (a bare reasoning item is not content), then
    // the message item and its deltas
    const content = parts.map((p, i) => (p.content ? i : -1)).filter((i) => i >= 0);
    assert.deepEqual(content, [4, 8, 10, 11, 12]);
    assert.deepEqual(parts.map((p) => p.final), TYPES_WITH_REASONING.map((t) => t === 'response.completed'));
    const last = parts[parts.length - 1];
    assert.deepEqual(last?.usage, { prompt_tokens: 11, completion_tokens: 4, total_tokens: 15, prompt_tokens_details: { cached_tokens: 0 } });
    for (const p of parts.slice(0, -1)) assert.equal(p.usage, undefined);
  });

  test('stream: a message without reasoning commits at its output_item.added; a function call at its item', async () => {
    up.enqueue({ kind: 'stream', text: 'hi' }, { kind: 'stream', toolCalls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] });
    const text = await collect(await native(b).stream({ body: { model: 'm', input: 'x', stream: true } }, ctx()));
    const firstText = text.findIndex((p) => p.content);
    assert.equal(text[firstText]?.event, 'response.output_item.added');
    assert.deepEqual(text.slice(0, firstText).map((p) => p.event), ['response.created', 'response.in_progress']);
    const call = await collect(await native(b).stream({ body: { model: 'm', input: 'x', stream: true } }, ctx()));
    const firstCall = call.findIndex((p) => p.content);
    assert.equal(call[firstCall]?.event, 'response.output_item.added');
    assert.equal((JSON.parse(call[firstCall]?.data ?? '{}') as { item: { type: string } }).item.type, 'function_call');
    assert.ok(call.filter((p) => p.event === 'response.function_call_arguments.delta').every((p) => p.content));
    assert.ok(call.filter((p) => p.event === 'response.function_call_arguments.done').every((p) => !p.content));
  });

  test('stream: a body without `stream: true` asks for a stream', async () => {
    up.enqueue({ kind: 'stream', text: 'hi' });
    await collect(await native(b).stream({ body: { model: 'm', input: 'x' } }, ctx()));
    assert.deepEqual(up.requests[0]?.body, { model: 'm', input: 'x', stream: true });
  });

  test('stream: response.incomplete and response.failed end the answer, with usage', async () => {
    up.enqueue({ kind: 'stream', text: 'a b', incomplete: true, usage: { input_tokens: 5, output_tokens: 2 } });
    const inc = await collect(await native(b).stream({ body: { model: 'm', input: 'x', stream: true } }, ctx()));
    const end = inc[inc.length - 1];
    assert.equal(end?.event, 'response.incomplete');
    assert.equal(end?.final, true);
    assert.deepEqual(end?.usage, { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7, prompt_tokens_details: { cached_tokens: 0 } });
    assert.equal(inc.filter((p) => p.final).length, 1);

    up.enqueue({ kind: 'stream', text: 'a b c', failAfter: { after: 2, message: 'model overloaded' } });
    const failed = await collect(await native(b).stream({ body: { model: 'm', input: 'x', stream: true } }, ctx()));
    const f = failed[failed.length - 1];
    assert.equal(f?.event, 'response.failed');
    assert.equal(f?.final, true);
    assert.equal(failed.filter((p) => p.final).length, 1);
  });

  for (const stream of [false, true]) {
    const call = (body: JsonObject): Promise<unknown> => (stream ? native(b).stream({ body: { ...body, stream: true } }, ctx()) : native(b).json({ body }, ctx()));
    const label = stream ? 'stream' : 'JSON';

    test(`${label}: a 400 from the upstream is a 400 with its message, code and param`, async () => {
      const err = await rejection(call({ model: 'm', input: 'x', temperature: 5 }));
      assert.equal(err.status, 400);
      assert.equal(err.code, 'decimal_above_max_value');
      assert.equal(err.param, 'temperature');
      assert.match(err.message, /Expected a value <= 2, but got 5 instead/);
    });

    test(`${label}: a 429 is a 429 rate_limit_exceeded with its retry-after`, async () => {
      up.enqueue({ kind: 'error', status: 429, message: 'Rate limit reached for gpt-5', headers: { 'retry-after': '7' } });
      const err = await rejection(call({ model: 'm', input: 'x' }));
      assert.equal(err.status, 429);
      assert.equal(err.kind, 'upstream_rate_limited');
      assert.equal(err.code, 'rate_limit_exceeded');
      assert.equal(err.retryAfter, 7);
    });

    test(`${label}: a 500 is a 502 upstream_error (retryable)`, async () => {
      up.enqueue({ kind: 'error', status: 500, message: 'The server had an error' });
      const err = await rejection(call({ model: 'm', input: 'x' }));
      assert.equal(err.status, 502);
      assert.equal(err.kind, 'upstream_error');
      assert.equal(err.retryable, true);
    });
  }

  test('stream: an `error` event mid-stream throws upstream_stream_error (message redacted) after the events before it', async () => {
    up.enqueue({ kind: 'stream', text: 'a b c d', errorAfter: { after: 2, message: `quota for ${KEY} exceeded` } });
    const parts: EventPart[] = [];
    const it = await native(b).stream({ body: { model: 'm', input: 'x', stream: true } }, ctx());
    const err = await rejection((async () => {
      for await (const p of it) parts.push(p);
    })());
    assert.equal(err.kind, 'upstream_stream_error');
    assert.equal(err.status, 502);
    assert.match(err.message, /quota for \[redacted\] exceeded/);
    assert.ok(!err.message.includes(KEY));
    assert.equal(parts.filter((p) => p.event === 'response.output_text.delta').length, 2);
    assert.ok(parts.every((p) => !p.final));
  });

  test('stream: a dropped connection throws upstream_connection_lost', async () => {
    up.enqueue({ kind: 'stream', text: 'a b c d', dropAfter: 2 });
    const parts: EventPart[] = [];
    const it = await native(b).stream({ body: { model: 'm', input: 'x', stream: true } }, ctx());
    const err = await rejection((async () => {
      for await (const p of it) parts.push(p);
    })());
    assert.equal(err.kind, 'upstream_connection_lost');
    assert.equal(parts.filter((p) => p.content).length, 3);
  });

  test('stream: an abort stops the upstream read (the upstream sees its client go away)', async () => {
    up.enqueue({ kind: 'stream', text: 'a b c d e f g h', delayMs: 20 });
    const ac = new AbortController();
    const it = await native(b).stream({ body: { model: 'm', input: 'x', stream: true } }, ctx(ac.signal));
    const reason = new Error('client went away');
    let thrown: unknown;
    let seen = 0;
    try {
      for await (const p of it) {
        seen++;
        if (p.event === 'response.in_progress') ac.abort(reason);
      }
    } catch (err) {
      thrown = err;
    }
    assert.equal(thrown, reason);
    assert.ok(seen <= 2);
    await up.waitForClientAbort();
    assert.equal(up.clientAborts, 1);
  });
});

describe('openai backend, native Responses API: malformed answers', () => {
  let up: JsonUpstream;
  let answer = '';
  before(async () => {
    up = await startJsonUpstream(() => ({ text: answer }));
  });
  after(async () => {
    await up.close();
  });

  test('stream: an event whose data is not JSON → upstream_malformed_response', async () => {
    answer = 'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{}}\n\nevent: response.in_progress\ndata: {not json\n\n';
    const b = backend(up.baseURL);
    const parts: EventPart[] = [];
    const it = await native(b).stream({ body: { model: 'm', input: 'x', stream: true } }, ctx());
    const err = await rejection((async () => {
      for await (const p of it) parts.push(p);
    })());
    assert.equal(err.kind, 'upstream_malformed_response');
    assert.deepEqual(parts.map((p) => p.event), ['response.created']);
    await b.close();
  });

  test('JSON: an answer that is not a JSON object → upstream_malformed_response', async () => {
    answer = '[{"id":"resp_1"}]';
    const b = backend(up.baseURL);
    const err = await rejection(native(b).json({ body: { model: 'm', input: 'x' } }, ctx()));
    assert.equal(err.kind, 'upstream_malformed_response');
    await b.close();
  });
});
