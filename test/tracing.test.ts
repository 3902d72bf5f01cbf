/**
 * OpenTelemetry traces end to end: a real gateway exporting through OpenTelemetry's OTLP/HTTP
 * exporters to a receiver in this test (test/support/otlp-receiver.ts), in protobuf and in JSON. Checks what a collector would show: span names,
 * kinds, parent/child links, GenAI attributes, a failover's two attempts, a stream's span ending
 * after its last chunk, and the trace context continued from the client and passed upstream.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { SPAN_KIND, startReceiver, type Obj, type Receiver, type SpanView } from './support/otlp-receiver.ts';
import { upstreamsWithGateway } from './support/suite.ts';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { configSchema } from '../src/config/schema.ts';
import { MAX_CONTENT_CHARS, resolveTracing } from '../src/telemetry/tracing.ts';


const CLIENT_KEY = 'sk-client-key-123456';

const yaml = (a: string, b: string, block = ''): string => `
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0, min_requests: 1000000 } }
keys: [ { name: app, key: "${CLIENT_KEY}" } ]
backends:
  a: { type: openai, base_url: "${a}", api_key: "sk-a-secret" }
  b: { type: openai, base_url: "${b}", api_key: "sk-b-secret" }
models:
  m: { targets: [ { backend: a, model: a-model }, { backend: b, model: b-model } ] }
${block}`;

async function chat(base: string, body: Obj, headers: Record<string, string> = {}): Promise<{ status: number; text: string; requestId: string }> {
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}`, ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), requestId: res.headers.get('x-request-id') ?? '' };
}

/** The request's server span and its attempt spans, once all of them arrived. */
async function traceOf(rx: Receiver, requestId: string, attempts: number): Promise<{ server: SpanView; children: SpanView[] }> {
  const find = (): { server: SpanView; children: SpanView[] } | undefined => {
    const server = rx.spans.find((s) => s.attrs['switchyard.request_id'] === requestId);
    if (server === undefined) return undefined;
    const children = rx.spans.filter((s) => s.parentSpanId === server.spanId && s.traceId === server.traceId);
    return children.length >= attempts ? { server, children: children.sort((x, y) => Number(x.attrs['switchyard.attempt']) - Number(y.attrs['switchyard.attempt'])) } : undefined;
  };
  await rx.waitFor(() => find() !== undefined, `request ${requestId}`);
  return find() as { server: SpanView; children: SpanView[] };
}

// spans leave the BatchSpanProcessor 10 ms after they end (the standard variable, read by the SDK)
process.env.OTEL_BSP_SCHEDULE_DELAY = '10';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_PARENT = '00f067aa0ba902b7';

