/**
 * Shared flights (coalescing across processes) on both drivers: the primary's memory table (what
 * workers reach over IPC) and Redis. The same scenarios, the same outcomes: a follower gets the
 * leader's JSON answer or its stream (replayed, then live); a leader that fails before its answer
 * sends followers to call by themselves; one that dies mid-stream (its claim expires) or fails
 * ends their streams with an error; past its bound a flight takes no new followers but finishes for
 * the attached ones, and stops when none is; attached followers are counted. A stream nobody
 * follows publishes nothing; one a follower attaches to reaches it whole, even at its very end.
 * In CI (CI set) a missing redis-server is a failure, never a skip.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { GatewayError } from '../src/errors/gateway-error.ts';
import { FlightTable } from '../src/state/flights/flight-table.ts';
import { LeaderNotices } from '../src/state/flights/flight-notices.ts';
import { ipcFlightDriver, serveStateOp } from '../src/state/store/ipc.ts';
import { MemoryStore } from '../src/state/store/memory.ts';
import { flightKeys, RedisFlights } from '../src/state/flights/redis-flights.ts';
import { SharedFlights, type Claim, type FlightDriver, type FlightSink, type Lookup } from '../src/state/flights/shared-flights.ts';
import { RedisServer, redisSkip, until } from './support/redis-server.ts';

const TTL = 400;
const never = { aborted: false };

class Sink implements FlightSink {
  texts: string[] = [];
  done: Promise<unknown>;
  private resolve!: (err: unknown) => void;
  constructor() {
    this.done = new Promise((r) => (this.resolve = r));
  }
  pushText(t: string): void {
    this.texts.push(t);
  }
  finish(err?: unknown): void {
    this.resolve(err ?? 'clean');
  }
}

/** `driver` with a watch that never answers: its leaders learn of followers only from their refreshes. */
function deaf(driver: FlightDriver): FlightDriver {
  return new Proxy(driver, {
    get(t, p) {
      if (p === 'watch') return () => new Promise<number>(() => {});
      const v = Reflect.get(t, p) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}

/** `seesCache`: the driver looks the cache up with its claim and stores answers with the release. */
function scenarios(name: string, make: () => { driver: FlightDriver; close?: () => Promise<void> }, skip: string | false = false, seesCache = false): void {
  describe(`shared flights: ${name}`, { skip, timeout: 30_000 }, () => {
    let driver: FlightDriver;
    let flights: SharedFlights;
    let n = 0;
    const key = (): string => `${name}-${process.pid}-${++n}`;
    /** Whether a claim of `k` now leads (its lead then let go at once; a follower detaches). */
    const leads = async (k: string, max: number): Promise<boolean> => {
      const c = await flights.claim(k, max);
      c?.follow?.close();
      c?.lead?.close();
      return c?.lead !== undefined;
    };
    before(() => {
      driver = make().driver;
      flights = new SharedFlights(driver, TTL);
    });
    after(() => driver?.close());

    it('a follower gets the JSON answer; the claim is free again afterwards', async () => {
      const k = key();
      const a = await flights.claim(k, 1 << 20);
      const b = await flights.claim(k, 1 << 20);
      assert.ok(a?.lead && b?.follow, 'the first claims, the second follows');
      const answer = b.follow.json(never);
      a.lead.json('{"kind":"json","body":1}');
      a.lead.close();
      assert.equal(await answer, '{"kind":"json","body":1}');
      await until('the claim is let go', async () => (await flights.claim(k, 1 << 20))?.lead !== undefined, 5000);
    });

    it('a stream follower gets the log from the start, then live parts, then the end; it is counted while attached', async () => {
      const k = key();
      const a = await flights.claim(k, 1 << 20);
      assert.ok(a?.lead);
      a.lead.head('up', 'm1');
      a.lead.part('{"n":1}');
      const b = await flights.claim(k, 1 << 20);
      assert.ok(b?.follow);
      const sink = new Sink();
      const head = await b.follow.stream(never, sink);
      assert.deepEqual(head, { backend: 'up', model: 'm1' });
      await until('the follower is attached', async () => (await a.lead.followers()) === 1, 5000);
      a.lead.part('{"n":2}');
      a.lead.end();
      a.lead.close();
      assert.equal(await sink.done, 'clean');
      assert.deepEqual(sink.texts, ['{"n":1}', '{"n":2}']);
    });

    it('a leader that fails before its answer sends followers to call by themselves', async () => {
      const k = key();
      const a = await flights.claim(k, 1 << 20);
      const b = await flights.claim(k, 1 << 20);
      const c = await flights.claim(k, 1 << 20);
      assert.ok(a?.lead && b?.follow && c?.follow);
      const json = b.follow.json(never);
      const stream = c.follow.stream(never, new Sink());
      a.lead.fail(new GatewayError('upstream_unavailable', 'down'));
      a.lead.close();
      assert.equal(await json, undefined);
      assert.equal(await stream, undefined);
    });

    it('a leader that fails mid-stream ends the follower with its error', async () => {
      const k = key();
      const a = await flights.claim(k, 1 << 20);
      const b = await flights.claim(k, 1 << 20);
      assert.ok(a?.lead && b?.follow);
      a.lead.head('up', 'm1');
      a.lead.part('{"n":1}');
      const sink = new Sink();
      assert.ok(await b.follow.stream(never, sink));
      a.lead.fail(new GatewayError('upstream_connection_lost', 'cut'));
      a.lead.close();
      const err = await sink.done;
      assert.ok(err instanceof GatewayError);
      assert.equal(err.kind, 'upstream_connection_lost');
      assert.equal(err.message, 'cut');
      assert.deepEqual(sink.texts, ['{"n":1}']);
    });

    it('a leader that dies (its claim expires without an end) fails its followers within the TTL', async () => {
      const k = key();
      // a leader process that is gone: claimed, published a head and a part, never refreshed
      assert.equal(await driver.claim(k, 'dead', TTL), 'dead');
      const before = await flights.claim(k, 1 << 20);
      assert.ok(before?.follow);
      const waiting = before.follow.json(never);
      await driver.append(k, 'dead', [{ k: 'h', v: '{"backend":"up","model":"m"}' }, { k: 'p', v: '{"n":1}' }], TTL * 10);
      const sink = new Sink();
      const s = await flights.claim(k, 1 << 20);
      assert.ok(s?.follow);
      assert.ok(await s.follow.stream(never, sink));
      assert.equal(await waiting, undefined, 'the JSON follower calls by itself');
      const err = await sink.done;
      assert.ok(err instanceof GatewayError && err.kind === 'upstream_connection_lost', String(err));
      assert.deepEqual(sink.texts, ['{"n":1}']);
    });

    it('past its bound a flight takes no new followers; the attached ones get every part and the end', async () => {
      const k = key();
      const a = await flights.claim(k, 20);
      const b = await flights.claim(k, 20);
      assert.ok(a?.lead && b?.follow);
      a.lead.head('up', 'm1');
      const sink = new Sink();
      assert.ok(await b.follow.stream(never, sink));
      await until('attached', async () => (await a.lead.followers()) === 1, 5000);
      a.lead.part('{"n":"0123456789"}');
      a.lead.part('{"n":"0123456789"}');
      await until('a new request leads a flight of its own', () => leads(k, 20), 5000);
      // the leader goes on through its periodic refreshes, for the attached follower
      let refreshes = 0;
      a.lead.onFollowers = () => refreshes++;
      await until('three refreshes later', () => refreshes >= 3, 5000);
      a.lead.part('{"n":3}');
      a.lead.end();
      a.lead.close();
      assert.equal(await sink.done, 'clean');
      assert.deepEqual(sink.texts, ['{"n":"0123456789"}', '{"n":"0123456789"}', '{"n":3}']);
    });

    it('past its bound with nobody attached the leader gives its flight up, having published nothing', async () => {
      const k = key();
      const a = await flights.claim(k, 20);
      assert.ok(a?.lead);
      const lead = a.lead;
      lead.head('up', 'm1');
      lead.part('{"n":"0123456789"}');
      lead.part('{"n":"0123456789"}');
      await until('the flight is over', async () => !(await driver.read(k, lead.id, '', 10)).held, 5000);
      lead.part('{"n":3}');
      lead.end();
      lead.close();
      assert.deepEqual((await driver.read(k, lead.id, '', 10)).entries, []);
      assert.ok(await leads(k, 20), 'the key is free');
    });

    it('a stream nobody follows publishes nothing: its flight ends with an empty log', async () => {
      const k = key();
      const a = await flights.claim(k, 1 << 20);
      assert.ok(a?.lead);
      const lead = a.lead;
      lead.head('up', 'm1');
      for (let i = 0; i < 5; i++) lead.part(`{"n":${i}}`);
      // a few refreshes and watches while it runs
      let refreshes = 0;
      lead.onFollowers = () => refreshes++;
      await until('two refreshes later', () => refreshes >= 2, 5000);
      lead.part('{"n":5}');
      lead.end();
      lead.close();
      await until('the flight is over', async () => !(await driver.read(k, lead.id, '', 10)).held, 5000);
      assert.deepEqual((await driver.read(k, lead.id, '', 10)).entries, []);
      assert.ok(await leads(k, 1 << 20), 'the key is free');
    });

    it('a follower that attaches as the stream ends (before its leader saw it) still gets all of it; the cache entry is still stored', async () => {
      const k = key();
      // leaders that never hear of a follower from their watch, and refresh only every 20 s
      const slow = new SharedFlights(deaf(driver), 60_000);
      const take = async (): Promise<Claim | Lookup | null | undefined> => (seesCache ? slow.lookup(k, 1 << 20) : slow.claim(k, 1 << 20));
      const a = await take();
      const b = await take();
      assert.ok(a?.lead && b?.follow);
      a.lead.head('up', 'm1');
      a.lead.part('{"n":1}');
      const sink = new Sink();
      const head = b.follow.stream(never, sink);
      await until('the follower is attached', async () => (await driver.refresh(k, a.lead.id, 60_000)) === 1, 5000);
      a.lead.part('{"n":2}');
      a.lead.end();
      // the release that finds the follower does nothing; the one that publishes stores the entry
      if (seesCache) a.lead.cache('{"kind":"stream","chunks":[{"n":1},{"n":2}]}', 60_000);
      a.lead.close();
      assert.deepEqual(await head, { backend: 'up', model: 'm1' });
      assert.equal(await sink.done, 'clean');
      assert.deepEqual(sink.texts, ['{"n":1}', '{"n":2}']);
      if (seesCache) assert.deepEqual(await slow.lookup(k, 1 << 20), { entry: '{"kind":"stream","chunks":[{"n":1},{"n":2}]}' });
    });
    if (seesCache) it("a stream's cache entry is stored with its release, in the same operation, when nobody followed", async () => {
      const k = key();
      const a = await flights.lookup(k, 1 << 20);
      assert.ok(a?.lead);
      const lead = a.lead;
      assert.equal(lead.storesAnswers, true);
      lead.head('up', 'm1');
      lead.part('{"n":1}');
      const appends: boolean[] = [];
      const append = driver.append.bind(driver);
      driver.append = async (...args) => {
        const done = await append(...args);
        appends.push(done);
        return done;
      };
      try {
        lead.end();
        lead.cache('{"kind":"stream","chunks":[{"n":1}]}', 60_000);
        lead.close();
        await until('the flight is over, its write answered', async () => appends.length > 0 && !(await driver.read(k, lead.id, '', 10)).held, 5000);
      } finally {
        driver.append = append;
      }
      assert.deepEqual(appends, [true], 'one write: the cache entry and the release');
      assert.deepEqual((await driver.read(k, lead.id, '', 10)).entries, [], 'no log');
      const again = await flights.lookup(k, 1 << 20);
      assert.deepEqual(again, { entry: '{"kind":"stream","chunks":[{"n":1}]}' });
    });

    it('a follower that stops reading detaches', async () => {
      const k = key();
      const a = await flights.claim(k, 1 << 20);
      const b = await flights.claim(k, 1 << 20);
      assert.ok(a?.lead && b?.follow);
      a.lead.head('up', 'm1');
      assert.ok(await b.follow.stream(never, new Sink()));
      await until('attached', async () => (await a.lead.followers()) === 1, 5000);
      b.follow.close();
      await until('detached', async () => (await a.lead.followers()) === 0, 5000);
      a.lead.end();
      a.lead.close();
    });
  });
}

scenarios('memory table', () => ({ driver: new FlightTable() }));
scenarios('memory store over IPC', () => {
  const store = new MemoryStore({ maxEntries: 100, maxBytes: 1 << 20 });
  const table = new FlightTable();
  // the primary tells the leading worker when a follower attaches, as the cluster's does
  const notices = new LeaderNotices();
  return { driver: ipcFlightDriver(async (op) => (await serveStateOp(store, { op: 'flight', f: op }, table, (id) => notices.heard(id))).value, notices) };
}, false, true);

describe('shared flights: a worker leading over IPC', { timeout: 30_000 }, () => {
  it('a streamed miss nobody follows is two operations, the lookup and the release with its cache entry; a follower still gets it all', async () => {
    const store = new MemoryStore({ maxEntries: 100, maxBytes: 1 << 20 });
    const table = new FlightTable();
    const notices = new LeaderNotices();
    const ops: string[] = [];
    const flights = new SharedFlights(
      ipcFlightDriver(async (op) => {
        ops.push(op.m);
        return (await serveStateOp(store, { op: 'flight', f: op }, table, (id) => notices.heard(id))).value;
      }, notices),
      60_000,
    );
    const a = await flights.lookup('alone', 1 << 20);
    assert.ok(a?.lead);
    a.lead.head('up', 'm1');
    a.lead.part('{"n":1}');
    a.lead.end();
    a.lead.cache('{"kind":"stream"}', 60_000);
    a.lead.close();
    await until('released', () => ops.includes('append') && table.size === 1, 5000);
    assert.deepEqual(ops, ['lookup', 'append']);
    assert.deepEqual(await flights.lookup('alone', 1 << 20), { entry: '{"kind":"stream"}' });

    // a follower that attaches while the leader waits is heard of at once (its refresh is 20 s away)
    const b = await flights.lookup('followed', 1 << 20);
    const c = await flights.lookup('followed', 1 << 20);
    assert.ok(b?.lead && c?.follow);
    b.lead.head('up', 'm1');
    b.lead.part('{"n":1}');
    const sink = new Sink();
    assert.deepEqual(await c.follow.stream(never, sink), { backend: 'up', model: 'm1' });
    b.lead.end();
    b.lead.close();
    assert.equal(await sink.done, 'clean');
    assert.deepEqual(sink.texts, ['{"n":1}']);
    assert.equal(ops.filter((m) => m === 'watch').length, 0, `the leader never asked (${ops.join(' ')})`);
  });
});

let dir: string | undefined;
let redis: RedisServer | undefined;
let client: Redis | undefined;
if (!redisSkip) {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-flights-'));
    redis = await RedisServer.start(dir);
    client = new Redis(redis.url, { maxRetriesPerRequest: 0, commandTimeout: 1000 });
    await until('redis client ready', () => client?.status === 'ready');
  });
  after(async () => {
    client?.disconnect();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
}
scenarios('redis', () => ({ driver: new RedisFlights(client as Redis, `sy-flights-${process.pid}:`, 1000) }), redisSkip, true);

describe('shared flights: redis scripts', { skip: redisSkip, timeout: 30_000 }, () => {
  /** Calls of EVAL and EVALSHA the server has run so far. */
  async function calls(c: Redis): Promise<{ eval: number; evalsha: number }> {
    const info = await c.info('commandstats');
    const n = (cmd: string): number => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
    return { eval: n('eval'), evalsha: n('evalsha') };
  }

  it('run by SHA once loaded, and loaded again when the server lost them (SCRIPT FLUSH, a restart)', async () => {
    const c = client as Redis;
    const flights = new SharedFlights(new RedisFlights(c, `sy-scripts-${process.pid}:`, 1000), TTL);
    const flight = async (k: string): Promise<void> => {
      const a = await flights.claim(k, 1 << 20);
      const b = await flights.claim(k, 1 << 20);
      assert.ok(a?.lead && b?.follow);
      const answer = b.follow.json(never);
      a.lead.json('{"kind":"json","body":1}');
      a.lead.close();
      assert.equal(await answer, '{"kind":"json","body":1}');
      await until('the claim is let go', async () => (await c.exists(`${flightKeys(`sy-scripts-${process.pid}:`, k)}:claim`)) === 0, 5000);
    };
    await c.script('FLUSH');
    await flight('after-flush');
    const before = await calls(c);
    await flight('loaded');
    const after = await calls(c);
    assert.equal(after.eval, before.eval, 'no script text sent once loaded');
    assert.ok(after.evalsha >= before.evalsha + 2, `claims and the release by SHA (${before.evalsha} → ${after.evalsha})`);
    flights.close();
  });
});

describe('shared flights: a redis leader hears of its followers', { skip: redisSkip, timeout: 30_000 }, () => {
  /** A driver whose process channel is subscribed (a first flight opened it), and its flights. */
  async function listening(name: string, ttlMs: number): Promise<{ driver: RedisFlights; flights: SharedFlights }> {
    const driver = new RedisFlights(client as Redis, `sy-${name}-${process.pid}:`, 1000);
    const flights = new SharedFlights(driver, ttlMs);
    (await flights.claim(`${name}-warm-up`, 1 << 20))?.lead?.close();
    await until('the channel is subscribed', () => driver.listening, 5000);
    return { driver, flights };
  }

  /** The commands Redis runs from now on (the scripts' own included), until `stop`. */
  async function monitored(): Promise<{ sent: string[]; stop: () => void }> {
    const c = new Redis((redis as RedisServer).url);
    const sent: string[] = [];
    const m = await c.monitor();
    m.on('monitor', (_time: string, args: string[]) => sent.push(String(args[0]).toLowerCase()));
    return {
      sent,
      stop: () => {
        m.disconnect();
        c.disconnect();
      },
    };
  }

  it("a stream's leader sends no command while it waits; a follower's attach tells it, and it gets the whole stream", async () => {
    // refreshes every 20 s: within this test only the follower's notice can make the leader publish
    const { driver, flights } = await listening('heard', 60_000);
    const m = await monitored();
    try {
      const a = await flights.claim('heard', 1 << 20);
      assert.ok(a?.lead);
      a.lead.head('up', 'm1');
      a.lead.part('{"n":1}');
      const b = await flights.claim('heard', 1 << 20);
      assert.ok(b?.follow);
      const sink = new Sink();
      assert.deepEqual(await b.follow.stream(never, sink), { backend: 'up', model: 'm1' });
      a.lead.part('{"n":2}');
      a.lead.end();
      a.lead.close();
      assert.equal(await sink.done, 'clean');
      assert.deepEqual(sink.texts, ['{"n":1}', '{"n":2}']);
      assert.ok(m.sent.includes('publish'), `the attach told the leader (${m.sent.join(' ')})`);
      assert.equal(m.sent.filter((c) => c === 'scard').length, 0, `the leader never counted its followers (${m.sent.join(' ')})`);
    } finally {
      m.stop();
      driver.close();
    }
  });

  it('a notice that never arrives is made up by the next refresh', async () => {
    const { driver, flights } = await listening('unheard', 600);
    try {
      const a = await flights.claim('unheard', 1 << 20);
      assert.ok(a?.lead);
      a.lead.head('up', 'm1');
      a.lead.part('{"n":1}');
      // a follower attached while the leader's subscription was down: in the set, never published
      await (client as Redis).sadd(`${flightKeys(`sy-unheard-${process.pid}:`, 'unheard')}:${a.lead.id}:fol`, 'quiet');
      const seen = new Promise<number>((resolve) => (a.lead.onFollowers = (n) => n > 0 && resolve(n)));
      assert.equal(await seen, 1);
      await until('the held log is published', async () => (await driver.read('unheard', a.lead.id, '', 10)).entries.length === 2, 5000);
      assert.deepEqual(
        (await driver.read('unheard', a.lead.id, '', 10)).entries.map((e) => e.k),
        ['h', 'p'],
      );
      a.lead.end();
      a.lead.close();
    } finally {
      driver.close();
    }
  });
});
