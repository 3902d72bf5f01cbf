/**
 * End to end through the official `openai` SDK: SDK → Switchyard (real HTTP server) → fake
 * OpenAI-compatible upstream. Checks what a user sees (bodies, headers, SDK error classes) and
 * what the upstream receives (bodies passed through, the gateway's key, usage always requested).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { ChatCompletionCreateParamsNonStreaming, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { RecordedRequest } from './support/fake-openai-upstream.ts';
import type { TestGateway } from './support/gateway.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const UPSTREAM_KEY = 'sk-test-upstream-secret';
const GATEWAY_KEY = 'sk-gw-team-a-123';

const WEATHER_TOOL: ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

async function rejection(p: PromiseLike<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  return assert.fail('expected the call to fail');
}

/** The access-log line of a request (written when the response closes, so poll briefly). */
async function logLine(gw: TestGateway, requestId: string): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 2000;
  for (;;) {
    for (const l of gw.logs) {
      const j = JSON.parse(l) as Record<string, unknown>;
      if (j['msg'] === 'request' && j['request_id'] === requestId) return j;
    }
    if (Date.now() > deadline) return assert.fail(`no access-log line for ${requestId}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function only(reqs: RecordedRequest[], path: string): RecordedRequest {
  const hits = reqs.filter((r) => r.path === path);
  assert.equal(hits.length, 1, `expected exactly one upstream request to ${path}, got ${hits.length}`);
  const r = hits[0];
  assert.ok(r);
  return r;
}

function bodyOf(r: RecordedRequest): Record<string, unknown> {
  assert.ok(isRecord(r.body), 'upstream body is a JSON object');
  return r.body;
}

describe('e2e: openai SDK → Switchyard → OpenAI-compatible upstream', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fake: { apiKey: UPSTREAM_KEY }, fakeFloat: { apiKey: UPSTREAM_KEY, embeddingsIgnoreBase64: true } },
    yaml: ({ fake, fakeFloat }) => `
# One attempt per target and no circuit breaker: retries and the breaker have their own tests (routing.test.ts).
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0, min_requests: 1000000 } }
backends:
  up: { type: openai, base_url: "${fake.url}", api_key: "${UPSTREAM_KEY}" }
  upfloat: { type: openai, base_url: "${fakeFloat.url}", api_key: "${UPSTREAM_KEY}" }
models:
  gpt-test: { targets: [ { backend: up, model: upstream-model } ] }
  instruct-test: { targets: [ { backend: up, model: gpt-3.5-turbo-instruct } ] }
  embed-test: { targets: [ { backend: up, model: text-embedding-3-small } ] }
  embed-float: { targets: [ { backend: upfloat, model: text-embedding-3-small } ] }
keys:
  - { name: team-a, key: "${GATEWAY_KEY}" }
