/**
 * Operations surface: Prometheus metrics after a scripted mix of traffic, the admin guard on
 * /metrics and /status, the status page (JSON and HTML), and cost reporting.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

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
