/**
 * Request coalescing across processes, for real:
 *   - server.workers: 2 (the primary's memory store over IPC): two identical slow requests that
 *     land on different workers make ONE upstream call; both clients get the whole answer (JSON,
 *     and a stream byte for byte), the follower marked `x-switchyard-coalesced: true`;
 *   - two gateway processes on one redis-server: the same, JSON and stream;
 *   - leader failure (Redis pair): the leader's upstream fails before its answer → the follower
 *     makes its own call and gets an answer; the leader's stream is cut mid-way → the follower's
 *     stream ends with the same error event as the leader's, never hangs; the leader's own client
 *     leaves mid-stream → the upstream call goes on for the follower, who gets all of it;
 *   - a cache miss (Redis pair) costs one Redis command before its upstream call (the cache lookup
 *     and the claim together) and one after it (the answer cached, the claim let go); a miss nobody
 *     follows writes no log entry at all (no XADD), and a streamed one sends nothing while it runs;
 *   - a stream longer than cache.max_entry_bytes (Redis pair): the attached follower still gets all
 *     of it, byte for byte; a request arriving after the bound makes its own call.
 * In CI (CI set) a missing redis-server is a failure, never a skip.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGatewayProcess, stopGatewayProcess as stop, type GatewayProcess } from './support/gateway-process.ts';
import { startGatewayPair, startRedisPair, stopGatewayPair, type RedisPair } from './support/redis-pair.ts';
import { flightKeys } from '../src/state/flights/redis-flights.ts';
import { redisSkip, until, type RedisServer } from './support/redis-server.ts';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request on a connection of its own (the primary hands connections to the workers in turn). */
function post(url: string, body: unknown, onData?: (text: string) => void, signal?: AbortSignal): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/chat/completions`,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', connection: 'close' }, timeout: 30_000, signal },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
          onData?.(text);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const ask = (content: string, stream = false): Record<string, unknown> => ({ model: 'm', temperature: 0, stream, messages: [{ role: 'user', content }] });

/** How many upstream calls carried `content`. */
const callsWith = (up: FakeUpstream, content: string): number => up.requests.filter((r) => JSON.stringify(r.body).includes(content)).length;

/** The SSE body's content deltas, joined. */
function streamed(body: string): string {
  let out = '';
  for (const m of body.matchAll(/^data: (\{.*\})$/gm)) {
    const c = (JSON.parse(m[1] ?? '{}') as { choices?: Array<{ delta?: { content?: string } }> }).choices?.[0]?.delta?.content;
    if (c) out += c;
  }
  return out;
}

/** The worker index on the access-log line of a request id. */
async function workerOf(g: GatewayProcess, r: Reply): Promise<number> {
  const re = new RegExp(`"msg":"request","request_id":"${String(r.headers['x-request-id'])}"[^\\n]*"worker":(\\d+)`);
  let m: RegExpMatchArray | null = null;
  await until('the access-log line', () => (m = g.output().match(re)) !== null, 10_000);
  return Number((m as RegExpMatchArray | null)?.[1]);
}

/**
 * The replicas' store. A Redis command slower than command_timeout_ms counts as Redis unreachable,
 * and a request that cannot reach the store calls upstream by itself (right for the product, a
 * false failure here): the timeout is far above any command's time on a busy machine.
 */
const redisState = (url: string, prefix: string): string => `state: { store: redis, url: "${url}", key_prefix: "${prefix}-${process.pid}:", command_timeout_ms: 5000 }\n`;

const backend = (up: FakeUpstream): string => `
backends:
  up: { type: openai, base_url: "${up.url}", api_key: "sk-upstream" }
models:
  m: { targets: [ { backend: up, model: slow } ] }
  short: { targets: [ { backend: up, model: slow, timeout_ms: 1000 } ] }
