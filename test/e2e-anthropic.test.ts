/**
 * End to end for `type: anthropic`: the `openai` SDK and LangChain.js ChatOpenAI → Switchyard (real
 * HTTP server) → a strict fake Anthropic Messages API. Checks what users see (answers, streamed
 * chunks, tool calls, usage, errors and SDK error classes) and what Anthropic receives.
 */
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionTool } from 'openai/resources/chat/completions';
import { ChatOpenAI } from '@langchain/openai';
import type { AIMessageChunk } from '@langchain/core/messages';
import { startFakeAnthropic, type FakeAnthropic, type RecordedRequest } from './support/fake-anthropic-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const KEY = 'sk-ant-test-upstream-secret';

const WEATHER_TOOL: ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const TOOL_USE = { type: 'tool_use' as const, id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', name: 'get_weather', input: { city: 'Paris' } };

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

async function rejection(p: PromiseLike<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  return assert.fail('expected the call to fail');
}

function lastMessages(fake: FakeAnthropic): RecordedRequest & { body: Record<string, unknown> } {
  const r = fake.requests.filter((q) => q.path === '/v1/messages').at(-1);
  assert.ok(r, 'the upstream got a /v1/messages request');
  assert.ok(isRecord(r.body));
  return { ...r, body: r.body };
}

describe('e2e: openai SDK / LangChain → Switchyard → Anthropic Messages API', () => {
  let fake: FakeAnthropic;
  let gw: TestGateway;
  let client: OpenAI;

  before(async () => {
    fake = await startFakeAnthropic({ apiKey: KEY });
    gw = await startGateway(
      `
backends:
  claude: { type: anthropic, base_url: "${fake.url}", api_key: "${KEY}" }
  claude_v1: { type: anthropic, base_url: "${fake.url}/v1/", api_key: "${KEY}", anthropic_version: "2023-06-01", default_max_tokens: 256 }
  claude_badkey: { type: anthropic, base_url: "${fake.url}", api_key: "sk-ant-wrong-key-000000" }
  claude_nokey: { type: anthropic, api_key: "\${ANTHROPIC_API_KEY:-}" }
routing:                      # one attempt per request, no breaker: these tests look at single answers
  retry: { max_retries: 0 }
  breaker: { consecutive_failures: 0, min_requests: 100000 }
models:
  claude: { targets: [ { backend: claude, model: claude-test-1 } ] }
  claude-old: { targets: [ { backend: claude_v1, model: claude-test-1 } ] }
  claude-badkey: { targets: [ { backend: claude_badkey, model: claude-test-1 } ] }
  claude-nokey: { targets: [ { backend: claude_nokey, model: claude-test-1 } ] }
`,
      {},
    );
    client = new OpenAI({ baseURL: gw.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await gw.close();
    await fake.close();
  });
  beforeEach(() => fake.reset());

  test('plain chat: answer, finish_reason, usage; upstream gets a Messages request with version and key', async () => {
    const { data, response } = await client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'hello there' }] }).withResponse();
    assert.equal(response.headers.get('x-switchyard-backend'), 'claude');
    assert.equal(data.object, 'chat.completion');
    assert.equal(data.choices[0]?.message.role, 'assistant');
    assert.equal(data.choices[0]?.message.content, 'echo: hello there');
    assert.equal(data.choices[0]?.finish_reason, 'stop');
    assert.equal(data.model, 'claude-test-1');
    assert.deepEqual(data.usage, { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5, prompt_tokens_details: { cached_tokens: 0, cache_creation_tokens: 0 } });
    const up = lastMessages(fake);
    assert.equal(up.headers['anthropic-version'], '2026-10-21');
    assert.equal(up.headers['x-api-key'], KEY);
    assert.equal(up.headers['authorization'], `Bearer ${KEY}`);
    assert.deepEqual(up.body, { model: 'claude-test-1', max_tokens: 4096, messages: [{ role: 'user', content: [{ type: 'text', text: 'hello there' }] }] });
  });

  test('system/developer messages → top-level system; consecutive user messages merged', async () => {
    const r = await client.chat.completions.create({
      model: 'claude',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'developer', content: 'Use French.' },
        { role: 'user', content: 'first' },
        { role: 'user', content: 'second' },
      ],
      max_completion_tokens: 50,
      stop: ['STOP'],
      user: 'user-7',
    });
    assert.equal(r.choices[0]?.message.content, 'echo: first second');
    const { body } = lastMessages(fake);
    assert.deepEqual(body.system, [
      { type: 'text', text: 'You are terse.' },
      { type: 'text', text: 'Use French.' },
    ]);
    assert.deepEqual(body.messages, [{ role: 'user', content: [{ type: 'text', text: 'first' }, { type: 'text', text: 'second' }] }]);
    assert.equal(body.max_tokens, 50);
    assert.deepEqual(body.stop_sequences, ['STOP']);
    assert.deepEqual(body.metadata, { user_id: 'user-7' });
  });

  test('temperature: dropped with a warning on 2026-10-21, sent on 2023-06-01 (base_url with /v1 works)', async () => {
    const r = await client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'hi' }], temperature: 0.2, seed: 3 });
    assert.equal(r.choices[0]?.finish_reason, 'stop');
    assert.equal('temperature' in lastMessages(fake).body, false);
    const warn = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l['level'] === 'warn' && String(l['msg']).includes('dropped'));
    assert.ok(warn, 'a warning names the dropped parameters');
    assert.equal(warn['params'], 'temperature,seed');
    assert.equal(warn['backend'], 'claude');

    await client.chat.completions.create({ model: 'claude-old', messages: [{ role: 'user', content: 'hi' }], temperature: 0.2 });
    const old = lastMessages(fake);
    assert.equal(old.path, '/v1/messages');
    assert.equal(old.headers['anthropic-version'], '2023-06-01');
    assert.equal(old.body.temperature, 0.2);
    assert.equal(old.body.max_tokens, 256);
  });

  test('streaming with include_usage: role first, text deltas, finish_reason, usage totals', async () => {
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'one two three four' }], usage: { input_tokens: 11, output_tokens: 4, cache_read_input_tokens: 5 } });
    const stream = await client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'count' }], stream: true, stream_options: { include_usage: true } });
    const chunks: ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    assert.equal(chunks[0]?.choices[0]?.delta.role, 'assistant');
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    assert.equal(text, 'one two three four');
    assert.ok(chunks.filter((c) => c.choices[0]?.delta.content).length >= 4, 'text arrives in several chunks');
    const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
    assert.equal(finish.length, 1);
    assert.equal(finish[0]?.choices[0]?.finish_reason, 'stop');
    const last = chunks.at(-1);
    assert.deepEqual(last?.choices, []);
    assert.equal(last?.usage?.prompt_tokens, 16);
    assert.equal(last?.usage?.completion_tokens, 4);
    assert.equal(last?.usage?.total_tokens, 20);
    assert.equal(last?.usage?.prompt_tokens_details?.cached_tokens, 5);
    assert.equal(lastMessages(fake).body.stream, true);
  });

  test('streaming without include_usage: no usage chunk, still a finish_reason; the access log has the tokens', async () => {
    const stream = await client.chat.completions.create(
      { model: 'claude', messages: [{ role: 'user', content: 'a b' }], stream: true },
      { headers: { 'x-request-id': 'anthropic-stream-1' } },
    );
    const chunks: ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    assert.ok(chunks.every((c) => c.choices.length === 1 && !c.usage));
    assert.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'stop');
    const deadline = Date.now() + 2000;
    let line: Record<string, unknown> | undefined;
    while (!line && Date.now() < deadline) {
      line = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l['msg'] === 'request' && l['request_id'] === 'anthropic-stream-1');
      if (!line) await new Promise((r) => setTimeout(r, 10));
    }
    assert.ok(line, 'an access-log line');
    assert.equal(line['prompt_tokens'], 2);
    assert.equal(line['completion_tokens'], 3);
  });

  test('a client that goes away mid-stream aborts the upstream request', async () => {
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'w '.repeat(200) }], delayMs: 5 });
    const stream = await client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'long' }], stream: true });
    for await (const c of stream) {
      if (c.choices[0]?.delta.content) break;
    }
    await fake.waitForClientAbort();
    assert.equal(fake.clientAborts, 1);
  });

  test('tool calling, non-streaming: tool_use → tool_calls; results go back as tool_result', async () => {
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'Let me check.' }, TOOL_USE] });
    const r = await client.chat.completions.create({
      model: 'claude',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [WEATHER_TOOL],
      tool_choice: 'required',
      parallel_tool_calls: false,
    });
    const msg = r.choices[0]?.message;
    assert.equal(r.choices[0]?.finish_reason, 'tool_calls');
    assert.equal(msg?.content, 'Let me check.');
    assert.deepEqual(msg?.tool_calls, [{ id: TOOL_USE.id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
    const first = lastMessages(fake).body;
    assert.deepEqual(first.tools, [{ name: 'get_weather', description: 'Current weather for a city', input_schema: WEATHER_TOOL.function.parameters }]);
    assert.deepEqual(first.tool_choice, { type: 'any', disable_parallel_tool_use: true });

    assert.ok(msg);
    const r2 = await client.chat.completions.create({
      model: 'claude',
      messages: [{ role: 'user', content: 'Weather in Paris?' }, msg, { role: 'tool', tool_call_id: TOOL_USE.id, content: '18°C, sunny' }],
      tools: [WEATHER_TOOL],
    });
    assert.equal(r2.choices[0]?.finish_reason, 'stop');
    const second = lastMessages(fake).body;
    assert.deepEqual(second.messages, [
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Let me check.' }, TOOL_USE] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: TOOL_USE.id, content: '18°C, sunny' }] },
    ]);
  });

  test('tool calling, streaming: id and name on the first delta, arguments reassemble', async () => {
    fake.enqueue({ kind: 'reply', content: [TOOL_USE, { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Rome' } }] });
    const stream = await client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'Weather?' }], tools: [WEATHER_TOOL], stream: true });
    const calls = new Map<number, { id?: string; name?: string; args: string; deltas: number }>();
    let finish: string | null | undefined;
    for await (const c of stream) {
      const ch = c.choices[0];
      if (ch?.finish_reason) finish = ch.finish_reason;
      for (const tc of ch?.delta.tool_calls ?? []) {
        const cur = calls.get(tc.index) ?? { args: '', deltas: 0 };
        if (cur.deltas === 0) {
          assert.ok(tc.id, 'the first delta of a tool call carries its id');
          assert.ok(tc.function?.name, 'and its name');
        } else assert.equal(tc.id, undefined);
        cur.id ??= tc.id;
        cur.name ??= tc.function?.name;
        cur.args += tc.function?.arguments ?? '';
        cur.deltas++;
        calls.set(tc.index, cur);
      }
    }
    assert.equal(finish, 'tool_calls');
    assert.deepEqual([...calls.keys()], [0, 1]);
    assert.equal(calls.get(0)?.id, TOOL_USE.id);
    assert.deepEqual(JSON.parse(calls.get(0)?.args ?? ''), { city: 'Paris' });
    assert.equal(calls.get(1)?.id, 'toolu_2');
    assert.deepEqual(JSON.parse(calls.get(1)?.args ?? ''), { city: 'Rome' });
    assert.ok((calls.get(0)?.deltas ?? 0) > 2, 'arguments arrive in fragments');
  });

  test('images: data URL → base64 block, http URL → url block', async () => {
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    await client.chat.completions.create({
      model: 'claude',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Compare these' },
            { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
            { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
          ],
        },
      ],
    });
    assert.deepEqual(lastMessages(fake).body.messages, [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Compare these' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
          { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
        ],
      },
    ]);
  });

  test('response_format json_schema → output_config.format', async () => {
    const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false };
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: '{"answer":"42"}' }] });
    const r = await client.chat.completions.create({
      model: 'claude',
      messages: [{ role: 'user', content: 'answer?' }],
      response_format: { type: 'json_schema', json_schema: { name: 'a', schema, strict: true } },
    });
    assert.deepEqual(JSON.parse(r.choices[0]?.message.content ?? ''), { answer: '42' });
    assert.deepEqual(lastMessages(fake).body.output_config, { format: { type: 'json_schema', schema } });
  });

  test('n > 1 → 400 unsupported_parameter, nothing sent upstream', async () => {
    const err = await rejection(client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'hi' }], n: 2 }));
    assert.ok(err instanceof OpenAI.BadRequestError, `got ${String(err)}`);
    assert.equal(err.code, 'unsupported_parameter');
    assert.equal(err.param, 'n');
    assert.equal(fake.requests.length, 0);
  });

  test('upstream 400 (the request is at fault) → 400 with the upstream message', async () => {
    fake.enqueue({ kind: 'error', status: 400, type: 'invalid_request_error', message: 'prompt is too long: 250000 tokens > 200000 maximum' });
    const err = await rejection(client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'hi' }] }));
    assert.ok(err instanceof OpenAI.BadRequestError, `got ${String(err)}`);
    assert.equal(err.type, 'invalid_request_error');
    assert.equal(err.code, 'context_length_exceeded');
    assert.match(err.message, /prompt is too long/);
    // A tool result with no tool_use before it: the strict upstream refuses, the client learns why.
    const err2 = await rejection(client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: 'toolu_x', content: 'r' }] }));
    assert.ok(err2 instanceof OpenAI.BadRequestError, `got ${String(err2)}`);
    assert.match(err2.message, /tool_use_id/);
  });

  test("upstream 401 (the gateway's key) → 502 upstream_auth_failed, key not leaked", async () => {
    const err = await rejection(client.chat.completions.create({ model: 'claude-badkey', messages: [{ role: 'user', content: 'hi' }] }));
    assert.ok(err instanceof OpenAI.InternalServerError, `got ${String(err)}`);
    assert.equal(err.status, 502);
    assert.equal(err.code, 'upstream_auth_failed');
    assert.doesNotMatch(err.message, /sk-ant/);
  });

  test('upstream 429 with retry-after → RateLimitError carrying retry-after', async () => {
    fake.enqueue({ kind: 'error', status: 429, type: 'rate_limit_error', message: 'Number of request tokens has exceeded your per-minute rate limit', headers: { 'retry-after': '7' } });
    const err = await rejection(client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'hi' }] }));
    assert.ok(err instanceof OpenAI.RateLimitError, `got ${String(err)}`);
    assert.equal(err.type, 'rate_limit_error');
    assert.equal(err.headers?.get('retry-after'), '7');
  });

  test('upstream 529 overloaded → 503 service_unavailable_error', async () => {
    fake.enqueue({ kind: 'error', status: 529, type: 'overloaded_error', message: 'Overloaded' });
    const err = await rejection(client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'hi' }] }));
    assert.ok(err instanceof OpenAI.InternalServerError, `got ${String(err)}`);
    assert.equal(err.status, 503);
    assert.equal(err.type, 'service_unavailable_error');
    assert.equal(err.code, 'upstream_unavailable');
    assert.ok(err.headers?.get('retry-after'));
  });

  test('an error event mid-stream: the for-await throws after the first chunks, never a clean finish', async () => {
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'one two three four five' }], errorAfter: { deltas: 2, type: 'overloaded_error', message: 'Overloaded' } });
    const stream = await client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'go' }], stream: true });
    const got: string[] = [];
    const err = await rejection(
      (async () => {
        for await (const c of stream) {
          assert.equal(c.choices[0]?.finish_reason ?? null, null);
          got.push(c.choices[0]?.delta.content ?? '');
        }
      })(),
    );
    assert.ok(err instanceof OpenAI.APIError, `got ${String(err)}`);
    assert.match(err.message, /Overloaded/);
    assert.equal(got.join(''), 'one two ');
  });

  test('an error event before any content fails the request with a status', async () => {
    fake.enqueue({
      kind: 'events',
      events: [
        { event: 'message_start', data: { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-test-1', content: [], stop_reason: null, usage: { input_tokens: 1, output_tokens: 1 } } } },
        { event: 'error', data: { type: 'error', error: { type: 'api_error', message: 'Internal server error' } } },
      ],
    });
    const err = await rejection(
      (async () => {
        const s = await client.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'go' }], stream: true });
        for await (const _ of s) {
          // nothing arrives
        }
      })(),
    );
    assert.ok(err instanceof OpenAI.InternalServerError, `got ${String(err)}`);
    assert.equal(err.status, 502);
  });

  test('embeddings on an Anthropic model → 400 model_not_supported; unconfigured backend → 503', async () => {
    const err = await rejection(client.embeddings.create({ model: 'claude', input: 'hi' }));
    assert.ok(err instanceof OpenAI.BadRequestError, `got ${String(err)}`);
    assert.equal(err.code, 'model_not_supported');
    const err2 = await rejection(client.chat.completions.create({ model: 'claude-nokey', messages: [{ role: 'user', content: 'hi' }] }));
    assert.ok(err2 instanceof OpenAI.APIError);
    assert.equal(err2.status, 503);
    assert.equal(err2.code, 'backend_not_configured');
    assert.equal(fake.requests.length, 0);
  });

  describe('LangChain ChatOpenAI', () => {
    const chat = (extra: Partial<ConstructorParameters<typeof ChatOpenAI>[0] & object> = {}): ChatOpenAI =>
      new ChatOpenAI({ model: 'claude', apiKey: 'unused', maxRetries: 0, configuration: { baseURL: gw.baseURL }, ...extra });

    test('invoke: text and usage_metadata', async () => {
      const msg = await chat().invoke([
        ['system', 'Be brief.'],
        ['human', 'Say hi'],
      ]);
      assert.equal(msg.content, 'echo: Say hi');
      assert.ok(msg.usage_metadata);
      assert.equal(msg.usage_metadata.total_tokens, msg.usage_metadata.input_tokens + msg.usage_metadata.output_tokens);
      assert.equal(lastMessages(fake).body.system, 'Be brief.');
    });

    test('stream: chunks concatenate to the answer, with streamed usage', async () => {
      fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'streamed words arrive here' }], usage: { input_tokens: 9, output_tokens: 4 } });
      let full: AIMessageChunk | undefined;
      let n = 0;
      for await (const chunk of await chat().stream('Stream to me')) {
        full = full ? full.concat(chunk) : chunk;
        n++;
      }
      assert.ok(full);
      assert.ok(n > 3);
      assert.equal(full.content, 'streamed words arrive here');
      assert.equal(full.usage_metadata?.input_tokens, 9);
      assert.equal(full.usage_metadata?.output_tokens, 4);
    });

    test('bindTools + invoke: tool_calls with ids and parsed args', async () => {
      fake.enqueue({ kind: 'reply', content: [TOOL_USE] });
      const msg = await chat().bindTools([WEATHER_TOOL]).invoke('What is the weather in Paris?');
      assert.deepEqual(msg.tool_calls?.map((t) => ({ id: t.id, name: t.name, args: t.args })), [{ id: TOOL_USE.id, name: 'get_weather', args: { city: 'Paris' } }]);
    });

    test('bindTools + stream: tool call chunks reassemble into parsed args', async () => {
      fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'Checking.' }, TOOL_USE] });
      let full: AIMessageChunk | undefined;
      for await (const chunk of await chat().bindTools([WEATHER_TOOL]).stream('What is the weather in Paris?')) full = full ? full.concat(chunk) : chunk;
      assert.ok(full);
      assert.equal(full.content, 'Checking.');
      assert.deepEqual(full.tool_calls?.map((t) => ({ id: t.id, name: t.name, args: t.args })), [{ id: TOOL_USE.id, name: 'get_weather', args: { city: 'Paris' } }]);
    });
  });
});
