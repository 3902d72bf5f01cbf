/**
 * routing.shared_health: true — one circuit breaker per target across replicas, for real.
 *   - a redis-server and TWO gateway processes, the same failing first target and a healthy second
 *     one: once the first gateway's failures open the breaker, the second gateway's requests go
 *     straight to the second target (the failing upstream sees none of them), and when the open
 *     period ends exactly one probe reaches the failing target across both gateways;
 *   - the Redis script and the memory store's table follow the same rules (same views for the
 *     same events);
 *   - server.workers: 2 on the memory store, shared_health left unset (on in workers): failures
 *     seen by either worker open one breaker that both workers honour (the primary's store).
 * In CI (CI set) a missing redis-server is a failure, never a skip.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MemoryStore } from '../src/state/store/memory.ts';
import { RedisStore } from '../src/state/store/redis.ts';
import type { HealthEvent, HealthSettings, HealthView } from '../src/state/health/shared-health.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGatewayProcess, stopGatewayProcess as stop, type GatewayProcess } from './support/gateway-process.ts';
import { startRedisPair, type RedisPair } from './support/redis-pair.ts';
import { RedisServer, redisSkip, until } from './support/redis-server.ts';

const skip = redisSkip;

interface Reply {
  status: number;
  model: string | null;
  attempts: string | null;
}

async function chat(g: GatewayProcess, content: string): Promise<Reply> {
  const r = await fetch(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content }] }),
  });
  await r.arrayBuffer();
  return { status: r.status, model: r.headers.get('x-switchyard-model'), attempts: r.headers.get('x-switchyard-attempts') };
}

/** The breaker state /status shows for the failing target. */
async function breakerOf(g: GatewayProcess): Promise<string> {
  const r = await fetch(`${g.url}/status`);
  const body = (await r.json()) as { models: Array<{ name: string; targets: Array<{ model: string; breaker: string }> }> };
  return body.models.find((m) => m.name === 'chat')?.targets.find((t) => t.model === 'broken')?.breaker ?? 'unknown';
}

describe('shared breakers through Redis: two gateway processes', { skip, timeout: 120_000 }, () => {
  let pair: RedisPair | undefined;
  let up: FakeUpstream;
  let a: GatewayProcess | undefined;
  let b: GatewayProcess | undefined;
  const brokenCalls = (): number => up.requests.filter((r) => (r.body as { model?: string } | undefined)?.model === 'broken').length;

  before(async () => {
    pair = await startRedisPair(
      'shared-health',
      (u, url) => `
backends:
  up: { type: openai, base_url: "${u.url}", api_key: "sk-upstream" }
models:
  chat: { policy: fallback, targets: [ { backend: up, model: broken }, { backend: up, model: good } ] }
routing:
  shared_health: true
  retry: { max_retries: 0 }
  breaker: { consecutive_failures: 2, min_requests: 100, open_ms: 1500, max_open_ms: 30000 }
state: { store: redis, url: "${url}", key_prefix: "sy-health-${process.pid}:", on_unavailable: open, command_timeout_ms: 500 }
`,
    );
    ({ up, a, b } = pair);
    up.onModel('broken', { kind: 'error', status: 500, message: 'upstream is broken' });
    up.onModel('good', { kind: 'reply', content: 'fine' });
  });

  after(async () => {
    await pair?.stop();
  });

  it("the first gateway's failures open the breaker for the second; one probe across both when it half-opens", async () => {
    const ga = a as GatewayProcess;
    const gb = b as GatewayProcess;
    for (let i = 0; i < 2; i++) {
      const r = await chat(ga, `a ${i}`);
      assert.deepEqual([r.status, r.model, r.attempts], [200, 'good', '2'], 'fails over to the healthy target');
    }
    assert.equal(brokenCalls(), 2);
    await until('gateway B sees the breaker open', async () => (await breakerOf(gb)) === 'open');
    for (let i = 0; i < 3; i++) {
      const r = await chat(gb, `b ${i}`);
      assert.deepEqual([r.status, r.model, r.attempts], [200, 'good', '1'], 'B goes straight to the healthy target');
    }
    assert.equal(brokenCalls(), 2, 'the failing target was not tried by B');

    await until('the open period ends', async () => (await breakerOf(ga)) === 'half_open' && (await breakerOf(gb)) === 'half_open');
    const replies: Reply[] = [];
    for (let i = 0; i < 10; i++) replies.push(await chat(i % 2 === 0 ? ga : gb, `half-open ${i}`));
    assert.ok(
      replies.every((r) => r.status === 200 && r.model === 'good'),
      JSON.stringify(replies),
    );
    assert.equal(brokenCalls(), 3, 'exactly one probe reached the failing target across both gateways');
    await until('the failed probe re-opened it on both', async () => (await breakerOf(ga)) === 'open' && (await breakerOf(gb)) === 'open');
  });
});