describe('tracing over OTLP/HTTP protobuf (configured by the OTEL_* variables)', () => {
  let rx: Receiver;
  const saved = { ...process.env };
  before(async () => {
    rx = await startReceiver();
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = rx.url;
    process.env.OTEL_SERVICE_NAME = 'switchyard-under-test';
  });
  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: {}, fakeB: {} },
    yaml: ({ fakeA, fakeB }) => yaml(fakeA.url, fakeB.url),
  });
  after(async () => {
    for (const k of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_SERVICE_NAME']) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });
  after(() => rx.close());

  test('a chat request: SERVER span continuing the client trace, CLIENT attempt span, traceparent upstream, ids in the log', async () => {
    const r = await chat(
      ctx.gw.baseURL,
      { model: 'm', messages: [{ role: 'user', content: 'secret prompt text' }], max_tokens: 50, temperature: 0.3, top_p: 0.9 },
      { traceparent: `00-${TRACE_ID}-${CLIENT_PARENT}-01`, tracestate: 'vendor=x1' },
    );
    assert.equal(r.status, 200, r.text);
    const { server, children } = await traceOf(rx, r.requestId, 1);
    assert.ok([...rx.contentTypes].some((t) => t.startsWith('application/x-protobuf')), 'exported as protobuf');

    assert.equal(server.kind, SPAN_KIND.SERVER);
    assert.equal(server.name, 'POST /v1/chat/completions');
    assert.equal(server.traceId, TRACE_ID, 'the client trace is continued');
    assert.equal(server.parentSpanId, CLIENT_PARENT);
    assert.equal(server.attrs['http.request.method'], 'POST');
    assert.equal(server.attrs['http.route'], '/v1/chat/completions');
    assert.equal(server.attrs['url.path'], '/v1/chat/completions');
    assert.equal(server.attrs['http.response.status_code'], 200);
    assert.equal(server.resource['service.name'], 'switchyard-under-test');

    assert.equal(children.length, 1);
    const [at] = children as [SpanView];
    assert.equal(at.kind, SPAN_KIND.CLIENT);
    assert.equal(at.name, 'chat a-model');
    assert.equal(at.attrs['gen_ai.operation.name'], 'chat');
    assert.equal(at.attrs['gen_ai.provider.name'], 'openai');
    assert.equal(at.attrs['gen_ai.request.model'], 'a-model');
    assert.equal(at.attrs['gen_ai.response.model'], 'a-model');
    assert.equal(typeof at.attrs['gen_ai.response.id'], 'string');
    assert.equal(at.attrs['gen_ai.request.max_tokens'], 50);
    assert.equal(at.attrs['gen_ai.request.temperature'], 0.3);
    assert.equal(at.attrs['gen_ai.request.top_p'], 0.9);
    assert.deepEqual(at.attrs['gen_ai.response.finish_reasons'], ['stop']);
    assert.ok(Number(at.attrs['gen_ai.usage.input_tokens']) > 0);
    assert.ok(Number(at.attrs['gen_ai.usage.output_tokens']) > 0);
    assert.equal(at.attrs['server.address'], '127.0.0.1');
    assert.equal(typeof at.attrs['server.port'], 'number');
    assert.equal(at.attrs['switchyard.backend'], 'a');
    assert.equal(at.attrs['switchyard.attempt'], 1);
    assert.equal(at.attrs['switchyard.breaker.state'], 'closed');
    assert.equal(at.attrs['error.type'], undefined);
    assert.equal(at.attrs['gen_ai.input.messages'], undefined, 'prompts are not recorded by default');
    assert.ok(!JSON.stringify(rx.spans.map((s) => [s.attrs, s.events])).includes('secret prompt text'));

    // the upstream saw the attempt span's context, in the client's trace
    const sent = ctx.fakeA.requests.at(-1)?.headers;
    assert.equal(sent?.traceparent, `00-${TRACE_ID}-${at.spanId}-01`);
    assert.equal(sent?.tracestate, 'vendor=x1');

    const line = ctx.gw.logs.map((l) => JSON.parse(l) as Obj).find((l) => l.msg === 'request' && l.request_id === r.requestId);
    assert.equal(line?.trace_id, TRACE_ID);
    assert.equal(line?.span_id, server.spanId);
  });

  test('a request the client did not sample: the upstream gets the same trace, not sampled; the log line keeps the ids', async () => {
    const r = await chat(ctx.gw.baseURL, { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, { traceparent: `00-${TRACE_ID}-${CLIENT_PARENT}-00` });
    assert.equal(r.status, 200, r.text);
    const sent = String(ctx.fakeA.requests.at(-1)?.headers.traceparent);
    assert.match(sent, new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-00$`));
    assert.notEqual(sent.split('-')[2], CLIENT_PARENT, 'the gateway is a hop of its own');
    const line = ctx.gw.logs.map((l) => JSON.parse(l) as Obj).find((l) => l.msg === 'request' && l.request_id === r.requestId);
    assert.equal(line?.trace_id, TRACE_ID);
    assert.equal(line?.span_id, sent.split('-')[2]);
  });

  test('a failover: two attempt spans under the request, the failed one with error.type', async () => {
    ctx.fakeA.enqueue({ kind: 'error', status: 503, message: 'overloaded' });
    const r = await chat(ctx.gw.baseURL, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.status, 200, r.text);
    const { server, children } = await traceOf(rx, r.requestId, 2);
    assert.equal(children.length, 2);
    const [first, second] = children as [SpanView, SpanView];
    assert.equal(first.name, 'chat a-model');
    assert.equal(typeof first.attrs['error.type'], 'string');
    assert.equal(first.statusCode, 2, 'span status ERROR');
    assert.equal(first.attrs['switchyard.failover'], false);
    assert.equal(second.name, 'chat b-model');
    assert.equal(second.attrs['error.type'], undefined);
    assert.equal(second.attrs['switchyard.attempt'], 2);
    assert.equal(second.attrs['switchyard.failover'], true);
    assert.equal(server.attrs['switchyard.attempts'], 2);
    // the served attempt carries the answer's facts; the server span does not repeat them
    assert.equal(second.attrs['switchyard.backend'], 'b');
    assert.ok(Number(second.attrs['gen_ai.usage.output_tokens']) > 0);
    assert.equal(first.attrs['gen_ai.usage.output_tokens'], undefined);
    for (const k of ['switchyard.backend', 'gen_ai.request.model', 'gen_ai.usage.output_tokens']) assert.equal(server.attrs[k], undefined, k);
    // each upstream got its own attempt's traceparent
    assert.equal(ctx.fakeA.requests.at(-1)?.headers.traceparent, `00-${server.traceId}-${first.spanId}-01`);
    assert.equal(ctx.fakeB.requests.at(-1)?.headers.traceparent, `00-${server.traceId}-${second.spanId}-01`);
  });

  test('a stream: the attempt span ends after the last chunk, with the time to first chunk', async () => {
    ctx.fakeA.enqueue({ kind: 'stream', chunks: ['one ', 'two ', 'three'], delayMs: 15 });
    const r = await chat(ctx.gw.baseURL, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.status, 200);
    assert.match(r.text, /data: \[DONE\]/);
    const { server, children } = await traceOf(rx, r.requestId, 1);
    const [at] = children as [SpanView];
    assert.equal(at.name, 'chat a-model');
    assert.ok(at.events.includes('gen_ai.first_chunk'), `events: ${at.events.join(', ')}`);
    assert.equal(typeof at.attrs['switchyard.ttft_ms'], 'number');
    assert.deepEqual(at.attrs['gen_ai.response.finish_reasons'], ['stop']);
    const lastWrite = ctx.fakeA.lastStreamWrites.at(-1) as number;
    const lastWriteNs = BigInt(Math.floor((performance.timeOrigin + lastWrite) * 1e6));
    assert.ok(at.end >= lastWriteNs, 'the attempt span ends after the upstream wrote its last chunk');
    assert.ok(server.end >= at.end, 'the server span ends last');
    assert.equal(server.attrs['switchyard.stream'], true);
  });

  test('a refusal (401) is a server span with its status and error code, and no attempt', async () => {
    const res = await fetch(`${ctx.gw.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer wrong-key-000000' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 401);
    const id = res.headers.get('x-request-id') ?? '';
    const { server, children } = await traceOf(rx, id, 0);
    assert.equal(server.attrs['http.response.status_code'], 401);
    assert.equal(typeof server.attrs['switchyard.error.code'], 'string');
    assert.equal(children.length, 0);
  });
});

describe('tracing over OTLP/HTTP JSON (configured by telemetry.tracing)', () => {
  let rx: Receiver;
  before(async () => {
    rx = await startReceiver();
  });
  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: {}, fakeB: {} },
    yaml: ({ fakeA, fakeB }) =>
      yaml(
        fakeA.url,
        fakeB.url,
        `telemetry:
  tracing: { endpoint: "${rx.url}", protocol: http/json, service_name: from-config, record_content: true, resource_attributes: { deployment.environment.name: test } }`,
      ),
  });
  after(() => rx.close());

  test('spans arrive as OTLP/JSON, with prompts and completions when opted in', async () => {
    const r = await chat(ctx.gw.baseURL, { model: 'm', messages: [{ role: 'user', content: 'opted-in prompt' }] });
    assert.equal(r.status, 200, r.text);
    const { server, children } = await traceOf(rx, r.requestId, 1);
    assert.ok([...rx.contentTypes].some((t) => t.startsWith('application/json')), 'exported as JSON');
    assert.equal(server.kind, SPAN_KIND.SERVER);
    assert.equal(server.resource['service.name'], 'from-config');
    assert.equal(server.resource['deployment.environment.name'], 'test');
    assert.equal(server.parentSpanId, '', 'a new trace without a client traceparent');
    const [at] = children as [SpanView];
    assert.equal(at.kind, SPAN_KIND.CLIENT);
    assert.equal(at.name, 'chat a-model');
    assert.match(String(at.attrs['gen_ai.input.messages']), /opted-in prompt/);
    assert.equal(typeof at.attrs['gen_ai.output.messages'], 'string');
  });

  test('a stream\'s text is recorded as gen_ai.output.messages, cut at the content bound', async () => {
    ctx.fakeA.enqueue({ kind: 'stream', chunks: ['one ', 'two ', 'three'] });
    const r = await chat(ctx.gw.baseURL, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.status, 200);
    const { children } = await traceOf(rx, r.requestId, 1);
    const [at] = children as [SpanView];
    assert.deepEqual(JSON.parse(String(at.attrs['gen_ai.output.messages'])), [{ index: 0, message: { role: 'assistant', content: 'one two three' } }]);

    const big = 'x'.repeat(40 * 1024);
    ctx.fakeA.enqueue({ kind: 'stream', chunks: [big, big] });
    const long = await chat(ctx.gw.baseURL, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(long.status, 200);
    assert.ok(long.text.length > 80 * 1024, 'the client gets the whole stream');
    const [lat] = (await traceOf(rx, long.requestId, 1)).children as [SpanView];
    const content = (JSON.parse(String(lat.attrs['gen_ai.output.messages'])) as Array<{ message: { content: string } }>)[0]?.message.content ?? '';
    assert.equal(content.length, MAX_CONTENT_CHARS);
  });
});

describe('tracing with an anthropic backend (SDK path and native Messages), content recorded', () => {
  let rx: Receiver;
  let fake: FakeAnthropic;
  let gw: TestGateway;
  before(async () => {
    rx = await startReceiver();
    fake = await startFakeAnthropic({ apiKey: 'sk-ant-test-key-123' });
    gw = await startGateway(`
routing: { retry: { max_retries: 0 } }
backends:
  claude: { type: anthropic, base_url: "${fake.url}", api_key: "sk-ant-test-key-123" }
models:
  c: { targets: [ { backend: claude, model: claude-upstream } ] }
telemetry:
  tracing: { endpoint: "${rx.url}", protocol: http/json, record_content: true }
`);
  });
  after(async () => {
    await gw.close();
    await fake.close();
    await rx.close();
  });
  const usage = { input_tokens: 11, output_tokens: 4, cache_read_input_tokens: 7, cache_creation_input_tokens: 5 };
  const post = async (path: string, body: Obj, headers: Record<string, string> = {}): Promise<{ status: number; text: string; requestId: string }> => {
    const res = await fetch(`${gw.baseURL}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    return { status: res.status, text: await res.text(), requestId: res.headers.get('x-request-id') ?? '' };
  };

  test('the SDK call sends the attempt span\'s traceparent upstream, in the client\'s trace', async () => {
    fake.enqueue({ kind: 'reply' });
    const r = await post('/chat/completions', { model: 'c', messages: [{ role: 'user', content: 'hi' }] }, { traceparent: `00-${TRACE_ID}-${CLIENT_PARENT}-01`, tracestate: 'vendor=a1' });
    assert.equal(r.status, 200, r.text);
    const { server, children } = await traceOf(rx, r.requestId, 1);
    const [at] = children as [SpanView];
    assert.equal(at.name, 'chat claude-upstream');
    assert.equal(at.attrs['gen_ai.provider.name'], 'anthropic');
    assert.equal(at.attrs['server.address'], '127.0.0.1');
    const sent = fake.requests.at(-1)?.headers;
    const [version, traceId, spanId, flags] = String(sent?.traceparent).split('-');
    assert.equal(version, '00');
    assert.equal(traceId, server.traceId);
    assert.equal(traceId, TRACE_ID);
    assert.equal(spanId, at.spanId, 'the upstream call is the attempt span');
    assert.equal(flags, '01');
    assert.equal(sent?.tracestate, 'vendor=a1');
  });

  test('a chat stream through the SDK: its text as gen_ai.output.messages, its cache token counts, traceparent upstream', async () => {
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'streamed words arrive here' }], usage });
    const r = await post('/chat/completions', { model: 'c', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.status, 200, r.text);
    assert.match(r.text, /data: \[DONE\]/);
    const { server, children } = await traceOf(rx, r.requestId, 1);
    const [at] = children as [SpanView];
    const out = JSON.parse(String(at.attrs['gen_ai.output.messages'])) as Array<{ message: { content: string } }>;
    assert.equal(out[0]?.message.content, 'streamed words arrive here');
    assert.equal(at.attrs['gen_ai.usage.cache_read.input_tokens'], 7);
    assert.equal(at.attrs['gen_ai.usage.cache_creation.input_tokens'], 5);
    assert.equal(fake.requests.at(-1)?.headers.traceparent, `00-${server.traceId}-${at.spanId}-01`);
  });

  test('a native Messages stream: its text as gen_ai.output.messages and its cache token counts', async () => {
    fake.enqueue({ kind: 'reply', content: [{ type: 'text', text: 'native text streamed' }], usage });
    const r = await post('/messages', { model: 'c', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'hi' }] }, { 'anthropic-version': '2023-06-01' });
    assert.equal(r.status, 200, r.text);
    assert.match(r.text, /event: message_stop/);
    const { children } = await traceOf(rx, r.requestId, 1);
    const [at] = children as [SpanView];
    assert.deepEqual(JSON.parse(String(at.attrs['gen_ai.output.messages'])), [{ type: 'text', text: 'native text streamed' }]);
    assert.equal(at.attrs['gen_ai.usage.cache_read.input_tokens'], 7);
    assert.equal(at.attrs['gen_ai.usage.cache_creation.input_tokens'], 5);
  });
});

describe('tracing with an unreachable collector', () => {
  let deadUrl = '';
  before(async () => {
    // a port that was just free: nothing listens there
    const s = http.createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    deadUrl = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
    await new Promise<void>((r) => s.close(() => r()));
    // the exporter's retries stop at its timeout (standard variable): the test need not wait 10 s
    process.env.OTEL_EXPORTER_OTLP_TIMEOUT = '200';
  });
  after(() => {
    delete process.env.OTEL_EXPORTER_OTLP_TIMEOUT;
  });
  const ctx = upstreamsWithGateway({
    upstreams: { fakeA: {}, fakeB: {} },
    yaml: ({ fakeA, fakeB }) => yaml(fakeA.url, fakeB.url, `telemetry:\n  tracing: { endpoint: "${deadUrl}" }`),
  });

  test('requests are answered and the failed export is logged once, not per span', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await chat(ctx.gw.baseURL, { model: 'm', messages: [{ role: 'user', content: `hi ${i}` }] });
      assert.equal(r.status, 200, r.text);
      // the first failed export is reported before the next request
      await new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          if (ctx.gw.logs.some((l) => l.includes('trace export failed'))) {
            clearInterval(timer);
            resolve();
          }
        }, 5);
      });
    }
    const stream = await chat(ctx.gw.baseURL, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(stream.status, 200);
    await ctx.gw.close();
    const failures = ctx.gw.logs.filter((l) => l.includes('trace export failed'));
    assert.equal(failures.length, 1, failures.join(''));
    assert.match(failures[0] as string, /"level":"warn"/);
  });
});

describe('tracing settings: off unless configured, the variables win', () => {
  const block = (o: object) => configSchema.parse({ backends: {}, models: {}, telemetry: { tracing: o } }).telemetry.tracing;

  test('off without an endpoint variable or block, and with OTEL_SDK_DISABLED', () => {
    assert.equal(resolveTracing(undefined, {}), null);
    assert.equal(resolveTracing(block({ service_name: 'x' }), {}), null);
    assert.equal(resolveTracing(block({ endpoint: 'http://c:4318', enabled: false }), {}), null);
    assert.equal(resolveTracing(block({ endpoint: 'http://c:4318' }), { OTEL_SDK_DISABLED: 'true' }), null);
    assert.equal(resolveTracing(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'TRUE' }), null);
  });

  test('the variables win over the block', () => {
    const cfg = block({ endpoint: 'http://from-block:4318/', protocol: 'http/json', service_name: 'blk', headers: { 'x-key': 'b', 'x-other': 'o' }, record_content: true });
    const fromBlock = resolveTracing(cfg, {});
    assert.equal(fromBlock?.url, 'http://from-block:4318/v1/traces');
    assert.equal(fromBlock?.protocol, 'http/json');
    assert.equal(fromBlock?.serviceName, 'blk');
    assert.equal(fromBlock?.recordContent, true);
    const env = {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://from-env:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_SERVICE_NAME: 'env',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-key=e',
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    };
    const r = resolveTracing(cfg, env);
    assert.equal(r?.url, 'http://from-env:4318/v1/traces');
    assert.equal(r?.protocol, 'http/protobuf');
    assert.equal(r?.serviceName, 'env');
    assert.deepEqual(r?.headers, { 'x-other': 'o' }, 'a header the variable names is left to the variable');
    assert.match(r?.sampler.toString() ?? '', /TraceIdRatioBased\{0\.25\}/);
    assert.equal(resolveTracing(cfg, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:1/custom' })?.url, 'http://t:1/custom');
    assert.equal(resolveTracing(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://e:4318' })?.sampler.toString().startsWith('ParentBased'), true);
  });
});