routing: { retry: { max_retries: 0 } }
cache: { enabled: true }
`;

describe('coalescing across workers (server.workers: 2)', { timeout: 180_000 }, () => {
  let dir: string;
  let up: FakeUpstream;
  let g: GatewayProcess | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-coalesce-workers-'));
    up = await startFakeOpenAI();
    g = await startGatewayProcess(join(dir, 'w.yaml'), `server: { workers: 2, shutdown_grace_ms: 2000 }\n${backend(up)}`, 60_000);
  });
  after(async () => {
    await stop(g);
    await up?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Sends the same request twice at once until the two land on different workers. */
  async function onBothWorkers(stream: boolean): Promise<{ replies: [Reply, Reply]; content: string }> {
    const gw = g as GatewayProcess;
    for (let i = 0; i < 8; i++) {
      const content = `across workers ${stream ? 'stream' : 'json'} ${i}`;
      const replies = await Promise.all([post(gw.url, ask(content, stream)), post(gw.url, ask(content, stream))]);
      const workers = await Promise.all(replies.map((r) => workerOf(gw, r)));
      if (workers[0] !== workers[1]) return { replies, content };
    }
    throw new Error('the two requests never landed on different workers');
  }

  it('two identical JSON requests on different workers make one upstream call', async () => {
    up.onModel('slow', { kind: 'reply', content: 'one shared answer', delayMs: 800 });
    const { replies, content } = await onBothWorkers(false);
    assert.deepEqual(
      replies.map((r) => r.status),
      [200, 200],
    );
    assert.equal(callsWith(up, content), 1, 'one upstream call for both');
    assert.equal(replies[0].body, replies[1].body, 'both clients get the same answer');
    assert.equal((JSON.parse(replies[0].body) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content, 'one shared answer');
    assert.deepEqual(replies.map((r) => r.headers['x-switchyard-coalesced'] ?? 'no').sort(), ['no', 'true']);
    assert.deepEqual(replies.map((r) => r.headers['x-switchyard-cache']).sort(), ['hit', 'miss']);
  });

  it('two identical streams on different workers make one upstream call; both get every chunk', async () => {
    up.onModel('slow', { kind: 'stream', chunks: ['alpha ', 'beta ', 'gamma ', 'delta'], delayMs: 250 });
    const { replies, content } = await onBothWorkers(true);
    assert.deepEqual(
      replies.map((r) => r.status),
      [200, 200],
    );
    assert.equal(callsWith(up, content), 1, 'one upstream call for both');
    for (const r of replies) {
      assert.equal(streamed(r.body), 'alpha beta gamma delta');
      assert.ok(r.body.endsWith('data: [DONE]\n\n'));
    }
    assert.equal(replies[0].body, replies[1].body, 'byte-identical streams');
    assert.deepEqual(replies.map((r) => r.headers['x-switchyard-coalesced'] ?? 'no').sort(), ['no', 'true']);
  });
});

/**
 * What Redis runs from now on, on a client of its own, once no flight holds a claim: the commands
 * gateways send (`fromClients`, KEYS left out) and those their scripts run (`inScripts`).
 */
async function redisCommands(url: string): Promise<{ fromClients: string[]; inScripts: string[]; claims: () => Promise<number>; stop: () => void }> {
  const c = new Redis(url);
  const claims = async (): Promise<number> => (await c.keys(`${flightKeys(`sy-coalesce-${process.pid}:`, '*')}:claim`)).length;
  await until('earlier flights let their claims go', async () => (await claims()) === 0);
  const fromClients: string[] = [];
  const inScripts: string[] = [];
  const monitor = await c.monitor();
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const name = String(args[0]).toLowerCase();
    if (source === 'lua') inScripts.push(name);
    else if (name !== 'keys') fromClients.push(name);
  });
  const stop = (): void => {
    monitor.disconnect();
    c.disconnect();
  };
  return { fromClients, inScripts, claims, stop };
}

describe('coalescing across replicas (two gateways on one Redis)', { skip: redisSkip, timeout: 180_000 }, () => {
  let pair: RedisPair | undefined;
  let dir: string;
  let redis: RedisServer | undefined;
  let up: FakeUpstream;
  let a: GatewayProcess | undefined;
  let b: GatewayProcess | undefined;

  before(async () => {
    pair = await startRedisPair('coalesce-redis', (u, url) => `${backend(u)}${redisState(url, 'sy-coalesce')}`);
    ({ dir, redis, up, a, b } = pair);
  });
  after(async () => {
    await pair?.stop();
  });

  it('the same JSON request on both replicas makes one upstream call', async () => {
    // the second request must reach its lookup while the first's call runs (later, it is a plain cache hit)
    up.onModel('slow', { kind: 'reply', content: 'shared by replicas', delayMs: 1500 });
    const first = post((a as GatewayProcess).url, ask('replicas json'));
    await until('the first reached the upstream', () => callsWith(up, 'replicas json') === 1);
    const second = await post((b as GatewayProcess).url, ask('replicas json'));
    const r1 = await first;
    assert.deepEqual([r1.status, second.status], [200, 200]);
    assert.equal(callsWith(up, 'replicas json'), 1);
    assert.equal(second.body, r1.body);
    assert.equal(second.headers['x-switchyard-coalesced'], 'true');
    assert.equal(second.headers['x-switchyard-cache'], 'hit');
    assert.equal(second.headers['x-switchyard-model'], 'slow');
  });

  it('the same stream on both replicas makes one upstream call; the late one replays then follows', async () => {
    up.onModel('slow', { kind: 'stream', chunks: ['one ', 'two ', 'three ', 'four'], delayMs: 300 });
    let firstSaw = (): void => {};
    const started = new Promise<void>((r) => (firstSaw = r));
    const first = post((a as GatewayProcess).url, ask('replicas stream', true), (t) => {
      if (t.includes('"content":"one "')) firstSaw();
    });
    await started;
    const second = await post((b as GatewayProcess).url, ask('replicas stream', true));
    const r1 = await first;
    assert.deepEqual([r1.status, second.status], [200, 200]);
    assert.equal(callsWith(up, 'replicas stream'), 1);
    assert.equal(streamed(second.body), 'one two three four');
    assert.equal(second.body, r1.body, 'byte-identical streams');
    assert.equal(second.headers['x-switchyard-coalesced'], 'true');
  });

  it('the leader fails before its answer: the follower makes its own call, after the failure, and gets an answer', async () => {
    up.reset();
    // the leader's upstream never answers (it times out after 1 s); the follower's own call succeeds
    up.enqueue({ kind: 'hang' }, { kind: 'reply', content: 'my own answer' });
    const body = { ...ask('leader fails json'), model: 'short' };
    const first = post((a as GatewayProcess).url, body);
    await until('the first reached the upstream', () => callsWith(up, 'leader fails json') === 1);
    const second = post((b as GatewayProcess).url, body);
    await up.waitForClientAbort(1);
    assert.equal(callsWith(up, 'leader fails json'), 1, 'the follower waited for the leader instead of calling');
    const [r1, r2] = await Promise.all([first, second]);
    assert.equal(r1.status, 504, "the leader's client gets the failure");
    assert.equal((JSON.parse(r1.body) as { error: { type: string } }).error.type, 'timeout_error');
    assert.equal(r2.status, 200);
    assert.equal((JSON.parse(r2.body) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content, 'my own answer');
    assert.equal(r2.headers['x-switchyard-coalesced'], undefined);
    assert.equal(callsWith(up, 'leader fails json'), 2);
  });

  it("the leader's stream is cut mid-way: the follower's stream ends with the same error event", async () => {
    up.reset();
    up.enqueue({ kind: 'stream', chunks: ['first ', 'second ', 'third'], delayMs: 300, dropAfter: 2 });
    let firstSaw = (): void => {};
    const started = new Promise<void>((r) => (firstSaw = r));
    const first = post((a as GatewayProcess).url, ask('leader cut stream', true), (t) => {
      if (t.includes('"content":"first "')) firstSaw();
    });
    await started;
    const second = await post((b as GatewayProcess).url, ask('leader cut stream', true));
    const r1 = await first;
    assert.equal(callsWith(up, 'leader cut stream'), 1);
    assert.equal(second.headers['x-switchyard-coalesced'], 'true');
    const lastEvent = (body: string): { error?: { code: string | null; type: string } } =>
      JSON.parse([...body.matchAll(/^data: (.*)$/gm)].at(-1)?.[1] ?? '{}') as { error?: { code: string | null; type: string } };
    for (const r of [r1, second]) {
      assert.ok(!r.body.includes('[DONE]'), 'no clean end hides the loss');
      assert.equal(streamed(r.body), 'first second ');
    }
    assert.ok(lastEvent(r1.body).error, 'the leader ends with an error event');
    assert.deepEqual(lastEvent(second.body).error, lastEvent(r1.body).error, 'the follower ends with the same error');
  });

  it("the leader's own client leaves mid-stream: the call goes on for the attached follower", async () => {
    up.reset();
    up.enqueue({ kind: 'stream', chunks: ['uno ', 'dos ', 'tres ', 'cuatro'], delayMs: 300 });
    const leaving = new AbortController();
    let firstSaw = (): void => {};
    const started = new Promise<void>((r) => (firstSaw = r));
    const first = post(
      (a as GatewayProcess).url,
      ask('leader leaves', true),
      (t) => {
        if (t.includes('"content":"uno "')) firstSaw();
      },
      leaving.signal,
    ).catch((err: unknown) => err);
    await started;
    let followerSaw = (): void => {};
    const following = new Promise<void>((r) => (followerSaw = r));
    const second = post((b as GatewayProcess).url, ask('leader leaves', true), (t) => {
      if (t.includes('"content":"uno "')) followerSaw();
    });
    await following;
    leaving.abort();
    assert.ok((await first) instanceof Error, "the leader's client went away");
    const r2 = await second;
    assert.equal(r2.status, 200);
    assert.equal(streamed(r2.body), 'uno dos tres cuatro');
    assert.ok(r2.body.endsWith('data: [DONE]\n\n'));
    assert.equal(up.clientAborts, 0, 'the upstream call was not cut');
    assert.equal(callsWith(up, 'leader leaves'), 1);
  });

  it('a cache miss is one Redis command before its upstream call, and one after it; the next is a hit', async () => {
    up.reset();
    up.onModel('slow', { kind: 'reply', content: 'counted', delayMs: 300 });
    const url = (a as GatewayProcess).url;
    // loads the scripts (a server that lacks one is sent its text once)
    assert.equal((await post(url, ask('round trips: warm-up'))).status, 200);
    // the commands clients send, as Redis receives them (not those its scripts run; not this test's)
    const { fromClients: sent, inScripts, claims, stop } = await redisCommands((redis as RedisServer).url);
    try {
      const reply = post(url, ask('round trips: counted'));
      await until('the request reached the upstream', () => callsWith(up, 'round trips: counted') === 1);
      assert.deepEqual(sent, ['evalsha'], 'the cache lookup and the claim, together');
      assert.equal((await reply).status, 200);
      // MONITOR's feed may reach this client after the KEYS reply that shows the claim gone
      await until('the claim is let go, and its command seen', async () => (await claims()) === 0 && sent.length >= 2);
      assert.deepEqual(sent, ['evalsha', 'evalsha'], 'then the answer cached and the claim let go, together');
      assert.equal(inScripts.filter((n) => n === 'xadd').length, 0, `nobody followed: no log entry written (${inScripts.join(' ')})`);
      const again = await post(url, ask('round trips: counted'));
      assert.equal(again.headers['x-switchyard-cache'], 'hit');
      assert.equal(again.headers['x-switchyard-coalesced'], undefined);
      assert.equal(callsWith(up, 'round trips: counted'), 1);
    } finally {
      stop();
    }
  });

  it('a streamed cache miss nobody follows is two Redis commands and writes no log: no XADD, even inside a script', async () => {
    up.reset();
    up.onModel('slow', { kind: 'stream', chunks: ['a ', 'b ', 'c ', 'd ', 'e'], delayMs: 100 });
    const url = (a as GatewayProcess).url;
    // the commands clients send, and those their scripts run
    const { fromClients, inScripts, claims, stop } = await redisCommands((redis as RedisServer).url);
    try {
      const r = await post(url, ask('unfollowed stream', true));
      assert.equal(r.status, 200);
      assert.equal(streamed(r.body), 'a b c d e');
      assert.equal(r.headers['x-switchyard-cache'], 'miss');
      // MONITOR's feed may reach this client after the KEYS reply that shows the claim gone
      await until('the claim is let go, and its command seen', async () => (await claims()) === 0 && fromClients.length >= 2);
      // the stream runs 500 ms: a leader that asked for followers while it waited would show here
      assert.deepEqual(fromClients, ['evalsha', 'evalsha'], 'the lookup with its claim; the cache entry with the release');
      assert.equal(inScripts.filter((n) => n === 'xadd').length, 0, `no log entry written (${inScripts.join(' ')})`);
      const again = await post(url, ask('unfollowed stream', true));
      assert.equal(again.headers['x-switchyard-cache'], 'hit');
      assert.equal(again.body, r.body);
      assert.equal(callsWith(up, 'unfollowed stream'), 1);
    } finally {
      stop();
    }
  });

  describe('a stream longer than cache.max_entry_bytes', () => {
    let c: GatewayProcess | undefined;
    let d: GatewayProcess | undefined;
    before(async () => {
      const yaml = `${backend(up).replace('cache: { enabled: true }', 'cache: { enabled: true, max_entry_bytes: 1500 }')}${redisState((redis as RedisServer).url, 'sy-bound')}`;
      ({ a: c, b: d } = await startGatewayPair(dir, 'bound', yaml));
    });
    after(async () => {
      await stopGatewayPair({ a: c, b: d });
    });

    it('the follower on the other replica gets all of it; a request after the bound makes its own call', async () => {
      up.reset();
      const words = ['c1 ', 'c2 ', 'c3 ', 'c4 ', 'c5 ', 'c6 ', 'c7 ', 'c8 ', 'c9 ', 'c10'];
      // the second request must reach its lookup before the bound is passed, four chunks after the first
      up.onModel('slow', { kind: 'stream', chunks: words, delayMs: 400 });
      let firstSaw = (): void => {};
      const started = new Promise<void>((r) => (firstSaw = r));
      let pastBound = (): void => {};
      const past = new Promise<void>((r) => (pastBound = r));
      const first = post((c as GatewayProcess).url, ask('past the bound', true), (t) => {
        if (t.includes('"content":"c1 "')) firstSaw();
        // a chunk's log text is about 250 bytes: the bound is passed by the sixth, well before the eighth
        if (t.includes('"content":"c8 "')) pastBound();
      });
      await started;
      const second = post((d as GatewayProcess).url, ask('past the bound', true));
      await past;
      const third = await post((d as GatewayProcess).url, ask('past the bound', true));
      const [r1, r2] = await Promise.all([first, second]);
      assert.deepEqual([r1.status, r2.status, third.status], [200, 200, 200]);
      assert.equal(r2.headers['x-switchyard-coalesced'], 'true');
      assert.equal(streamed(r2.body), words.join(''));
      assert.ok(r2.body.endsWith('data: [DONE]\n\n'));
      assert.equal(r2.body, r1.body, "byte-identical to the leader's client");
      assert.equal(third.headers['x-switchyard-coalesced'], undefined, 'a request after the bound does not join the flight');
      assert.equal(streamed(third.body), words.join(''));
      assert.equal(callsWith(up, 'past the bound'), 2);
    });
  });
});