describe('the Redis HEALTH script and the memory table agree', { skip, timeout: 60_000 }, () => {
  let dir: string;
  let redis: RedisServer | undefined;
  let rs: RedisStore | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-shared-health-lua-'));
    redis = await RedisServer.start(dir);
    rs = new RedisStore({ url: redis.url, keyPrefix: `sy-lua-${process.pid}:`, onUnavailable: 'open', commandTimeoutMs: 1000, maxEntries: 10, maxBytes: 1 << 20, logger: createLogger('error') });
    assert.ok(await rs.ready(5000));
  });

  after(async () => {
    await rs?.close();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('opens, leases one probe, doubles the open period, closes, and keeps the latency score', async () => {
    const mem = new MemoryStore({ maxEntries: 10, maxBytes: 1 << 20 });
    const s: HealthSettings = { failure_rate: 0.5, min_requests: 4, window_ms: 10_000, consecutive_failures: 3, open_ms: 150, max_open_ms: 10_000, alpha: 0.3, penalty_ms: 10_000, lease_ms: 5000 };
    const both = async (owner: string, events: HealthEvent[]): Promise<[HealthView, HealthView]> => {
      const op = [{ target: 'up/m', owner, events }];
      const [m] = await mem.health(op, s);
      const [r] = await (rs as RedisStore).health(op, s);
      assert.ok(m && r);
      return [m, r];
    };
    const same = (views: [HealthView, HealthView], fields: Array<keyof HealthView>, note: string): HealthView => {
      const pick = (v: HealthView): Partial<HealthView> => Object.fromEntries(fields.map((f) => [f, v[f]]));
      assert.deepEqual(pick(views[1]), pick(views[0]), note);
      return views[0];
    };
    const core: Array<keyof HealthView> = ['state', 'open_ms', 'ok', 'fail', 'probe', 'total', 'ttft', 'samples'];

    let v = same(await both('r1', [{ k: 's' }, { k: 'f' }, { k: 'l', total: 200, ttft: 50 }, { k: 'p' }]), core, 'counts and latency');
    assert.deepEqual([v.state, v.ok, v.fail, v.samples, v.total], ['closed', 1, 1, 2, 200 + 0.3 * (10_000 - 200)]);
    v = same(await both('r2', [{ k: 's', n: 4 }]), core, 'a run of successes counts each');
    assert.deepEqual([v.state, v.ok, v.fail], ['closed', 5, 1]);
    v = same(await both('r2', [{ k: 'f' }, { k: 'f' }, { k: 'f' }]), core, 'three in a row open it');
    assert.deepEqual([v.state, v.ok, v.fail], ['open', 0, 0]);
    v = same(await both('r1', [{ k: 'A' }, { k: 's' }]), core, 'no lease and no counting while open');
    assert.equal(v.probe, 'none');
    await until('half-open', async () => (await both('r1', []))[1].state === 'half_open' && (await both('r1', []))[0].state === 'half_open');
    v = same(await both('r1', [{ k: 'A' }]), core, 'r1 takes the lease');
    assert.equal(v.probe, 'mine');
    v = same(await both('r2', [{ k: 'A' }, { k: 'S' }]), core, "r2 can neither take it nor report a probe it didn't send");
    assert.deepEqual([v.state, v.probe], ['half_open', 'other']);
    v = same(await both('r1', [{ k: 'F' }]), core, "r1's probe failed");
    assert.deepEqual([v.state, v.open_ms, v.probe], ['open', 300, 'none']);
    await until('half-open again', async () => (await both('r2', []))[1].state === 'half_open' && (await both('r2', []))[0].state === 'half_open');
    v = same(await both('r2', [{ k: 'A' }, { k: 'S' }]), core, "r2's probe succeeded");
    assert.deepEqual([v.state, v.open_ms, v.probe], ['closed', 150, 'none']);
  });
});

/** One request on a connection of its own (the cluster hands each connection to the next worker). */
function fresh(url: string, method: string, path: string, body?: unknown): Promise<{ status: number; text: string; model: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text, model: res.headers['x-switchyard-model'] as string | undefined }));
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

describe('shared breakers across workers: server.workers: 2, memory store', { timeout: 120_000 }, () => {
  let dir: string;
  let up: FakeUpstream;
  let g: GatewayProcess | undefined;
  const brokenCalls = (): number => up.requests.filter((r) => (r.body as { model?: string } | undefined)?.model === 'broken').length;
  const breakerSeen = async (): Promise<string> => {
    const r = await fresh(g?.url ?? '', 'GET', '/status');
    const body = JSON.parse(r.text) as { models: Array<{ name: string; targets: Array<{ model: string; breaker: string }> }> };
    return body.models.find((m) => m.name === 'chat')?.targets.find((t) => t.model === 'broken')?.breaker ?? 'unknown';
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-shared-health-workers-'));
    up = await startFakeOpenAI();
    up.onModel('broken', { kind: 'error', status: 500, message: 'upstream is broken' });
    up.onModel('good', { kind: 'reply', content: 'fine' });
    g = await startGatewayProcess(
      join(dir, 'providers.yaml'),
      `
server: { workers: 2 }
backends:
  up: { type: openai, base_url: "${up.url}", api_key: "sk-upstream" }
models:
  chat: { policy: fallback, targets: [ { backend: up, model: broken }, { backend: up, model: good } ] }
routing:
  retry: { max_retries: 0 }
  breaker: { consecutive_failures: 2, min_requests: 100, open_ms: 60000 }
`,
      60_000,
    );
  });

  after(async () => {
    await stop(g);
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('failures on both workers add up to one open breaker that every worker honours', async () => {
    const url = g?.url ?? '';
    const ask = { model: 'chat', messages: [{ role: 'user', content: 'hi' }] };
    // two connections: the cluster gives one to each worker, so each worker alone saw one failure
    for (let i = 0; i < 2; i++) {
      const r = await fresh(url, 'POST', '/v1/chat/completions', ask);
      assert.deepEqual([r.status, r.model], [200, 'good']);
    }
    assert.equal(brokenCalls(), 2);
    // six answers in a row from connections spread over both workers all say open
    let streak = 0;
    await until('both workers see the breaker open', async () => {
      streak = (await breakerSeen()) === 'open' ? streak + 1 : 0;
      return streak >= 6;
    });
    for (let i = 0; i < 6; i++) {
      const r = await fresh(url, 'POST', '/v1/chat/completions', ask);
      assert.deepEqual([r.status, r.model], [200, 'good']);
    }
    assert.equal(brokenCalls(), 2, 'no worker sent to the open target');
  });
});