`,
    extras: ({ gw, fake }) => ({
      client: new OpenAI({ baseURL: gw.baseURL, apiKey: GATEWAY_KEY, maxRetries: 0 }),
      /** talks to the fake directly, to compute expected embeddings */
      direct: new OpenAI({ baseURL: fake.url, apiKey: UPSTREAM_KEY, maxRetries: 0 }),
    }),
    reset: 'beforeEach',
  });

  // -------------------------------------------------------------------------- chat

  test('non-streaming chat: content, usage and the switchyard response headers', async () => {
    const { data, response } = await ctx.client.chat.completions
      .create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hello there' }] })
      .withResponse();
    assert.equal(response.status, 200);
    assert.equal(data.object, 'chat.completion');
    const choice = data.choices[0];
    assert.ok(choice);
    assert.equal(choice.message.role, 'assistant');
    assert.equal(choice.message.content, 'Hello from upstream-model');
    assert.equal(choice.finish_reason, 'stop');
    assert.ok(data.usage);
    assert.ok(data.usage.prompt_tokens > 0);
    assert.ok(data.usage.completion_tokens > 0);
    assert.equal(data.usage.total_tokens, data.usage.prompt_tokens + data.usage.completion_tokens);

    assert.equal(response.headers.get('x-switchyard-backend'), 'up');
    assert.equal(response.headers.get('x-switchyard-model'), 'upstream-model');
    assert.equal(response.headers.get('x-switchyard-attempts'), '1');
    const rid = response.headers.get('x-request-id');
    assert.ok(rid && rid.length > 0, 'x-request-id is set');

    const up = only(ctx.fake.requests, '/v1/chat/completions');
    assert.equal(up.headers['authorization'], `Bearer ${UPSTREAM_KEY}`, 'upstream gets the gateway key, not the client key');
    assert.equal(bodyOf(up)['model'], 'upstream-model');
  });

  test('a client-sent x-request-id is echoed back', async () => {
    const { response } = await ctx.client.chat.completions
      .create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'x-request-id': 'trace-abc.123' } })
      .withResponse();
    assert.equal(response.headers.get('x-request-id'), 'trace-abc.123');
    assert.ok(ctx.gw.logs.some((l) => l.includes('"trace-abc.123"')), 'the request id is in the access log');
  });

  test('the upstream receives exactly the client body except model (vendor extras untouched)', async () => {
    const sent: ChatCompletionCreateParamsNonStreaming & { top_k: number; cache_prompt: boolean; repetition_penalty: number } = {
      model: 'gpt-test',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: [{ type: 'text', text: 'Tell me a joke' }] },
      ],
      temperature: 0.3,
      top_p: 0.9,
      max_tokens: 64,
      stop: ['\n\n'],
      seed: 42,
      user: 'user-7',
      metadata: { team: 'a', trace: 'xyz' },
      top_k: 40,
      cache_prompt: true,
      repetition_penalty: 1.1,
    };
    const res = await ctx.client.chat.completions.create(sent);
    assert.equal(res.choices[0]?.message.content, 'Hello from upstream-model');
    const up = only(ctx.fake.requests, '/v1/chat/completions');
    assert.deepEqual(bodyOf(up), { ...sent, model: 'upstream-model' });
  });

  test('streaming with stream_options.include_usage: content chunks, then one usage chunk with choices: [] last', async () => {
    const stream = await ctx.client.chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'stream please' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    assert.ok(chunks.length >= 4, `expected several chunks, got ${chunks.length}`);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    assert.equal(text, 'Hello from upstream-model');
    assert.ok(chunks.some((c) => c.choices[0]?.finish_reason === 'stop'));

    const last = chunks[chunks.length - 1];
    assert.ok(last);
    assert.deepEqual(last.choices, []);
    assert.ok(last.usage, 'last chunk carries usage');
    assert.ok(last.usage.prompt_tokens > 0);
    assert.ok(last.usage.completion_tokens > 0);
    assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
    const usageChunks = chunks.filter((c) => c.usage);
    assert.equal(usageChunks.length, 1, 'exactly one chunk carries usage');

    const body = bodyOf(only(ctx.fake.requests, '/v1/chat/completions'));
    assert.equal(body['stream'], true);
    assert.deepEqual(body['stream_options'], { include_usage: true });
  });

  test('streaming without include_usage: no usage reaches the client, though upstream was asked for it', async () => {
    const stream = await ctx.client.chat.completions.create(
      {
        model: 'gpt-test',
        messages: [{ role: 'user', content: 'stream please' }],
        stream: true,
      },
      { headers: { 'x-request-id': 'no-usage-stream-1' } },
    );
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    assert.equal(text, 'Hello from upstream-model');
    for (const c of chunks) {
      assert.ok(!('usage' in c), `chunk must carry no usage field: ${JSON.stringify(c)}`);
      assert.ok(c.choices.length > 0, 'no empty-choices usage chunk');
    }
    const last = chunks[chunks.length - 1];
    assert.equal(last?.choices[0]?.finish_reason, 'stop');

    const body = bodyOf(only(ctx.fake.requests, '/v1/chat/completions'));
    assert.equal(body['stream'], true);
    assert.ok(isRecord(body['stream_options']));
    assert.equal(body['stream_options']['include_usage'], true, 'the gateway asks upstream for usage');
    // the usage the client did not see is still accounted for in the access log
    const line = await logLine(ctx.gw, 'no-usage-stream-1');
    assert.equal(line['stream'], true);
    assert.equal(typeof line['prompt_tokens'], 'number');
    assert.ok((line['prompt_tokens'] as number) > 0);
    assert.ok((line['completion_tokens'] as number) > 0);
  });

  test('tool calls, non-streaming: id, name, JSON arguments, finish_reason tool_calls', async () => {
    const res = await ctx.client.chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools: [WEATHER_TOOL],
    });
    const choice = res.choices[0];
    assert.ok(choice);
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    const calls = choice.message.tool_calls ?? [];
    assert.equal(calls.length, 1);
    const call = calls[0];
    assert.ok(call && call.type === 'function');
    assert.match(call.id, /^call_/);
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });

    const body = bodyOf(only(ctx.fake.requests, '/v1/chat/completions'));
    assert.deepEqual(body['tools'], [WEATHER_TOOL]);
  });

  test('tool calls, streamed: fragments reassemble into valid JSON', async () => {
    const stream = await ctx.client.chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools: [WEATHER_TOOL],
      stream: true,
    });
    const calls = new Map<number, { id: string; name: string; args: string; fragments: number }>();
    let finish: string | null | undefined;
    for await (const c of stream) {
      const ch = c.choices[0];
      if (!ch) continue;
      if (ch.finish_reason) finish = ch.finish_reason;
      for (const tc of ch.delta.tool_calls ?? []) {
        const cur = calls.get(tc.index) ?? { id: '', name: '', args: '', fragments: 0 };
        if (tc.id) cur.id = tc.id;
        if (tc.function?.name) cur.name += tc.function.name;
        if (tc.function?.arguments) {
          cur.args += tc.function.arguments;
          cur.fragments++;
        }
        calls.set(tc.index, cur);
      }
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(calls.size, 1);
    const call = calls.get(0);
    assert.ok(call);
    assert.match(call.id, /^call_/);
    assert.equal(call.name, 'get_weather');
    assert.ok(call.fragments > 1, `arguments arrive in several fragments (got ${call.fragments})`);
    assert.deepEqual(JSON.parse(call.args), { city: 'Paris' });
  });

  // -------------------------------------------------------------------------- models

  test('models.list lists the public names; models.retrieve finds one', async () => {
    const ids: string[] = [];
    for await (const m of ctx.client.models.list()) {
      assert.equal(m.object, 'model');
      ids.push(m.id);
    }
    assert.deepEqual(ids.sort(), ['embed-float', 'embed-test', 'gpt-test', 'instruct-test']);
    assert.ok(!ids.includes('upstream-model'), 'upstream names are not exposed');

    const m = await ctx.client.models.retrieve('gpt-test');
    assert.equal(m.id, 'gpt-test');
    assert.equal(m.object, 'model');
    assert.equal(typeof m.created, 'number');

    const err = await rejection(ctx.client.models.retrieve('no-such-model'));
    assert.ok(err instanceof OpenAI.NotFoundError, `got ${String(err)}`);
    assert.equal(err.code, 'model_not_found');
  });

  // -------------------------------------------------------------------------- embeddings

  async function upstreamFloats(input: string | string[] | number[] | number[][], dimensions?: number): Promise<number[][]> {
    const r = await ctx.direct.embeddings.create({
      model: 'text-embedding-3-small',
      input,
      encoding_format: 'float',
      ...(dimensions !== undefined ? { dimensions } : {}),
    });
    return r.data.map((d) => d.embedding);
  }

  test('embeddings with the SDK default (base64 on the wire) decode to the upstream float vectors', async () => {
    const input = ['the quick brown fox', 'jumps over', 'the lazy dog'];
    const expected = await upstreamFloats(input);
    ctx.fake.reset();

    const res = await ctx.client.embeddings.create({ model: 'embed-test', input });
    assert.equal(res.data.length, 3);
    assert.deepEqual(
      res.data.map((d) => d.index),
      [0, 1, 2],
    );
    assert.deepEqual(
      res.data.map((d) => d.embedding),
      expected,
    );
    assert.equal(res.data[0]?.embedding.length, 8);
    assert.ok(res.usage.prompt_tokens > 0);

    const body = bodyOf(only(ctx.fake.requests, '/v1/embeddings'));
    assert.equal(body['encoding_format'], 'base64', 'the SDK asked for base64 and the gateway passed it on');
    assert.equal(body['model'], 'text-embedding-3-small');

    // and the same vectors as an explicit float request through the gateway
    const floats = await ctx.client.embeddings.create({ model: 'embed-test', input, encoding_format: 'float' });
    assert.deepEqual(
      floats.data.map((d) => d.embedding),
      expected,
    );
  });

  test('embeddings: an upstream that ignores base64 (returns floats) is re-encoded for the SDK', async () => {
    const input = ['alpha beta', 'gamma'];
    const expected = await upstreamFloats(input);

    const { data: res, response } = await ctx.client.embeddings.create({ model: 'embed-float', input }).withResponse();
    assert.equal(response.headers.get('x-switchyard-backend'), 'upfloat');
    assert.deepEqual(
      res.data.map((d) => d.embedding),
      expected,
    );
    for (const v of res.data.map((d) => d.embedding)) {
      assert.ok(v.every((x) => Number.isFinite(x) && Math.abs(x) <= 1), 'decoded values are a unit vector, not garbage');
    }
    const body = bodyOf(only(ctx.fakeFloat.requests, '/v1/embeddings'));
    assert.equal(body['encoding_format'], 'base64');

    // the raw wire answer is base64 strings, as requested
    const raw = await fetch(`${ctx.gw.baseURL}/embeddings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${GATEWAY_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'embed-float', input: 'gamma', encoding_format: 'base64' }),
    });
    assert.equal(raw.status, 200);
    const j = (await raw.json()) as { data: Array<{ embedding: unknown }> };
    assert.equal(typeof j.data[0]?.embedding, 'string');
  });

  test('embeddings with explicit encoding_format float, against both upstreams', async () => {
    const expected = await upstreamFloats('a single string');
    for (const model of ['embed-test', 'embed-float']) {
      const res = await ctx.client.embeddings.create({ model, input: 'a single string', encoding_format: 'float' });
      assert.equal(res.data.length, 1);
      assert.ok(Array.isArray(res.data[0]?.embedding));
      assert.deepEqual(res.data[0]?.embedding, expected[0], model);
    }
  });

  test('embeddings inputs: string, string[], token array, token arrays', async () => {
    const cases: Array<string | string[] | number[] | number[][]> = ['one string', ['first', 'second'], [101, 2023, 102], [[1, 2, 3], [4, 5]]];
    for (const input of cases) {
      const expected = await upstreamFloats(input);
      const viaDefault = await ctx.client.embeddings.create({ model: 'embed-test', input });
      const viaFloat = await ctx.client.embeddings.create({ model: 'embed-float', input });
      assert.deepEqual(
        viaDefault.data.map((d) => d.embedding),
        expected,
        `base64 path, input ${JSON.stringify(input)}`,
      );
      assert.deepEqual(
        viaFloat.data.map((d) => d.embedding),
        expected,
        `float-only upstream, input ${JSON.stringify(input)}`,
      );
    }
    const tokenReqs = ctx.fake.requests.filter((r) => r.path === '/v1/embeddings' && isRecord(r.body) && r.body['model'] === 'text-embedding-3-small');
    assert.ok(
      tokenReqs.some((r) => JSON.stringify(bodyOf(r)['input']) === '[[1,2,3],[4,5]]'),
      'token arrays reach the upstream unchanged',
    );
  });

  test('embeddings: dimensions passes through', async () => {
    const expected = await upstreamFloats('dims', 24);
    ctx.fake.reset();
    const res = await ctx.client.embeddings.create({ model: 'embed-test', input: 'dims', dimensions: 24 });
    assert.equal(res.data[0]?.embedding.length, 24);
    assert.deepEqual(res.data[0]?.embedding, expected[0]);
    assert.equal(bodyOf(only(ctx.fake.requests, '/v1/embeddings'))['dimensions'], 24);
  });

  // -------------------------------------------------------------------------- legacy completions

  test('legacy completions, non-streaming', async () => {
    const { data, response } = await ctx.client.completions.create({ model: 'instruct-test', prompt: 'Say hi', max_tokens: 5 }).withResponse();
    assert.equal(data.object, 'text_completion');
    assert.equal(data.choices[0]?.text, 'Hello from gpt-3.5-turbo-instruct');
    assert.equal(data.choices[0]?.finish_reason, 'stop');
    assert.ok(data.usage && data.usage.total_tokens > 0);
    assert.equal(response.headers.get('x-switchyard-model'), 'gpt-3.5-turbo-instruct');
    const body = bodyOf(only(ctx.fake.requests, '/v1/completions'));
    assert.deepEqual(body, { model: 'gpt-3.5-turbo-instruct', prompt: 'Say hi', max_tokens: 5 });
  });

  test('legacy completions, streaming', async () => {
    const stream = await ctx.client.completions.create({ model: 'instruct-test', prompt: 'Say hi', stream: true });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    assert.ok(chunks.length > 2);
    assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), 'Hello from gpt-3.5-turbo-instruct');
    assert.ok(chunks.some((c) => c.choices[0]?.finish_reason === 'stop'));
    for (const c of chunks) assert.ok(!('usage' in c) && c.choices.length > 0, 'no usage chunk when not asked');
    const body = bodyOf(only(ctx.fake.requests, '/v1/completions'));
    assert.deepEqual(body['stream_options'], { include_usage: true });
  });

  // -------------------------------------------------------------------------- errors

  test('unknown model → NotFoundError with code model_not_found', async () => {
    const err = await rejection(ctx.client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }));
    assert.ok(err instanceof OpenAI.NotFoundError, `got ${String(err)}`);
    assert.equal(err.status, 404);
    assert.equal(err.code, 'model_not_found');
    assert.equal(err.param, 'model');
    assert.equal(ctx.fake.requests.length, 0, 'nothing was sent upstream');
  });

  test('upstream 429 with retry-after: 7 → RateLimitError carrying retry-after', async () => {
    ctx.fake.enqueue({ kind: 'error', status: 429, message: 'Rate limit reached for requests', headers: { 'retry-after': '7' } });
    const err = await rejection(ctx.client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] }));
    assert.ok(err instanceof OpenAI.RateLimitError, `got ${String(err)}`);
    assert.equal(err.status, 429);
    assert.equal(err.headers?.get('retry-after'), '7');
    assert.equal(err.code, 'rate_limit_exceeded');
    assert.match(err.message, /Rate limit reached/);
  });

  test('upstream 500 → InternalServerError with status 502', async () => {
    ctx.fake.enqueue({ kind: 'error', status: 500, message: 'The server had an error' });
    const err = await rejection(ctx.client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] }));
    assert.ok(err instanceof OpenAI.InternalServerError, `got ${String(err)}`);
    assert.equal(err.status, 502);
    assert.equal(err.code, 'upstream_error');
    assert.equal(err.headers?.get('x-switchyard-attempts'), '1');
  });

  test('upstream 500 on a stream → InternalServerError with status 502 before any chunk', async () => {
    ctx.fake.enqueue({ kind: 'error', status: 500 });
    const err = await rejection(
      (async () => {
        const s = await ctx.client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }], stream: true });
        for await (const _ of s) {
          // drain
        }
      })(),
    );
    assert.ok(err instanceof OpenAI.InternalServerError, `got ${String(err)}`);
    assert.equal(err.status, 502);
  });

  test('upstream 400 → BadRequestError carrying the upstream message', async () => {
    ctx.fake.enqueue({
      kind: 'error',
      status: 400,
      message: "Invalid value for 'temperature': must be lower.",
      param: 'temperature',
      code: 'invalid_value',
    });
    const err = await rejection(ctx.client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] }));
    assert.ok(err instanceof OpenAI.BadRequestError, `got ${String(err)}`);
    assert.equal(err.status, 400);
    assert.match(err.message, /Invalid value for 'temperature': must be lower\./);
    assert.equal(err.param, 'temperature');
    assert.equal(err.code, 'invalid_value');
  });

  test('upstream 401 echoing the upstream key → 502 upstream_auth_failed, key never shown or logged', async () => {
    ctx.fake.enqueue({ kind: 'error', status: 401, message: `Incorrect API key provided: ${UPSTREAM_KEY}. Check your key.` });
    const err = await rejection(ctx.client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] }));
    assert.ok(err instanceof OpenAI.APIError, `got ${String(err)}`);
    assert.ok(!(err instanceof OpenAI.AuthenticationError), 'the client key is fine: not a 401');
    assert.ok(err instanceof OpenAI.InternalServerError);
    assert.equal(err.status, 502);
    assert.equal(err.code, 'upstream_auth_failed');
    assert.equal(ctx.fake.requests.length, 1, 'the request did reach the upstream');
    assert.ok(!err.message.includes(UPSTREAM_KEY), `message leaks the key: ${err.message}`);
    assert.ok(!JSON.stringify(err.error).includes(UPSTREAM_KEY), 'error body leaks the key');
    assert.ok(!err.message.includes('sk-test-upstream'), 'not even a prefix of the key');
    assert.ok(ctx.gw.logs.length > 0);
    for (const line of ctx.gw.logs) assert.ok(!line.includes(UPSTREAM_KEY), `log line leaks the key: ${line}`);
    assert.ok(ctx.gw.logs.some((l) => l.includes('upstream_auth_failed')), 'the failure is logged');
  });

  test('wrong gateway key → AuthenticationError (401), nothing sent upstream', async () => {
    const bad = new OpenAI({ baseURL: ctx.gw.baseURL, apiKey: 'sk-gw-wrong-key', maxRetries: 0 });
    const err = await rejection(bad.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] }));
    assert.ok(err instanceof OpenAI.AuthenticationError, `got ${String(err)}`);
    assert.equal(err.status, 401);
    assert.ok(!err.message.includes('sk-gw-wrong-key'));
    assert.equal(ctx.fake.requests.length, 0);
  });

  test('missing gateway key → AuthenticationError (401)', async () => {
    const none = new OpenAI({ baseURL: ctx.gw.baseURL, apiKey: 'unused', maxRetries: 0, defaultHeaders: { Authorization: null } });
    const err = await rejection(none.models.list());
    assert.ok(err instanceof OpenAI.AuthenticationError, `got ${String(err)}`);
    assert.equal(err.status, 401);
    assert.match(err.message, /didn't provide an API key/);
    assert.equal(ctx.fake.requests.length, 0);
  });

  test('no gateway log line ever contains the upstream key', () => {
    assert.ok(ctx.gw.logs.length > 10, `expected many log lines, got ${ctx.gw.logs.length}`);
    for (const line of ctx.gw.logs) {
      assert.ok(!line.includes(UPSTREAM_KEY), `log line leaks the key: ${line}`);
      assert.ok(!line.includes(GATEWAY_KEY), `log line leaks a client key: ${line}`);
    }
  });
});
