/**
 * `type: llamacpp` end to end: the real gateway, the official openai SDK, and a fake llama-server
 * that follows llama-server's documented API (test/support/fake-llama-server.ts).
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { LlamaCppBackend } from '../src/backends/llamacpp/backend.ts';
import { parseConfig } from '../src/config/load.ts';
import { llamacppBackendSchema } from '../src/config/schema.ts';
import { startServer } from '../src/main.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { fakeLlamaVector, startFakeLlamaServer, type FakeLlamaServer, type FakeLlamaOptions } from './support/fake-llama-server.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const POLL_MS = 40;

function yamlFor(urls: Record<string, string>, extra = ''): string {
  const backends = Object.entries(urls)
    .map(([n, u]) => `  ${n}: { type: llamacpp, base_url: "${u}", slots_poll_ms: ${POLL_MS}, load_timeout_ms: 5000${extra} }`)
    .join('\n');
  // No retries of the same target (each scripted fake answer is one attempt), and no breaker
  // opening on the errors these tests provoke on purpose.
  return `routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0, min_requests: 100000 } }\nbackends:\n${backends}\n  demo: { type: fake }\nmodels:\n  local: { targets: [ { backend: ${Object.keys(urls)[0]}, model: tiny } ] }\n  local-or-demo: { targets: [ { backend: ${Object.keys(urls)[0]}, model: tiny }, { backend: demo, model: echo } ] }\n`;
}

interface Envelope {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, what: string, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

function llamaOf(gw: TestGateway, name = 'llama'): LlamaCppBackend {
  const e = gw.running.deps.registry.get(name);
  assert.ok(e && e.llm instanceof LlamaCppBackend);
  return e.llm;
}

async function post(gw: TestGateway, path: string, body: unknown): Promise<Response> {
  return fetch(`${gw.baseURL}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

describe('llamacpp config', () => {
  it('accepts a llama-server backend with defaults, and local targets cost nothing unless priced', () => {
    const { config } = parseConfig(
      [
        'backends:',
        '  local: { type: llamacpp, base_url: "http://127.0.0.1:8080" }',
        '  openai: { type: openai, base_url: "https://api.openai.com/v1" }',
        'models:',
        '  chat:',
        '    policy: cost',
        '    targets:',
        '      - { backend: local, model: qwen }',
        '      - { backend: local, model: qwen-priced, price: { input: 0.01, output: 0.02 } }',
        '      - { backend: openai, model: gpt-4o-mini }',
        '',
      ].join('\n'),
      'test.yaml',
      {},
    );
    const b = config.backends.local;
    assert.ok(b && b.type === 'llamacpp');
    assert.equal(b.load_timeout_ms, 600_000);
    assert.equal(b.slots_poll_ms, 1_000);
    assert.equal(b.timeout_ms, 600_000);
    assert.equal(b.api_key, undefined);
    const t = config.models.chat?.targets ?? [];
    assert.deepEqual(t[0]?.price, { input: 0, output: 0 });
    assert.deepEqual(t[1]?.price, { input: 0.01, output: 0.02 });
    assert.equal(t[2]?.price, undefined);
  });

  it('rejects unknown fields and non-URLs, naming the path', () => {
    assert.throws(
      () => parseConfig('backends:\n  l: { type: llamacpp, base_url: "localhost:8080", slot_poll_ms: 5 }\nmodels:\n  m: { targets: [ { backend: l, model: x } ] }\n', 't.yaml', {}),
      (err: Error) => /backends\.l\.base_url: must be an http\(s\) URL/.test(err.message) && /backends\.l\.slot_poll_ms: unknown field \(did you mean "slots_poll_ms"\?\)/.test(err.message),
    );
    assert.equal(llamacppBackendSchema.safeParse({ type: 'llamacpp', base_url: 'http://h:1', load_timeout_ms: 0 }).success, false);
  });
});

describe('llamacpp backend through the gateway', () => {
  let llama: FakeLlamaServer;
  let gw: TestGateway;
  let client: OpenAI;

  before(async () => {
    llama = await startFakeLlamaServer({ slots: 4, embeddingDim: 8 });
    gw = await startGateway(yamlFor({ llama: llama.url }));
    client = new OpenAI({ baseURL: gw.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await gw.close();
    await llama.close();
  });

  it('chat: the answer, with llama-server extras passed up and `timings` passed back', async () => {
    const { data, response } = await client.chat.completions
      .create({
        model: 'local',
        messages: [{ role: 'user', content: 'hi there' }],
        // llama-server's own request fields
        cache_prompt: true,
        n_probs: 2,
        grammar: 'root ::= [a-z ]+',
      } as OpenAI.ChatCompletionCreateParamsNonStreaming)
      .withResponse();
    assert.equal(data.choices[0]?.message.content, 'llama says: hi there');
    assert.equal(data.choices[0]?.finish_reason, 'stop');
    assert.equal(response.headers.get('x-switchyard-backend'), 'llama');
    assert.equal(response.headers.get('x-switchyard-model'), 'tiny');
    const timings = (data as unknown as { timings?: Record<string, number> }).timings;
    assert.ok(timings && typeof timings.predicted_per_second === 'number' && typeof timings.prompt_n === 'number', 'timings came back');
    assert.equal(data.choices[0]?.logprobs?.content?.[0]?.top_logprobs.length, 2, 'n_probs → top_logprobs');
    const sent = llama.requests.findLast((r) => r.path === '/v1/chat/completions')?.body as Record<string, unknown>;
    assert.equal(sent.model, 'tiny');
    assert.equal(sent.cache_prompt, true);
    assert.equal(sent.n_probs, 2);
    assert.equal(sent.grammar, 'root ::= [a-z ]+');
  });

  it('chat: a repeated prompt with cache_prompt shows up as cached in timings', async () => {
    const body = { model: 'local', messages: [{ role: 'user' as const, content: 'same prompt again' }], cache_prompt: true };
    await client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const r = await client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const timings = (r as unknown as { timings: { cache_n: number } }).timings;
    assert.ok(timings.cache_n > 0);
  });

  it('chat: reasoning_content and json_schema pass through', async () => {
    const r = await client.chat.completions.create({ model: 'local', messages: [{ role: 'user', content: 'think: about it' }] });
    const msg = r.choices[0]?.message as unknown as { content: string; reasoning_content?: string };
    assert.equal(msg.reasoning_content, 'thinking about about it');
    assert.equal(msg.content, 'done thinking');
    const j = await client.chat.completions.create({
      model: 'local',
      messages: [{ role: 'user', content: 'x' }],
      json_schema: { type: 'object', properties: { answer: { type: 'string' } } },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    assert.deepEqual(JSON.parse(j.choices[0]?.message.content ?? ''), { answer: 'x' });
    const sent = llama.requests.findLast((r) => r.path === '/v1/chat/completions')?.body as Record<string, unknown>;
    assert.deepEqual(sent.json_schema, { type: 'object', properties: { answer: { type: 'string' } } });
  });

  it('streaming chat: chunks as llama-server frames them, reasoning deltas, `timings` on the last chunk', async () => {
    const stream = await client.chat.completions.create({
      model: 'local',
      messages: [{ role: 'user', content: 'think: streams' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let reasoning = '';
    let finish: string | null = null;
    let last: Record<string, unknown> | undefined;
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined;
      content += d?.content ?? '';
      reasoning += d?.reasoning_content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      last = chunk as unknown as Record<string, unknown>;
    }
    assert.equal(reasoning, 'thinking about streams');
    assert.equal(content, 'done thinking');
    assert.equal(finish, 'stop');
    assert.ok(last?.usage, 'usage chunk (asked for)');
    assert.ok(last?.timings, 'timings on the last chunk');
  });

  it('legacy completions, JSON and streamed', async () => {
    const r = await client.completions.create({ model: 'local', prompt: 'once upon', max_tokens: 2 });
    assert.equal(r.choices[0]?.text, 'llama says: ');
    assert.equal(r.choices[0]?.finish_reason, 'length');
    const s = await client.completions.create({ model: 'local', prompt: 'once upon', stream: true });
    let text = '';
    for await (const c of s) text += c.choices[0]?.text ?? '';
    assert.equal(text, 'llama says: once upon');
  });

  it('embeddings: floats from llama-server, answered as floats or base64 as the client asks', async () => {
    const expected = fakeLlamaVector('hello world');
    // The SDK asks for base64 by default and decodes it.
    const viaSdk = await client.embeddings.create({ model: 'local', input: ['hello world', 'second'] });
    assert.equal(viaSdk.data.length, 2);
    const got = viaSdk.data[0]?.embedding ?? [];
    assert.equal(got.length, 8);
    got.forEach((x, i) => assert.ok(Math.abs(x - (expected[i] ?? NaN)) < 1e-6));
    const asked = llama.requests.findLast((r) => r.path === '/v1/embeddings')?.body as Record<string, unknown>;
    assert.equal(asked.encoding_format, 'base64', 'the client format goes upstream (newer servers honour it)');

    const b64 = (await (await post(gw, '/embeddings', { model: 'local', input: 'hello world', encoding_format: 'base64' })).json()) as {
      data: Array<{ embedding: unknown }>;
    };
    assert.equal(typeof b64.data[0]?.embedding, 'string');
    const floats = (await (await post(gw, '/embeddings', { model: 'local', input: 'hello world' })).json()) as {
      data: Array<{ embedding: number[] }>;
      usage: { prompt_tokens: number };
    };
    assert.deepEqual(floats.data[0]?.embedding, expected);
    assert.equal(floats.usage.prompt_tokens, 2);
  });

  it('errors in llama-server shape become the OpenAI envelope', async () => {
    // exceed_context_size_error → 400 context_length_exceeded, llama-server's message kept
    const long = Array.from({ length: 300 }, () => 'w').join(' ');
    const res = await post(gw, '/chat/completions', { model: 'local', messages: [{ role: 'user', content: long }] });
    assert.equal(res.status, 400);
    const e = ((await res.json()) as Envelope).error;
    assert.equal(e.code, 'context_length_exceeded');
    assert.equal(e.type, 'invalid_request_error');
    assert.match(e.message, /exceeds the available context size \(256 tokens\)/);

    // a plain invalid_request_error keeps its message and does not fail over
    llama.enqueue({ kind: 'error', status: 400, message: 'Cannot use both json_schema and grammar', type: 'invalid_request_error' });
    const r2 = await post(gw, '/chat/completions', { model: 'local-or-demo', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(r2.status, 400);
    assert.equal(((await r2.json()) as Envelope).error.message, 'Cannot use both json_schema and grammar');

    // a server error fails over to the next target
    llama.enqueue({ kind: 'error', status: 500, message: 'got exception: boom', type: 'server_error' });
    const r3 = await post(gw, '/chat/completions', { model: 'local-or-demo', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(r3.status, 200);
    assert.equal(r3.headers.get('x-switchyard-backend'), 'demo');

    // a plain-text 500 body is still an envelope
    llama.enqueue({ kind: 'plain500' });
    const r4 = await post(gw, '/chat/completions', { model: 'local', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(r4.status, 502);
    const e4 = ((await r4.json()) as Envelope).error;
    assert.equal(e4.code, 'upstream_error');
    assert.match(e4.message, /Internal Server Error/);
  });

  for (const format of ['data', 'error-line', 'event'] as const) {
    it(`a mid-stream error event (${format} framing) reaches the client as an error, not a clean end`, async () => {
      llama.enqueue({ kind: 'midStreamError', after: 1, message: 'The model produced output that does not match the expected format', format });
      const stream = await client.chat.completions.create({ model: 'local', messages: [{ role: 'user', content: 'one two three' }], stream: true });
      let content = '';
      await assert.rejects(
        async () => {
          for await (const c of stream) content += c.choices[0]?.delta.content ?? '';
        },
        (err: unknown) => {
          assert.ok(err instanceof OpenAI.APIError, `an APIError, got ${String(err)}`);
          assert.match(err.message, /mid-stream: The model produced output that does not match the expected format/);
          return true;
        },
      );
      assert.equal(content, 'llama ', 'what came before the error was delivered');
    });
  }

  it('capacity() follows /slots and counts the gateway’s own requests between polls', async () => {
    const backend = llamaOf(gw);
    llama.setBusy(3);
    await until(() => backend.capacity()?.busy === 3, 'a poll to see 3 busy slots');
    assert.deepEqual(backend.capacity(), { total: 4, busy: 3 });

    // A request in flight counts at once, before the next poll can see it.
    llama.enqueue({ kind: 'hold' });
    const pending = client.chat.completions.create({ model: 'local', messages: [{ role: 'user', content: 'hold on' }] });
    await until(() => llama.holding === 1, 'the request to reach llama-server');
    assert.ok((backend.capacity()?.busy ?? 0) >= 4);
    await sleep(POLL_MS * 3);
    assert.deepEqual(backend.capacity(), { total: 4, busy: 4 }, 'counted once, not twice, after a poll saw it');
    llama.release();
    await pending;
    llama.setBusy(0);
    await until(() => backend.capacity()?.busy === 0, 'an idle server');
    assert.deepEqual(backend.capacity(), { total: 4, busy: 0 });
  });

  it('a slot busy elsewhere is reported busy, not failed', async () => {
    const backend = llamaOf(gw);
    llama.setBusy(4);
    await until(() => backend.capacity()?.busy === 4, 'a full server');
    const h = await backend.health();
    assert.equal(h.ready, true);
    llama.setBusy(0);
  });
});

describe('llamacpp readiness', () => {
  it('/ready is 503 while llama-server loads its model, requests fail over, then 200 once loaded', async () => {
    const llama = await startFakeLlamaServer({ loading: true });
    const logs: string[] = [];
    const loaded = parseConfig(yamlFor({ llama: llama.url }), 'test.yaml', {});
    const running = await startServer(loaded, { logger: createLogger('debug', (l) => void logs.push(l)), port: 0, host: '127.0.0.1' });
    try {
      await sleep(POLL_MS * 3);
      const r1 = await fetch(`${running.url}/ready`);
      assert.equal(r1.status, 503);
      assert.match(((await r1.json()) as Envelope).error.message, /loading "llama"/);

      // loading is "not ready", not "broken": 503 backend_not_ready, and the next target serves
      const direct = await fetch(`${running.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'local', messages: [{ role: 'user', content: 'x' }] }),
      });
      assert.equal(direct.status, 503);
      assert.ok(Number(direct.headers.get('retry-after')) > 0);
      const e = ((await direct.json()) as Envelope).error;
      assert.equal(e.code, 'backend_not_ready');
      assert.match(e.message, /"llama" is still loading/);
      const failover = await fetch(`${running.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'local-or-demo', messages: [{ role: 'user', content: 'x' }] }),
      });
      assert.equal(failover.status, 200);
      assert.equal(failover.headers.get('x-switchyard-backend'), 'demo');
      const backend = running.deps.registry.get('llama')?.llm;
      assert.equal(backend?.capacity?.(), undefined, 'no capacity while loading');

      llama.setLoading(false);
      await running.deps.lifecycle.loading;
      const r2 = await fetch(`${running.url}/ready`);
      assert.equal(r2.status, 200);
      const ready = (await r2.json()) as { status: string; backends: Record<string, string> };
      assert.equal(ready.status, 'ready');
      assert.deepEqual(ready.backends, { llama: 'ready', demo: 'ready' });
      assert.ok(logs.some((l) => l.includes('"msg":"llama-server ready"')));

      // Restarted and loading again: llama-server's own 503 "Loading model" → 503 backend_not_ready.
      llama.setLoading(true);
      const again = await fetch(`${running.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'local', messages: [{ role: 'user', content: 'x' }] }),
      });
      assert.equal(again.status, 503);
      const e2 = ((await again.json()) as Envelope).error;
      assert.equal(e2.code, 'backend_not_ready');
      assert.match(e2.message, /llama-server backend "llama" is not ready: it is still loading its model/);
      assert.equal(backend?.capacity?.(), undefined, 'no capacity while it reloads');
      llama.setLoading(false);
      await until(() => backend?.capacity?.() !== undefined, 'ready again');
    } finally {
      await running.close(0);
      await llama.close();
    }
  });

  it('a server unreachable at start fails its load after load_timeout_ms, and rejoins when it comes up', async () => {
    const port = await freePort();
    const yaml = yamlFor({ llama: `http://127.0.0.1:${port}` }).replace('load_timeout_ms: 5000', 'load_timeout_ms: 200');
    const running = await startServer(parseConfig(yaml, 'test.yaml', {}), { logger: createLogger('silent'), port: 0, host: '127.0.0.1' });
    let llama: FakeLlamaServer | undefined;
    try {
      await running.deps.lifecycle.loading;
      const entry = running.deps.registry.get('llama');
      assert.equal(entry?.status, 'failed');
      assert.match(entry?.loadError ?? '', /did not become ready \(ECONNREFUSED\) after 200 ms; still checking/);
      const r = await fetch(`${running.url}/ready`);
      assert.equal(r.status, 200, 'the gateway is ready: the other backends serve');
      const h = await entry?.llm.health?.({ signal: AbortSignal.timeout(2000), requestId: 't' });
      assert.deepEqual(h && { ok: h.ok, ready: h.ready }, { ok: false, ready: false });

      llama = await startFakeLlamaServer({ port });
      await until(() => entry?.status === 'ready', 'the registry to mark it ready again');
      const res = await fetch(`${running.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'local', messages: [{ role: 'user', content: 'back' }] }),
      });
      assert.equal(res.status, 200);
    } finally {
      await running.close(0);
      await llama?.close();
    }
  });
});

describe('llamacpp server variants', () => {
  async function withServer(opts: FakeLlamaOptions, extra: string, fn: (gw: TestGateway, llama: FakeLlamaServer) => Promise<void>): Promise<void> {
    const llama = await startFakeLlamaServer(opts);
    const gw = await startGateway(yamlFor({ llama: llama.url }, extra));
    try {
      await fn(gw, llama);
    } finally {
      await gw.close();
      await llama.close();
    }
  }

  it('started without --embeddings: 400 unsupported naming the flag (another target still serves)', async () => {
    await withServer({ embeddings: false }, '', async (gw) => {
      const res = await post(gw, '/embeddings', { model: 'local', input: 'x' });
      assert.equal(res.status, 400);
      const e = ((await res.json()) as Envelope).error;
      assert.equal(e.code, 'unsupported');
      assert.match(e.message, /llama-server backend "llama" was started without --embeddings/);
      const ok = await post(gw, '/embeddings', { model: 'local-or-demo', input: 'x' });
      assert.equal(ok.status, 200);
      assert.equal(ok.headers.get('x-switchyard-backend'), 'demo');
    });
  });

  it('--pooling none: a clear error, whether the server refuses (400) or answers per-token vectors', async () => {
    for (const pooling of ['none', 'legacy2d'] as const) {
      await withServer({ pooling }, '', async (gw) => {
        const res = await post(gw, '/embeddings', { model: 'local', input: 'x y' });
        assert.equal(res.status, 400, pooling);
        const e = ((await res.json()) as Envelope).error;
        assert.equal(e.code, 'unsupported');
        assert.match(e.message, /--pooling none/);
      });
    }
  });

  it('--api-key: sent on every route; a wrong key is the gateway’s problem (502), not the client’s', async () => {
    await withServer({ apiKey: 'llama-secret-key-1', slots: 3 }, ', api_key: "llama-secret-key-1"', async (gw, llama) => {
      const r = await post(gw, '/chat/completions', { model: 'local', messages: [{ role: 'user', content: 'x' }] });
      assert.equal(r.status, 200);
      await until(() => llamaOf(gw).capacity()?.total === 3, '/slots with the key');
      assert.ok(llama.requests.some((q) => q.path === '/slots' && q.headers.authorization === 'Bearer llama-secret-key-1'));
    });
    await withServer({ apiKey: 'llama-secret-key-1' }, ', api_key: "wrong-key-000000"', async (gw) => {
      const r = await post(gw, '/chat/completions', { model: 'local', messages: [{ role: 'user', content: 'x' }] });
      assert.equal(r.status, 502);
      const body = await r.text();
      assert.match(body, /upstream_auth_failed/);
      assert.ok(!body.includes('wrong-key-000000'));
    });
  });

  it('--no-slots: capacity from /props total_slots and the gateway’s own requests', async () => {
    await withServer({ slotsEndpoint: false, slots: 3 }, '', async (gw, llama) => {
      const backend = llamaOf(gw);
      await until(() => backend.capacity() !== undefined, 'capacity from /props');
      assert.deepEqual(backend.capacity(), { total: 3, busy: 0 });
      llama.enqueue({ kind: 'hold' });
      const pending = post(gw, '/chat/completions', { model: 'local', messages: [{ role: 'user', content: 'x' }] });
      await until(() => llama.holding === 1, 'the held request');
      assert.deepEqual(backend.capacity(), { total: 3, busy: 1 });
      llama.release();
      assert.equal((await pending).status, 200);
      assert.deepEqual(backend.capacity(), { total: 3, busy: 0 });
    });
  });

  it('base_url may end in /v1', async () => {
    const llama = await startFakeLlamaServer();
    const gw = await startGateway(yamlFor({ llama: `${llama.url}/v1/` }));
    try {
      const r = await post(gw, '/chat/completions', { model: 'local', messages: [{ role: 'user', content: 'x' }] });
      assert.equal(r.status, 200);
      assert.ok(llama.requests.some((q) => q.path === '/health'));
    } finally {
      await gw.close();
      await llama.close();
    }
  });
});

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}
