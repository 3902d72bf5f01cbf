/**
 * Tracing's sampling and the server span's share of a trace, end to end through OTLP/HTTP to the
 * receiver in test/support/otlp-receiver.ts: the gateway decides sampling on the request's trace id
 * before the SDK makes any span, so what a ratio sampler picks must be exactly what is exported,
 * under the ids the log lines and the upstream's `traceparent` name; a cache hit's server span
 * carries the answer's facts that an attempt span carries otherwise.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ROOT_CONTEXT, SamplingDecision } from '@opentelemetry/api';
import { TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-base';
import { upstreamsWithGateway } from './support/suite.ts';
import { SPAN_KIND, startReceiver, type Obj, type Receiver } from './support/otlp-receiver.ts';

const KEY = 'sk-sampling-key-123456';

const yaml = (upstream: string, receiver: string, tracing: string, extra = ''): string => `
routing: { retry: { max_retries: 0 } }
keys: [ { name: app, key: "${KEY}" } ]
backends:
  a: { type: openai, base_url: "${upstream}", api_key: "sk-a-secret" }
models:
  m: { targets: [ { backend: a, model: a-model } ] }
telemetry:
  tracing: { endpoint: "${receiver}", ${tracing} }
${extra}`;

async function chat(base: string, content: string): Promise<{ status: number; requestId: string; cache: string | null }> {
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model: 'm', temperature: 0, messages: [{ role: 'user', content }] }),
  });
  await res.text();
  return { status: res.status, requestId: res.headers.get('x-request-id') ?? '', cache: res.headers.get('x-switchyard-cache') };
}

/** Each request's log line ids, by request id. */
function logIds(logs: readonly string[]): Map<string, { trace: string; span: string }> {
  const out = new Map<string, { trace: string; span: string }>();
  for (const l of logs) {
    const o = JSON.parse(l) as Obj;
    if (o.msg === 'request' && typeof o.request_id === 'string' && typeof o.trace_id === 'string') out.set(o.request_id, { trace: o.trace_id, span: String(o.span_id) });
  }
  return out;
}

let rx: Receiver;
before(async () => {
  rx = await startReceiver();
  // spans leave the batch processor 10 ms after they end
  process.env.OTEL_BSP_SCHEDULE_DELAY = '10';
});
after(() => rx.close());

describe('traceidratio 0.5: the requests the ratio picks are the ones exported, under the ids logged and sent upstream', () => {
  const N = 200;
  const ctx = upstreamsWithGateway({
    upstreams: { fake: {} },
    yaml: ({ fake }) => yaml(fake.url, rx.url, 'sampler: traceidratio, sampler_arg: 0.5'),
  });

  test('200 requests: about half exported, exactly those the ratio picks', async () => {
    const ids: string[] = [];
    for (let i = 0; i < N; i++) {
      const r = await chat(ctx.gw.baseURL, `sampling ${i}`);
      assert.equal(r.status, 200);
      ids.push(r.requestId);
    }
    // closing flushes the last spans
    await ctx.gw.close();
    const logged = logIds(ctx.gw.logs);
    const sentUpstream = ctx.fake.requests.map((q) => String(q.headers.traceparent));
    assert.equal(sentUpstream.length, N);
    const servers = new Map(rx.spans.filter((s) => s.kind === SPAN_KIND.SERVER).map((s) => [String(s.attrs['switchyard.request_id']), s]));
    const ratio = new TraceIdRatioBasedSampler(0.5);
    let sampled = 0;
    ids.forEach((id, i) => {
      const log = logged.get(id);
      assert.ok(log, `a log line with ids for ${id}`);
      const [, trace, parent, flags] = (sentUpstream[i] as string).split('-') as [string, string, string, string];
      assert.equal(trace, log.trace, 'the upstream call is in the logged trace');
      const picked = ratio.shouldSample(ROOT_CONTEXT, log.trace).decision === SamplingDecision.RECORD_AND_SAMPLED;
      const server = servers.get(id);
      if (picked) {
        sampled++;
        assert.ok(server, `request ${i} (trace ${log.trace}) is picked by the ratio and exported`);
        assert.equal(server.traceId, log.trace);
        assert.equal(server.spanId, log.span, 'the log names the exported server span');
        assert.equal(flags, '01');
        const attempt = rx.spans.find((s) => s.parentSpanId === server.spanId);
        assert.equal(attempt?.spanId, parent, 'the upstream call names its attempt span');
      } else {
        assert.equal(server, undefined, `request ${i} (trace ${log.trace}) is not picked and not exported`);
        assert.equal(flags, '00');
        assert.equal(parent, log.span, 'an unsampled request passes its own span id upstream, as logged');
      }
    });
    // the ratio applies once: had the SDK decided again on another trace id, a quarter would be
    // exported (50 ± 6); half is 100 ± 7, and [70, 130] leaves both tails below 1e-4
    assert.ok(sampled >= 70 && sampled <= 130, `a ratio of 0.5 picked ${sampled} of ${N}`);
    assert.equal(servers.size, sampled, 'nothing else was exported');
  });
});

describe('always_off: nothing exported, the trace context still logged and passed upstream', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fake: {} },
    yaml: ({ fake }) => yaml(fake.url, rx.url, 'sampler: always_off, service_name: never-exported'),
  });

  test('a request', async () => {
    const r = await chat(ctx.gw.baseURL, 'off');
    assert.equal(r.status, 200);
    await ctx.gw.close();
    const log = logIds(ctx.gw.logs).get(r.requestId);
    assert.ok(log);
    assert.equal(String(ctx.fake.requests.at(-1)?.headers.traceparent), `00-${log.trace}-${log.span}-00`);
    assert.equal(rx.spans.filter((s) => s.resource['service.name'] === 'never-exported').length, 0);
  });
});

describe('a cache hit: its server span carries the answer\'s facts, and has no attempt', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { fake: {} },
    yaml: ({ fake }) => yaml(fake.url, rx.url, 'sampler: always_on, service_name: cache-hits', 'cache: { enabled: true, ttl_seconds: 60 }'),
  });

  test('a miss then a hit', async () => {
    const miss = await chat(ctx.gw.baseURL, 'cache me');
    const hit = await chat(ctx.gw.baseURL, 'cache me');
    assert.equal(miss.cache, 'miss');
    assert.equal(hit.cache, 'hit');
    await ctx.gw.close();
    const mine = rx.spans.filter((s) => s.resource['service.name'] === 'cache-hits');
    const server = (id: string) => mine.find((s) => s.kind === SPAN_KIND.SERVER && s.attrs['switchyard.request_id'] === id);
    const missSpan = server(miss.requestId);
    const hitSpan = server(hit.requestId);
    assert.ok(missSpan && hitSpan);
    const attempt = mine.find((s) => s.parentSpanId === missSpan.spanId);
    assert.equal(attempt?.attrs['switchyard.backend'], 'a');
    assert.equal(missSpan.attrs['switchyard.backend'], undefined, 'the miss: the attempt span carries it');
    assert.equal(mine.filter((s) => s.parentSpanId === hitSpan.spanId).length, 0, 'a hit makes no attempt');
    assert.equal(hitSpan.attrs['switchyard.cache'], 'hit');
    assert.equal(hitSpan.attrs['switchyard.backend'], 'a');
    assert.equal(hitSpan.attrs['gen_ai.request.model'], 'a-model');
    assert.equal(hitSpan.attrs['switchyard.cost_usd'], 0, 'a hit costs nothing upstream');
  });
});
