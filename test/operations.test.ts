/**
 * Operations surface: Prometheus metrics after a scripted mix of traffic, the admin guard on
 * /metrics and /status, the status page (JSON and HTML), and cost reporting.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { pageText, tableRows } from './support/status-html.ts';

const ADMIN = 'admin-key-0123456789abcdef';
const TEAM = 'sk-gw-team-a-123456';
const UPSTREAM_KEY = 'sk-upstream-SECRET-424242';

/** value of one sample line `name{labels} value`, matching all given labels */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

describe('metrics, status and cost', () => {
  let up: FakeUpstream;
  let gw: TestGateway;
  let client: OpenAI;

  before(async () => {
    up = await startFakeOpenAI({ apiKey: UPSTREAM_KEY });
    gw = await startGateway(`
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0, min_requests: 1000000 } }
admin: { key: "${ADMIN}" }
backends:
  up: { type: openai, base_url: "${up.url}", api_key: "${UPSTREAM_KEY}" }
  dead: { type: openai, base_url: "http://127.0.0.1:1/v1", api_key: "sk-dead-000000000" }
  demo: { type: fake }
models:
  priced: { targets: [ { backend: up, model: up-model, price: { input: 2, output: 8 } } ] }
  unpriced: { targets: [ { backend: up, model: up-model } ] }
  flaky: { targets: [ { backend: dead, model: x }, { backend: up, model: up-model, price: { input: 1, output: 1 } } ] }
  echo: { targets: [ { backend: demo, model: echo } ] }
keys:
  - { name: team-a, key: "${TEAM}" }
`);
    client = new OpenAI({ baseURL: gw.baseURL, apiKey: TEAM, maxRetries: 0 });
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  it('reports cost from price × actual usage, and "unknown" (not 0) without a price', async () => {
    up.enqueue({ kind: 'reply', content: 'hi', usage: { prompt_tokens: 1000, completion_tokens: 500 } });
    const { response } = await client.chat.completions.create({ model: 'priced', messages: [{ role: 'user', content: 'x' }] }).withResponse();
    // (1000 × 2 + 500 × 8) / 1e6
    assert.equal(response.headers.get('x-switchyard-cost-usd'), '0.006');
    const r2 = await client.chat.completions.create({ model: 'unpriced', messages: [{ role: 'user', content: 'x' }] }).withResponse();
    assert.equal(r2.response.headers.get('x-switchyard-cost-usd'), 'unknown');
  });

  it('exposes the expected counters and labels after a mix of traffic', async () => {
    // a stream with usage, a failover, an unknown model, a client error
    up.enqueue({ kind: 'stream', chunks: ['a ', 'b'] });
    const stream = await client.chat.completions.create({ model: 'priced', stream: true, messages: [{ role: 'user', content: 's' }] });
    for await (const _ of stream) void _;
    await client.chat.completions.create({ model: 'flaky', messages: [{ role: 'user', content: 'x' }] });
    await assert.rejects(client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }));
    await client.embeddings.create({ model: 'echo', input: 'x' });

    const res = await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    const text = await res.text();
    const okChat = sample(text, 'switchyard_requests_total', { route: '/v1/chat/completions', model: 'priced', backend: 'up', status_class: '2xx' });
    assert.ok(okChat !== undefined && okChat >= 2, `priced 2xx requests: ${okChat}`);
    assert.equal(sample(text, 'switchyard_requests_total', { model: 'other', status_class: '4xx' }), 1, 'unknown model is bounded to "other"');
    assert.ok((sample(text, 'switchyard_tokens_total', { model: 'priced', direction: 'in' }) ?? 0) >= 1000);
    assert.ok((sample(text, 'switchyard_cost_usd_total', { model: 'priced', key: 'team-a' }) ?? 0) >= 0.006);
    assert.equal(sample(text, 'switchyard_failovers_total', { model: 'flaky', from_backend: 'dead' }), 1);
    assert.equal(sample(text, 'switchyard_upstream_attempts_total', { backend: 'dead', outcome: 'retryable' }), 1);
    // every attempt is timed too
    assert.equal(sample(text, 'switchyard_upstream_duration_seconds_count', { backend: 'dead' }), 1);
    const upAttempts = sample(text, 'switchyard_upstream_attempts_total', { backend: 'up', outcome: 'success' });
    assert.ok(upAttempts !== undefined && upAttempts >= 3, `successful attempts on up: ${upAttempts}`);
    assert.equal(sample(text, 'switchyard_upstream_duration_seconds_count', { backend: 'up' }), upAttempts);
    assert.ok((sample(text, 'switchyard_time_to_first_token_seconds_count', { model: 'priced', backend: 'up' }) ?? 0) >= 1);
    assert.ok((sample(text, 'switchyard_gateway_overhead_seconds_count', { route: '/v1/chat/completions' }) ?? 0) >= 1);
    assert.ok((sample(text, 'switchyard_unpriced_requests_total', { model: 'unpriced' }) ?? 0) >= 1);
    assert.notEqual(sample(text, 'switchyard_circuit_breaker_state', { backend: 'dead', model: 'x' }), undefined);
    assert.match(text, /^switchyard_process_resident_memory_bytes /m, 'default process metrics');
    assert.equal(sample(text, 'switchyard_in_flight_requests', { route: '/v1/chat/completions' }), 0);
    assert.ok(!text.includes(UPSTREAM_KEY) && !text.includes(TEAM) && !text.includes(ADMIN), 'no secret in metrics');
  });

  it('guards /metrics and /status with the admin key (client keys do not open them)', async () => {
    for (const path of ['/metrics', '/status', '/']) {
      const none = await fetch(`${gw.url}${path}`);
      assert.equal(none.status, 401, path);
      const body = (await none.json()) as { error: { type: string } };
      assert.equal(body.error.type, 'authentication_error');
      const team = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${TEAM}` } });
      assert.equal(team.status, 401, `${path} with a client key`);
    }
    const page = await fetch(`${gw.url}/`);
    assert.match(page.headers.get('www-authenticate') ?? '', /^Basic /, 'browsers get a login prompt');
    const basic = await fetch(`${gw.url}/`, { headers: { authorization: `Basic ${Buffer.from(`ops:${ADMIN}`).toString('base64')}` } });
    assert.equal(basic.status, 200);
  });

  it('GET /status lists models, targets, breaker state and latency', async () => {
    const res = await fetch(`${gw.url}/status`, { headers: { authorization: `Bearer ${ADMIN}` } });
    assert.equal(res.status, 200);
    const s = (await res.json()) as { ready: boolean; models: Array<{ name: string; targets: Array<{ backend: string; breaker: string; samples: number; backend_status: string }> }> };
    assert.equal(s.ready, true);
    const flaky = s.models.find((m) => m.name === 'flaky');
    assert.ok(flaky);
    assert.deepEqual(flaky.targets.map((t) => t.backend), ['dead', 'up']);
    assert.equal(flaky.targets[0]?.breaker, 'closed');
    assert.ok((flaky.targets[1]?.samples ?? 0) >= 1);
  });

  it('GET / renders an HTML status table with every public model', async () => {
    const res = await fetch(`${gw.url}/`, { headers: { authorization: `Bearer ${ADMIN}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    const html = await res.text();
    for (const m of ['priced', 'unpriced', 'flaky', 'echo']) assert.ok(html.includes(`>${m}<small>`), m);
    assert.ok(!html.includes(UPSTREAM_KEY));
  });
});

describe('admin surface without an admin key', () => {
  it('is open on a keyless local gateway, and closed (403) once client keys exist', async () => {
    const open = await startGateway('backends: { d: { type: fake } }\nmodels: { m: { targets: [ { backend: d, model: x } ] } }\n');
    const closed = await startGateway('backends: { d: { type: fake } }\nmodels: { m: { targets: [ { backend: d, model: x } ] } }\nkeys: [ { name: a, key: "sk-client-key-1" } ]\n');
    try {
      assert.equal((await fetch(`${open.url}/metrics`)).status, 200);
      assert.equal((await fetch(`${open.url}/status`)).status, 200);
      const r = await fetch(`${closed.url}/status`, { headers: { authorization: 'Bearer sk-client-key-1' } });
      assert.equal(r.status, 403);
      assert.equal(((await r.json()) as { error: { code: string } }).error.code, 'admin_disabled');
    } finally {
      await open.close();
      await closed.close();
    }
  });
});

describe('status: cache hit rate and key usage against limits', () => {
  it('reports hits/misses and each limited key’s remaining allowance and spend', async () => {
    const gw = await startGateway(`
admin: { key: "${ADMIN}" }
backends: { demo: { type: fake } }
models: { m: { targets: [ { backend: demo, model: echo, price: { input: 1, output: 1 } } ] } }
cache: { enabled: true, cache_nonzero_temperature: true }
keys:
  - { name: limited, key: "sk-limited-key-1", limits: { rpm: 100, budget_usd: 5, budget_period: day } }
  - { name: free, key: "sk-free-key-0001" }
`);
    try {
      const ask = (): Promise<Response> =>
        fetch(`${gw.baseURL}/chat/completions`, {
          method: 'POST',
          headers: { authorization: 'Bearer sk-limited-key-1', 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', temperature: 0, messages: [{ role: 'user', content: 'same question' }] }),
        });
      assert.equal((await ask()).headers.get('x-switchyard-cache'), 'miss');
      assert.equal((await ask()).headers.get('x-switchyard-cache'), 'hit');
      const s = (await (await fetch(`${gw.url}/status`, { headers: { authorization: `Bearer ${ADMIN}` } })).json()) as {
        extras: {
          cache: { hit: number; miss: number; hit_rate: number };
          keys: Record<string, { requests?: { limit: number; remaining: number }; budget?: { limit_usd: number; spent_usd: number }; limits?: string }>;
        };
      };
      assert.equal(s.extras.cache.hit, 1);
      assert.equal(s.extras.cache.miss, 1);
      assert.equal(s.extras.cache.hit_rate, 0.5);
      const limited = s.extras.keys.limited;
      assert.equal(limited?.requests?.limit, 100);
      assert.ok((limited?.requests?.remaining ?? 100) <= 98, 'both requests counted against rpm');
      assert.equal(limited?.budget?.limit_usd, 5);
      assert.ok((limited?.budget?.spent_usd ?? 0) > 0, 'the miss was paid for');
      assert.equal(s.extras.keys.free?.limits, 'none');
      // reading the status takes nothing from the allowance
      const again = (await (await fetch(`${gw.url}/status`, { headers: { authorization: `Bearer ${ADMIN}` } })).json()) as typeof s;
      assert.equal(again.extras.keys.limited?.requests?.remaining, limited?.requests?.remaining);
    } finally {
      await gw.close();
    }
  });
});

interface TargetJson {
  backend: string;
  breaker: string;
  breaker_open_until: string | null;
  breaker_retry_in_ms: number;
  error_rate: number;
  calls: { ok: number; failed: number; window_s: number };
  latency: { samples: number; p50_ms: number | null; p95_ms: number | null };
  last_error: { message: string; code: string | null; status: number | null; at: string } | null;
  latency_score_ms: number | null;
  latency_ms?: unknown;
}

describe('status: a target whose breaker opened on refused connections', () => {
  let up: FakeUpstream;
  let gw: TestGateway;
  const admin = { authorization: `Bearer ${ADMIN}` };

  before(async () => {
    up = await startFakeOpenAI({ apiKey: UPSTREAM_KEY });
    gw = await startGateway(`
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 5, open_ms: 600000, max_open_ms: 600000 } }
admin: { key: "${ADMIN}" }
backends:
  refused: { type: openai, base_url: "http://127.0.0.1:1/v1", api_key: "sk-refused-0000000" }
  live: { type: openai, base_url: "${up.url}", api_key: "${UPSTREAM_KEY}" }
models:
  two: { policy: fallback, targets: [ { backend: refused, model: gone }, { backend: live, model: up-model, price: { input: 1, output: 1 } } ] }
cache: { enabled: true }
keys:
  - { name: team-a, key: "${TEAM}", limits: { rpm: 100, tpm: 100000, max_concurrent: 4, budget_usd: 5, budget_period: day } }
  - { name: free, key: "sk-free-key-0001" }
`);
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: TEAM, maxRetries: 0 });
    // six calls: the first five fail on `refused` (five in a row open its breaker) and fail over;
    // the sixth skips it. `live` answers each after at least 20 ms.
    for (let i = 0; i < 6; i++) {
      up.enqueue({ kind: 'reply', content: `answer ${i}`, delayMs: 20, usage: { prompt_tokens: 10, completion_tokens: 5 } });
      const r = await client.chat.completions.create({ model: 'two', temperature: 0, messages: [{ role: 'user', content: `question ${i}` }] }).withResponse();
      assert.equal(r.response.headers.get('x-switchyard-backend'), 'live');
    }
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  it('GET /status: breaker open until later, the last error, failures in the error rate, measured latency apart from the score', async () => {
    const s = (await (await fetch(`${gw.url}/status`, { headers: admin })).json()) as {
      generated_at: string;
      models: Array<{ name: string; targets: TargetJson[] }>;
      extras: { cache: Record<string, unknown>; keys: Record<string, Record<string, unknown>> };
    };
    const [refused, live] = s.models.find((m) => m.name === 'two')?.targets ?? [];
    assert.ok(refused && live);

    assert.equal(refused.breaker, 'open');
    assert.ok(refused.breaker_open_until !== null && Date.parse(refused.breaker_open_until) > Date.parse(s.generated_at), 'open until a time after the report');
    assert.ok(refused.breaker_retry_in_ms > 0);
    assert.equal(refused.last_error?.code, 'upstream_unreachable');
    assert.equal(refused.last_error?.status, 502);
    assert.match(refused.last_error?.message ?? '', /Could not reach backend "refused"/);
    assert.ok(Date.parse(refused.last_error?.at ?? '') <= Date.parse(s.generated_at));
    assert.deepEqual([refused.calls.ok, refused.calls.failed], [0, 5], 'the failures that opened the breaker are counted');
    assert.equal(refused.error_rate, 1);
    assert.deepEqual(refused.latency, { samples: 0, p50_ms: null, p95_ms: null }, 'no success, no measured latency');
    assert.ok((refused.latency_score_ms ?? 0) >= 10_000, 'the policy score is reported, under its own name');
    assert.equal(refused.latency_ms, undefined, 'the score is no longer called latency_ms');

    assert.equal(live.breaker, 'closed');
    assert.equal(live.breaker_open_until, null);
    assert.equal(live.last_error, null);
    assert.deepEqual([live.calls.ok, live.calls.failed, live.error_rate], [6, 0, 0]);
    assert.equal(live.latency.samples, 6);
    assert.ok((live.latency.p50_ms ?? 0) >= 20, `p50 ${live.latency.p50_ms}`);
    assert.ok((live.latency.p95_ms ?? 0) >= (live.latency.p50_ms ?? Number.POSITIVE_INFINITY), `p95 ${live.latency.p95_ms}`);

    assert.equal(s.extras.cache.entries, 6);
    assert.equal(s.extras.cache.coalesced, 0);
    assert.deepEqual(s.extras.keys['team-a']?.concurrency, { in_use: 0, limit: 4 });
  });

  it('GET / shows the same in tables, and the cache and keys as tables, not JSON', async () => {
    const html = await (await fetch(`${gw.url}/`, { headers: admin })).text();
    const rows = tableRows(html, 'targets');
    const refused = rows.find((r) => r.backend === 'refused');
    const live = rows.find((r) => r.backend === 'live');
    assert.ok(refused && live, JSON.stringify(rows));
    assert.match(refused.breaker ?? '', /^open until \d\d:\d\d:\d\dZ \(in \d+ s\)$/);
    assert.match(refused['last error'] ?? '', /^502 upstream_unreachable Could not reach backend "refused".* \d\d:\d\d:\d\dZ, [\d.]+ s ago$/);
    assert.equal(refused['errors (recent calls)'], '100.0 % 0 ok / 5 failed');
    assert.equal(refused['latency p50 / p95 ms'], '—');
    assert.match(refused['latency score (policy)'] ?? '', /^\d+(\.\d)?$/);
    assert.ok(Number(refused['latency score (policy)']) >= 10_000);

    assert.equal(live.breaker, 'closed');
    assert.equal(live['last error'], '—');
    assert.equal(live['errors (recent calls)'], '0.0 % 6 ok / 0 failed');
    assert.match(live['latency p50 / p95 ms'] ?? '', /^\d+(\.\d)? \/ \d+(\.\d)? 6 ok$/);
    assert.ok(!html.includes('latency ms<'), 'no column passes the score off as a measured latency');

    assert.deepEqual(tableRows(html, 'cache'), [
      { enabled: 'yes', entries: '6', hits: '0', misses: '6', bypassed: '0', coalesced: '0', 'hit ratio': '0.0 %' },
    ]);
    const keys = tableRows(html, 'keys');
    assert.deepEqual(
      keys.map((k) => [k.key, k['concurrent in use / limit']]),
      [
        ['team-a', '0 / 4'],
        ['free', ''],
      ],
    );
    assert.equal(keys[1]?.['requests used / limit'], 'no limits');
    // the rpm allowance refills as time passes: the count is what is used now
    assert.match(keys[0]?.['requests used / limit'] ?? '', /^[1-6] \/ 100 per min$/);
    assert.match(keys[0]?.['tokens used / limit'] ?? '', /^\d+ \/ 100000 per min$/);
    assert.match(keys[0]?.['budget used of limit'] ?? '', /^\$0\.\d{4} of \$5 \(d\d{4}-\d\d-\d\d\)$/);
    const visible = pageText(html);
    assert.ok(!visible.includes('{') && !html.includes('<pre>'), `no raw JSON on the page: ${visible.slice(0, 300)}`);
    assert.match(visible, /state store: memory, ok/);
  });

  it('a key’s request in flight shows as a concurrency slot in use', async () => {
    up.enqueue({ kind: 'hang' });
    const abort = new AbortController();
    const pending = fetch(`${gw.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEAM}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'two', temperature: 0, messages: [{ role: 'user', content: 'hanging' }] }),
      signal: abort.signal,
    }).catch(() => undefined);
    try {
      for (let i = 0; i < 200 && up.requests.length < 7; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(up.requests.length, 7, 'the upstream holds the request');
      const html = await (await fetch(`${gw.url}/`, { headers: admin })).text();
      assert.equal(tableRows(html, 'keys')[0]?.['concurrent in use / limit'], '1 / 4');
    } finally {
      abort.abort();
      await pending;
    }
  });
});
