import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startFakeOpenAI, type FakeUpstream } from './fake-openai-upstream.ts';

const API_KEY = 'sk-test-upstream';

async function until(cond: () => boolean, timeoutMs = 2000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error('timed out waiting for condition');
    await new Promise((r) => setTimeout(r, 5));
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

describe('fake OpenAI upstream', () => {
  let up: FakeUpstream;
  let client: OpenAI;

  before(async () => {
    up = await startFakeOpenAI({ apiKey: API_KEY });
    client = new OpenAI({ baseURL: up.url, apiKey: API_KEY, maxRetries: 0 });
  });
  afterEach(() => up.reset());
  after(async () => {
    await up.close();
  });

  test('non-stream chat completion is parsed by the SDK and the request is recorded', async () => {
    const res = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi there' }],
    });
    assert.match(res.id, /^chatcmpl-/);
    assert.equal(res.object, 'chat.completion');
    assert.equal(res.model, 'gpt-4o-mini');
    assert.equal(typeof res.created, 'number');
    assert.equal(typeof res.system_fingerprint, 'string');
    const choice = res.choices[0];
    assert.ok(choice);
    assert.deepEqual(choice.message, { role: 'assistant', content: 'Hello from gpt-4o-mini', refusal: null });
    assert.equal(choice.finish_reason, 'stop');
    assert.equal(choice.logprobs, null);
    assert.ok(res.usage);
    assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);

    assert.equal(up.requests.length, 1);
    const r = up.requests[0];
    assert.ok(r);
    assert.equal(r.method, 'POST');
    assert.equal(r.path, '/v1/chat/completions');
    assert.equal(r.headers['authorization'], `Bearer ${API_KEY}`);
    assert.ok(isRecord(r.body));
    assert.equal(r.body['model'], 'gpt-4o-mini');
  });

  test('default tool call for a "weather" question, scripted reply with headers', async () => {
    const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
      { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
    ];
    const res = await client.chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools,
    });
    const choice = res.choices[0];
    assert.ok(choice);
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    const call = choice.message.tool_calls?.[0];
    assert.ok(call && call.type === 'function');
    assert.match(call.id, /^call_/);
    assert.equal(call.function.name, 'get_weather');
    assert.equal(call.function.arguments, '{"city":"Paris"}');

    // tool_choice 'none' → plain text
    const none = await client.chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools,
      tool_choice: 'none',
    });
    assert.equal(none.choices[0]?.message.content, 'Hello from gpt-4o');

    up.enqueue({ kind: 'reply', content: 'scripted', finishReason: 'length', usage: { prompt_tokens: 3, completion_tokens: 4 }, headers: { 'x-extra': 'yes' } });
    const { data, response } = await client.chat.completions
      .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] })
      .withResponse();
    assert.equal(data.choices[0]?.message.content, 'scripted');
    assert.equal(data.choices[0]?.finish_reason, 'length');
    assert.deepEqual(data.usage, { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
    assert.equal(response.headers.get('x-extra'), 'yes');
  });

  test('stream consumed with the SDK, include_usage', async () => {
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);

    assert.ok(chunks.length >= 4);
    const ids = new Set(chunks.map((c) => c.id));
    assert.equal(ids.size, 1);
    for (const c of chunks) {
      assert.equal(c.object, 'chat.completion.chunk');
      assert.equal(c.model, 'gpt-4o-mini');
    }
    assert.deepEqual(chunks[0]?.choices[0]?.delta, { role: 'assistant', content: '' });
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    assert.equal(text, 'Hello from gpt-4o-mini');
    assert.deepEqual(
      chunks.slice(1, 4).map((c) => c.choices[0]?.delta.content),
      ['Hello ', 'from ', 'gpt-4o-mini'],
    );
    const finish = chunks[chunks.length - 2];
    assert.deepEqual(finish?.choices[0]?.delta, {});
    assert.equal(finish?.choices[0]?.finish_reason, 'stop');
    const last = chunks[chunks.length - 1];
    assert.ok(last);
    assert.deepEqual(last.choices, []);
    assert.ok(last.usage);
    assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
    for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);

    // without include_usage there is no usage key at all and no usage chunk
    const plain = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true });
    const plainChunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const c of plain) plainChunks.push(c);
    for (const c of plainChunks) {
      assert.equal('usage' in c, false);
      assert.equal(c.choices.length, 1);
    }
  });

  test('tool-call stream is reassembled (manually and by the SDK helper)', async () => {
    up.enqueue({
      kind: 'stream',
      toolCalls: [
        { id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { id: 'call_2', name: 'get_time', arguments: '{"tz":"Europe/Paris"}' },
      ],
    });
    const stream = await client.chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'x' }],
      stream: true,
    });
    const calls: Array<{ id: string; name: string; args: string }> = [];
    let finishReason: string | null = null;
    let argFragments = 0;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.finish_reason) finishReason = choice.finish_reason;
      for (const tc of choice.delta.tool_calls ?? []) {
        if (tc.id !== undefined) {
          assert.equal(tc.type, 'function');
          assert.equal(tc.function?.arguments, '');
          calls[tc.index] = { id: tc.id, name: tc.function?.name ?? '', args: '' };
        } else {
          assert.equal(tc.function?.name, undefined);
          const c = calls[tc.index];
          assert.ok(c);
          c.args += tc.function?.arguments ?? '';
          argFragments++;
        }
      }
    }
    assert.equal(finishReason, 'tool_calls');
    assert.deepEqual(calls, [
      { id: 'call_1', name: 'get_weather', args: '{"city":"Paris"}' },
      { id: 'call_2', name: 'get_time', args: '{"tz":"Europe/Paris"}' },
    ]);
    assert.ok(argFragments >= 4 && argFragments <= 6);

    // default weather heuristic, reassembled by the SDK's streaming helper
    const runner = client.chat.completions.stream({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: "what's the weather like?" }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }],
    });
    const final = await runner.finalChatCompletion();
    const call = final.choices[0]?.message.tool_calls?.[0];
    assert.ok(call && call.type === 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.equal(call.function.arguments, '{"city":"Paris"}');
    assert.equal(final.choices[0]?.finish_reason, 'tool_calls');
  });

  test('429 surfaces as OpenAI.RateLimitError with retry-after', async () => {
    up.enqueue({ kind: 'error', status: 429, headers: { 'retry-after': '7' } });
    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.RateLimitError);
        assert.equal(err.status, 429);
        assert.equal(err.headers?.get('retry-after'), '7');
        assert.equal(err.type, 'requests');
        assert.equal(err.code, 'rate_limit_exceeded');
        assert.match(err.message, /Upstream error 429/);
        return true;
      },
    );
    up.enqueue({ kind: 'error', status: 503, message: 'overloaded' });
    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
      (err: unknown) => err instanceof OpenAI.InternalServerError && err.type === 'server_error' && err.message.includes('overloaded'),
    );
  });

  test('auth, unknown path, malformed JSON and raw bodies use the OpenAI envelope', async () => {
    const bad = new OpenAI({ baseURL: up.url, apiKey: 'sk-wrong-key-1234', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (err: unknown) => {
      assert.ok(err instanceof OpenAI.AuthenticationError);
      assert.equal(err.code, 'invalid_api_key');
      assert.match(err.message, /Incorrect API key provided: sk-\*+1234/);
      return true;
    });

    const auth = { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' };
    const nf = await fetch(`${up.url}/xyz`, { method: 'POST', headers: auth, body: '{}' });
    assert.equal(nf.status, 404);
    assert.deepEqual(await nf.json(), {
      error: { message: 'Invalid URL (POST /v1/xyz)', type: 'invalid_request_error', param: null, code: null },
    });

    const mj = await fetch(`${up.url}/chat/completions`, { method: 'POST', headers: auth, body: '{"model":' });
    assert.equal(mj.status, 400);
    const mjBody: unknown = await mj.json();
    assert.ok(isRecord(mjBody) && isRecord(mjBody['error']));
    assert.equal(mjBody['error']['type'], 'invalid_request_error');
    assert.match(String(mjBody['error']['message']), /could not parse the JSON body/);

    up.enqueue({ kind: 'error', status: 502, rawBody: '<html>Bad Gateway</html>' });
    const raw = await fetch(`${up.url}/chat/completions`, { method: 'POST', headers: auth, body: '{"model":"m","messages":[]}' });
    assert.equal(raw.status, 502);
    assert.equal(await raw.text(), '<html>Bad Gateway</html>');
  });

  test('embeddings: SDK default (base64) decodes to the float response', async () => {
    const viaBase64 = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['hello', 'world'] });
    const lastBody = up.requests[up.requests.length - 1]?.body;
    assert.ok(isRecord(lastBody));
    assert.equal(lastBody['encoding_format'], 'base64');
    const viaFloat = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['hello', 'world'], encoding_format: 'float' });

    assert.equal(viaBase64.object, 'list');
    assert.equal(viaBase64.model, 'text-embedding-3-small');
    assert.equal(viaBase64.data.length, 2);
    assert.deepEqual(
      viaBase64.data.map((d) => d.embedding),
      viaFloat.data.map((d) => d.embedding),
    );
    const [a, b] = viaFloat.data;
    assert.ok(a && b);
    assert.equal(a.object, 'embedding');
    assert.deepEqual([a.index, b.index], [0, 1]);
    assert.equal(a.embedding.length, 8);
    assert.notDeepEqual(a.embedding, b.embedding);
    const norm = Math.sqrt(a.embedding.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5);
    assert.ok(viaFloat.usage.prompt_tokens > 0);
    assert.equal(viaFloat.usage.total_tokens, viaFloat.usage.prompt_tokens);

    // deterministic, `dimensions`, token inputs
    const again = await client.embeddings.create({ model: 'e', input: 'hello', encoding_format: 'float' });
    assert.deepEqual(again.data[0]?.embedding, a.embedding);
    const dims = await client.embeddings.create({ model: 'e', input: [[1, 2, 3], [4, 5]], dimensions: 16, encoding_format: 'float' });
    assert.equal(dims.data[0]?.embedding.length, 16);
    assert.equal(dims.usage.prompt_tokens, 5);

    // vendors that ignore base64
    const floaty = await startFakeOpenAI({ embeddingsIgnoreBase64: true });
    try {
      const res = await fetch(`${floaty.url}/embeddings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'e', input: 'hello', encoding_format: 'base64' }),
      });
      const json: unknown = await res.json();
      assert.ok(isRecord(json) && Array.isArray(json['data']));
      const first: unknown = json['data'][0];
      assert.ok(isRecord(first));
      assert.deepEqual(first['embedding'], a.embedding);
    } finally {
      await floaty.close();
    }
  });

  test('raw fetch: SSE framing, [DONE] terminator, per-write timestamps', async () => {
    up.enqueue({ kind: 'stream', chunks: ['a', 'b', 'c'], delayMs: 15 });
    const res = await fetch(`${up.url}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const text = await res.text();
    assert.ok(text.endsWith('data: [DONE]\n\n'));
    assert.ok(!text.includes('\n\n\n'));
    const events = text.slice(0, -2).split('\n\n');
    for (const ev of events) {
      assert.ok(ev.startsWith('data: '), `bad event ${JSON.stringify(ev)}`);
      assert.ok(!ev.includes('\n'), 'one line per event');
    }
    assert.equal(events[events.length - 1], 'data: [DONE]');
    const parsed = events.slice(0, -1).map((e): unknown => JSON.parse(e.slice('data: '.length)));
    // role, a, b, c, finish
    assert.equal(parsed.length, 5);
    assert.equal(up.lastStreamWrites.length, 6);
    for (let i = 1; i < up.lastStreamWrites.length; i++) {
      const gap = (up.lastStreamWrites[i] ?? 0) - (up.lastStreamWrites[i - 1] ?? 0);
      assert.ok(gap >= 10, `gap ${gap}`);
    }

    // legacy completions stream
    const legacy = await fetch(`${up.url}/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-3.5-turbo-instruct', prompt: 'say', stream: true }),
    });
    const ltext = await legacy.text();
    assert.ok(ltext.endsWith('data: [DONE]\n\n'));
    const lchunks = ltext
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e): unknown => JSON.parse(e.slice(6)));
    const texts = lchunks.map((c) => (isRecord(c) && Array.isArray(c['choices']) && isRecord(c['choices'][0]) ? c['choices'][0]['text'] : undefined));
    assert.equal(texts.join(''), 'Hello from gpt-3.5-turbo-instruct');
    for (const c of lchunks) assert.ok(isRecord(c) && c['object'] === 'text_completion');
  });

  test('legacy completions, models list and onModel precedence via SDK', async () => {
    const c = await client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'hi' });
    assert.equal(c.object, 'text_completion');
    assert.equal(c.choices[0]?.text, 'Hello from gpt-3.5-turbo-instruct');
    assert.equal(c.choices[0]?.finish_reason, 'stop');
    assert.equal(c.choices[0]?.logprobs, null);

    const models = await client.models.list();
    assert.ok(models.data.length >= 2);
    assert.ok(models.data.every((m) => m.object === 'model' && typeof m.owned_by === 'string'));

    up.onModel('special', { kind: 'reply', content: 'ruled' });
    up.enqueue({ kind: 'reply', content: 'queued' });
    const ruled = await client.chat.completions.create({ model: 'special', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(ruled.choices[0]?.message.content, 'ruled');
    const queued = await client.chat.completions.create({ model: 'other', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(queued.choices[0]?.message.content, 'queued');
    const dflt = await client.chat.completions.create({ model: 'other', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(dflt.choices[0]?.message.content, 'Hello from other');
  });

  test('mid-stream error, dropped socket and destroyed socket', async () => {
    up.enqueue({ kind: 'stream', chunks: ['a', 'b', 'c'], errorAfter: { after: 1, message: 'boom' } });
    const s1 = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true });
    const got: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const c of s1) got.push(c.choices[0]?.delta.content ?? '');
      })(),
      (err: unknown) => err instanceof OpenAI.APIError && err.message.includes('boom'),
    );
    assert.deepEqual(got, ['', 'a']);

    up.enqueue({ kind: 'stream', chunks: ['a', 'b', 'c'], dropAfter: 2 });
    const s2 = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true });
    const got2: string[] = [];
    await assert.rejects(async () => {
      for await (const c of s2) got2.push(c.choices[0]?.delta.content ?? '');
    });
    assert.deepEqual(got2, ['', 'a', 'b']);

    up.enqueue({ kind: 'destroy' });
    await assert.rejects(
      client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
      (err: unknown) => err instanceof OpenAI.APIConnectionError,
    );
    assert.equal(up.clientAborts, 0, 'server-side destroys are not client aborts');
  });

  test('waitForClientAbort fires when a fetch is aborted mid-stream', async () => {
    up.enqueue({ kind: 'stream', chunks: Array.from({ length: 50 }, (_, i) => `w${i} `), delayMs: 20 });
    const ac = new AbortController();
    const res = await fetch(`${up.url}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }),
      signal: ac.signal,
    });
    assert.ok(res.body);
    const reader = res.body.getReader();
    const first = await reader.read();
    assert.equal(first.done, false);
    ac.abort();
    await up.waitForClientAbort(1);
    assert.equal(up.clientAborts, 1);
    const writesAtAbort = up.lastStreamWrites.length;
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(up.lastStreamWrites.length, writesAtAbort, 'no writes after the client went away');
  });

  test('hang + client-side AbortController', async () => {
    up.enqueue({ kind: 'hang' });
    const ac = new AbortController();
    const p = client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }, { signal: ac.signal });
    await until(() => up.requests.length === 1);
    ac.abort();
    await assert.rejects(p, (err: unknown) => err instanceof OpenAI.APIUserAbortError);
    await up.waitForClientAbort();
    assert.equal(up.clientAborts, 1);
  });

  test('hangAfterHeaders sends 200 + SSE headers, then nothing', async () => {
    up.enqueue({ kind: 'hangAfterHeaders' });
    const ac = new AbortController();
    const res = await fetch(`${up.url}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }),
      signal: ac.signal,
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    ac.abort();
    await up.waitForClientAbort(1);
  });
});

test('close() does not hang with open hanging requests', async () => {
  const up = await startFakeOpenAI();
  up.enqueue({ kind: 'hang' });
  const p = fetch(`${up.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [] }),
  }).catch((e: unknown) => e);
  await until(() => up.requests.length === 1);
  await up.close();
  assert.ok((await p) instanceof Error);
  assert.equal(up.clientAborts, 0);
});
