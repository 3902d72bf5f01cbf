/**
 * End to end through LangChain.js: `ChatOpenAI` and `OpenAIEmbeddings` with `baseURL` pointed at
 * a real Switchyard gateway in front of fake OpenAI-compatible upstreams.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import type { AIMessageChunk } from '@langchain/core/messages';
import type { RecordedRequest } from './support/fake-openai-upstream.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const UPSTREAM_KEY = 'sk-test-upstream-secret';
const GATEWAY_KEY = 'sk-gw-team-a-123';

const WEATHER_TOOL = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function bodies(reqs: RecordedRequest[], path: string): Array<Record<string, unknown>> {
  return reqs.filter((r) => r.path === path).map((r) => {
    assert.ok(isRecord(r.body), 'upstream body is a JSON object');
    return r.body;
  });
}

describe('e2e: LangChain.js → Switchyard → OpenAI-compatible upstream', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fake: { apiKey: UPSTREAM_KEY }, fakeFloat: { apiKey: UPSTREAM_KEY, embeddingsIgnoreBase64: true } },
    yaml: ({ fake, fakeFloat }) => `
backends:
  up: { type: openai, base_url: "${fake.url}", api_key: "${UPSTREAM_KEY}" }
  upfloat: { type: openai, base_url: "${fakeFloat.url}", api_key: "${UPSTREAM_KEY}" }
models:
  gpt-test: { targets: [ { backend: up, model: upstream-model } ] }
  embed-test: { targets: [ { backend: up, model: text-embedding-3-small } ] }
  embed-float: { targets: [ { backend: upfloat, model: text-embedding-3-small } ] }
keys:
  - { name: team-a, key: "${GATEWAY_KEY}" }
`,
    extras: ({ fake }) => ({
      /** talks to the fake directly, to compute expected embeddings */
      direct: new OpenAI({ baseURL: fake.url, apiKey: UPSTREAM_KEY, maxRetries: 0 }),
    }),
    reset: 'beforeEach',
  });

  const chat = (extra: Partial<ConstructorParameters<typeof ChatOpenAI>[0] & object> = {}): ChatOpenAI =>
    new ChatOpenAI({ model: 'gpt-test', apiKey: GATEWAY_KEY, maxRetries: 0, configuration: { baseURL: ctx.gw.baseURL }, ...extra });

  const embeddings = (model: string): OpenAIEmbeddings =>
    new OpenAIEmbeddings({ model, apiKey: GATEWAY_KEY, maxRetries: 0, batchSize: 2, configuration: { baseURL: ctx.gw.baseURL } });

  async function upstreamFloats(input: string[]): Promise<number[][]> {
    const r = await ctx.direct.embeddings.create({ model: 'text-embedding-3-small', input, encoding_format: 'float' });
    return r.data.map((d) => d.embedding);
  }

  // -------------------------------------------------------------------------- chat

  test('ChatOpenAI.invoke returns the upstream answer with usage', async () => {
    const msg = await chat().invoke('Hello there');
    assert.equal(msg.content, 'Hello from upstream-model');
    assert.ok(msg.usage_metadata, 'usage_metadata is filled');
    assert.ok(msg.usage_metadata.input_tokens > 0);
    assert.ok(msg.usage_metadata.output_tokens > 0);
    assert.equal(msg.usage_metadata.total_tokens, msg.usage_metadata.input_tokens + msg.usage_metadata.output_tokens);
    assert.equal(msg.response_metadata['finish_reason'], 'stop');

    const [body, ...rest] = bodies(ctx.fake.requests, '/v1/chat/completions');
    assert.equal(rest.length, 0);
    assert.ok(body);
    assert.equal(body['model'], 'upstream-model');
    assert.deepEqual(body['messages'], [{ role: 'user', content: 'Hello there' }]);
    assert.equal(ctx.fake.requests[0]?.headers['authorization'], `Bearer ${UPSTREAM_KEY}`);
  });

  test('ChatOpenAI.stream yields several chunks that concatenate to the answer', async () => {
    const stream = await chat().stream('Stream to me');
    let full: AIMessageChunk | undefined;
    let n = 0;
    for await (const chunk of stream) {
      n++;
      full = full ? full.concat(chunk) : chunk;
    }
    assert.ok(n > 1, `expected more than one chunk, got ${n}`);
    assert.ok(full);
    assert.equal(full.content, 'Hello from upstream-model');
    // LangChain asks for usage in streams; the gateway delivers the usage chunk it asked for
    assert.ok(full.usage_metadata, 'streamed usage_metadata');
    assert.ok(full.usage_metadata.input_tokens > 0);
    assert.ok(full.usage_metadata.output_tokens > 0);

    const [body] = bodies(ctx.fake.requests, '/v1/chat/completions');
    assert.ok(body);
    assert.equal(body['stream'], true);
    assert.deepEqual(body['stream_options'], { include_usage: true });
  });

  test('bindTools + invoke returns tool_calls with parsed args', async () => {
    const model = chat().bindTools([WEATHER_TOOL]);
    const msg = await model.invoke('What is the weather in Paris?');
    assert.equal(msg.tool_calls?.length, 1);
    const call = msg.tool_calls?.[0];
    assert.ok(call);
    assert.equal(call.name, 'get_weather');
    assert.deepEqual(call.args, { city: 'Paris' });
    assert.match(call.id ?? '', /^call_/);
    assert.equal(msg.response_metadata['finish_reason'], 'tool_calls');

    const [body] = bodies(ctx.fake.requests, '/v1/chat/completions');
    assert.ok(body);
    assert.ok(Array.isArray(body['tools']));
    const sentTool = (body['tools'] as unknown[])[0];
    assert.ok(isRecord(sentTool) && isRecord(sentTool['function']));
    assert.equal(sentTool['function']['name'], 'get_weather');
  });

  test('bindTools + stream: tool call chunks reassemble into parsed args', async () => {
    const model = chat().bindTools([WEATHER_TOOL]);
    const stream = await model.stream('What is the weather in Paris?');
    let full: AIMessageChunk | undefined;
    let argChunks = 0;
    for await (const chunk of stream) {
      if (chunk.tool_call_chunks?.some((c) => (c.args ?? '') !== '')) argChunks++;
      full = full ? full.concat(chunk) : chunk;
    }
    assert.ok(full);
    assert.ok(argChunks > 1, `arguments arrive in several chunks (got ${argChunks})`);
    assert.equal(full.tool_calls?.length, 1);
    const call = full.tool_calls?.[0];
    assert.ok(call);
    assert.equal(call.name, 'get_weather');
    assert.deepEqual(call.args, { city: 'Paris' });
    assert.match(call.id ?? '', /^call_/);
    assert.equal(full.response_metadata['finish_reason'], 'tool_calls');
  });

  test('ChatOpenAI against an unknown model rejects with a 404', async () => {
    await assert.rejects(chat({ model: 'no-such-model' }).invoke('hi'), (err: unknown) => {
      assert.ok(err instanceof Error);
      assert.match(err.message, /no-such-model/);
      assert.equal((err as { status?: unknown }).status, 404);
      return true;
    });
    assert.equal(ctx.fake.requests.length, 0);
  });

  // -------------------------------------------------------------------------- embeddings

  test('OpenAIEmbeddings.embedQuery (default base64 path) equals the upstream float vector', async () => {
    const [expected] = await upstreamFloats(['what is a switchyard']);
    ctx.fake.reset();
    const v = await embeddings('embed-test').embedQuery('what is a switchyard');
    assert.ok(expected);
    assert.equal(v.length, 8);
    assert.deepEqual(v, expected);
    const [body, ...rest] = bodies(ctx.fake.requests, '/v1/embeddings');
    assert.equal(rest.length, 0);
    assert.ok(body);
    assert.equal(body['encoding_format'], 'base64', 'LangChain goes through the SDK default (base64)');
    assert.equal(body['model'], 'text-embedding-3-small');
  });

  test('OpenAIEmbeddings.embedDocuments in batches equals the upstream float vectors', async () => {
    const docs = ['first doc', 'second doc', 'third doc', 'fourth doc', 'fifth doc'];
    const expected = await upstreamFloats(docs);
    ctx.fake.reset();
    const vs = await embeddings('embed-test').embedDocuments(docs);
    assert.equal(vs.length, docs.length);
    assert.deepEqual(vs, expected);
    const sent = bodies(ctx.fake.requests, '/v1/embeddings');
    assert.equal(sent.length, 3, 'batchSize 2 → 3 upstream requests');
    assert.deepEqual(
      sent.map((b) => b['input']),
      [['first doc', 'second doc'], ['third doc', 'fourth doc'], ['fifth doc']],
    );
  });

  test('OpenAIEmbeddings against an upstream that ignores base64 still gets the right vectors', async () => {
    const docs = ['alpha', 'beta gamma', 'delta'];
    const expected = await upstreamFloats(docs);
    const e = embeddings('embed-float');
    const vs = await e.embedDocuments(docs);
    assert.deepEqual(vs, expected);
    const q = await e.embedQuery('beta gamma');
    assert.deepEqual(q, expected[1]);
    const sent = bodies(ctx.fakeFloat.requests, '/v1/embeddings');
    assert.equal(sent.length, 3);
    for (const b of sent) assert.equal(b['encoding_format'], 'base64');
  });
});
