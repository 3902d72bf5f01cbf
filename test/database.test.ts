/**
 * The database layer on both dialects, the same tests each: an embedded SQLite file and a real
 * PostgreSQL cluster started for the file (test/support/postgres-server.ts). Opening creates the
 * schema once (a second open, or four processes opening at once, apply nothing more); records round
 * trip with numbers as numbers; the ledger's rows stay small on disk; a database that cannot be
 * reached is named in the error without its password.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { parseConfig } from '../src/config/load.ts';
import type { DatabaseConfig } from '../src/config/schema.ts';
import { DatabaseError, openDatabase, redactUrl, type OpenedDatabase } from '../src/db/database.ts';
import { SpendLedger, toMicros, type SpendRecord } from '../src/db/ledger.ts';
import type { NewSpend } from '../src/db/schema.ts';
import { spendTotals, spentSince } from '../src/db/spend.ts';
import { PostgresServer, postgresSkip } from './support/postgres-server.ts';

const NOW = Date.UTC(2026, 11, 2, 12, 0, 0);
const root = join(import.meta.dirname, '..');

/** What a suite needs from its dialect: a fresh database's config, and its size on disk of the ledger. */
interface Flavour {
  fresh(): DatabaseConfig;
  spendBytes(o: OpenedDatabase): Promise<number>;
  /** stops and restarts the server (Postgres only: an embedded file has no outage) */
  outage?: { down(): void; up(): void };
}

/** `n` answered requests over three days, five keys in two teams (one key without), three models. */
function generated(n: number, seed: number): SpendRecord[] {
  let x = seed;
  const rand = (m: number): number => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return x % m;
  };
  return Array.from({ length: n }, (_, i) => {
    const k = rand(6);
    return {
      at: NOW - rand(3) * 86_400_000 + rand(1000),
      key: k === 5 ? undefined : `key-${k}`,
      team: k === 5 ? undefined : k < 3 ? 'research' : 'web',
      model: ['gpt-4o-mini', 'claude-sonnet-4-5', 'qwen-local'][rand(3)] ?? 'x',
      backend: 'b',
      upstreamModel: 'u',
      tokensIn: rand(5000),
      tokensOut: rand(800),
      tokensCached: rand(2) * 1024,
      costUsd: rand(10) === 0 ? undefined : rand(100_000) / 1_000_000,
      latencyMs: rand(4000),
      status: rand(20) === 0 ? 502 : 200,
      requestId: `req_${i}`,
    };
  });
}

/** What the roll-up must say: per `by`, summed in JavaScript from the records. */
function expected(records: SpendRecord[], by: 'key' | 'team' | 'model'): Map<string | null, { requests: number; tokens_in: number; micros: number }> {
  const out = new Map<string | null, { requests: number; tokens_in: number; micros: number }>();
  for (const r of records) {
    const name = (by === 'key' ? r.key : by === 'team' ? r.team : r.model) ?? null;
    const t = out.get(name) ?? { requests: 0, tokens_in: 0, micros: 0 };
    t.requests++;
    t.tokens_in += r.tokensIn;
    t.micros += toMicros(r.costUsd) ?? 0;
    out.set(name, t);
  }
  return out;
}

const CHILD = `
import { openDatabase } from './src/db/database.ts';
const [cfg, i] = JSON.parse(process.argv[1]);
const o = await openDatabase(cfg);
await o.db.insertInto('teams').values({ id: 'team_' + i, name: 'child-' + i, models: null, limits: null, metadata: '{}', created_at: 1, updated_at: 1 }).execute();
await o.close();
console.log(JSON.stringify({ applied: o.applied }));
`;

/** Opens the database in another process (as a replica or a worker would), adds one team, closes. */
function openInChild(cfg: DatabaseConfig, i: number): Promise<{ applied: string[] }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD, JSON.stringify([cfg, i])], { cwd: root }, (err, stdout, stderr) => {
      if (err) reject(new Error(`child ${i}: ${stderr || err.message}`));
      else resolve(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as { applied: string[] });
    });
  });
}

function suite(name: string, skip: string | false, setup: () => Promise<{ flavour: Flavour; stop(): Promise<void> }>): void {
  describe(`database on ${name}`, { skip }, () => {
    let flavour: Flavour;
    let stop: (() => Promise<void>) | undefined;
    before(async () => {
      ({ flavour, stop } = await setup());
    });
    after(async () => stop?.());

    test('the first open creates the schema; the next applies nothing', async () => {
      const cfg = flavour.fresh();
      const first = await openDatabase(cfg);
      try {
        assert.deepEqual(first.applied, ['0001_records']);
        assert.match(first.version, name === 'SQLite' ? /^SQLite 3\./ : /^PostgreSQL 1\d/);
      } finally {
        await first.close();
      }
      const again = await openDatabase(cfg);
      try {
        assert.deepEqual(again.applied, []);
      } finally {
        await again.close();
      }
    });

    test('four processes opening a new database at once: migrated once, all usable', async () => {
      const cfg = flavour.fresh();
      const outs = await Promise.all([0, 1, 2, 3].map((i) => openInChild(cfg, i)));
      assert.deepEqual(outs.flatMap((o) => o.applied), ['0001_records']);
      const o = await openDatabase(cfg);
      try {
        const seen = await o.db.selectFrom('teams').select(['name']).orderBy('name').execute();
        assert.deepEqual(seen.map((t) => t.name), ['child-0', 'child-1', 'child-2', 'child-3']);
      } finally {
        await o.close();
      }
    });

    test('records round-trip: times and money as numbers, names unique, a key refers to its team', async () => {
      const o = await openDatabase(flavour.fresh());
      try {
        const { db } = o;
        await db.insertInto('teams').values({ id: 'team_a', name: 'research', models: '["gpt-*"]', limits: '{"budget_usd":50,"budget_period":"month"}', metadata: '{}', created_at: NOW, updated_at: NOW }).execute();
        await db
          .insertInto('keys')
          .values({
            id: 'key_a',
            name: 'alice',
            team_id: 'team_a',
            user_id: null,
            hash: 'a'.repeat(64),
            prefix: 'sk-sy-abcd',
            previous_hash: null,
            previous_until: null,
            models: '[]',
            limits: null,
            cache_namespace: null,
            metadata: '{"owner":"ünïcödé 🚂"}',
            expires_at: NOW + 86_400_000,
            revoked_at: null,
            created_at: NOW,
            updated_at: NOW,
          })
          .execute();
        const k = await db.selectFrom('keys').selectAll().where('hash', '=', 'a'.repeat(64)).executeTakeFirstOrThrow();
        assert.equal(k.expires_at, NOW + 86_400_000);
        assert.equal(typeof k.created_at, 'number');
        assert.equal(k.models, '[]');
        assert.equal(JSON.parse(k.metadata).owner, 'ünïcödé 🚂');
        await assert.rejects(db.insertInto('keys').values({ ...k, id: 'key_b', hash: 'b'.repeat(64) }).execute(), /unique|UNIQUE/);
        await assert.rejects(db.insertInto('keys').values({ ...k, id: 'key_c', name: 'carol', hash: 'c'.repeat(64), team_id: 'team_missing' }).execute(), /foreign key|FOREIGN KEY/i);

        const model = await db.insertInto('names').values({ kind: 'model', name: 'gpt-4o-mini' }).returning('id').executeTakeFirstOrThrow();
        await assert.rejects(db.insertInto('names').values({ kind: 'model', name: 'gpt-4o-mini' }).execute(), /unique|UNIQUE/);
        const big = 9_007_199_254; // micro-USD: about 9,007 USD, past 32 bits
        await db.insertInto('spend').values({ at: NOW, key_ref: 1, team_ref: 1, model_ref: model.id, backend_ref: null, upstream_ref: null, tokens_in: 10, tokens_out: 5, tokens_cached: 0, cost_micros: big, latency_ms: 120, status: 200, request_id: 'req_1' }).execute();
        await db.insertInto('spend').values({ at: NOW + 1, key_ref: 1, team_ref: 1, model_ref: model.id, backend_ref: null, upstream_ref: null, tokens_in: 1, tokens_out: 1, tokens_cached: 0, cost_micros: big, latency_ms: 80, status: 200, request_id: 'req_2' }).execute();
        const sum = await db.selectFrom('spend').select((e) => [e.fn.sum<number>('cost_micros').as('cost'), e.fn.countAll<number>().as('n')]).where('key_ref', '=', 1).executeTakeFirstOrThrow();
        assert.equal(sum.cost, 2 * big);
        assert.equal(sum.n, 2);
      } finally {
        await o.close();
      }
    });

    test('the ledger writes behind: totals by key, team and model, and a key\'s period spend, equal what was recorded', async () => {
      const o = await openDatabase(flavour.fresh());
      try {
        const ledger = new SpendLedger(o.db, { flushMs: 60_000, batchRows: 700, maxBufferedRows: 100_000 });
        const records = generated(3000, 7);
        const t0 = performance.now();
        for (const r of records) ledger.record(r);
        // recording is appending: 3,000 records cost far less than one flush
        assert.ok(performance.now() - t0 < 200);
        assert.equal(await ledger.close(), true);
        assert.deepEqual({ ...ledger.stats }, { buffered: 0, written: 3000, dropped: 0, failedFlushes: 0 });
        for (const by of ['key', 'team', 'model'] as const) {
          const got = await spendTotals(o.db, by, NOW - 3 * 86_400_000, NOW);
          const want = expected(records, by);
          assert.equal(got.length, want.size, by);
          for (const g of got) {
            const w = want.get(g.name);
            assert.ok(w, `${by} ${String(g.name)}`);
            assert.equal(g.requests, w.requests, `${by} ${String(g.name)} requests`);
            assert.equal(g.tokens_in, w.tokens_in, `${by} ${String(g.name)} tokens`);
            assert.equal(Math.round(g.cost_usd * 1_000_000), w.micros, `${by} ${String(g.name)} cost`);
          }
          for (let i = 1; i < got.length; i++) assert.ok((got[i - 1]?.cost_usd ?? 0) >= (got[i]?.cost_usd ?? 0), 'most spent first');
        }
        const today = records.filter((r) => r.key === 'key-1' && r.at >= Math.floor(NOW / 86_400_000) * 86_400_000);
        const micros = today.reduce((a, r) => a + (toMicros(r.costUsd) ?? 0), 0);
        assert.equal(Math.round((await spentSince(o.db, 'key', 'key-1', NOW)) * 1_000_000), micros);
        assert.equal(await spentSince(o.db, 'team', 'nobody', NOW), 0);
        const rows = await o.db.selectFrom('spend').select((e) => e.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        assert.equal(Number(rows.n), 3000);
      } finally {
        await o.close();
      }
    });

    test('two ledgers (two replicas) add to the same daily totals', async () => {
      const cfg = flavour.fresh();
      const [a, b] = [await openDatabase(cfg), await openDatabase(cfg)];
      try {
        const [la, lb] = [a, b].map((x) => new SpendLedger(x.db, { flushMs: 60_000, batchRows: 10_000, maxBufferedRows: 100_000 }));
        const records = generated(400, 11);
        records.forEach((r, i) => (i % 2 ? la : lb)?.record(r));
        // one after the other: two SQLite connections of one process would wait for each other's
        // write lock on one event loop (replicas are processes of their own)
        assert.equal(await la?.close(), true);
        assert.equal(await lb?.close(), true);
        const got = await spendTotals(a.db, 'model', NOW - 3 * 86_400_000, NOW);
        const want = expected(records, 'model');
        assert.deepEqual(new Map(got.map((g) => [g.name, g.requests])), new Map([...want].map(([k, v]) => [k, v.requests])));
      } finally {
        await a.close();
        await b.close();
      }
    });

    test('the database down: rows are kept (bounded, the dropped counted) and written when it returns', { skip: name === 'SQLite' ? 'an embedded file has no outage' : false }, async () => {
      const o = await openDatabase(flavour.fresh());
      const dropped: number[] = [];
      let errors = 0;
      const ledger = new SpendLedger(o.db, { flushMs: 60_000, batchRows: 10_000, maxBufferedRows: 40, onDropped: (n) => dropped.push(n), onFlushError: () => errors++ });
      let down = false;
      try {
        flavour.outage?.down();
        down = true;
        // down() blocks this event loop while the server stops: let the pool hear its cut connections
        await sleep(200);
        const records = generated(50, 3);
        for (const r of records.slice(0, 30)) ledger.record(r);
        await ledger.flush();
        assert.equal(errors, 1);
        for (const r of records.slice(30)) ledger.record(r);
        assert.deepEqual({ ...ledger.stats }, { buffered: 40, written: 0, dropped: 10, failedFlushes: 1 });
        assert.equal(dropped.reduce((a, b) => a + b, 0), 10);
        flavour.outage?.up();
        down = false;
        await ledger.flush();
        assert.deepEqual({ ...ledger.stats }, { buffered: 0, written: 40, dropped: 10, failedFlushes: 1 });
        const got = await spendTotals(o.db, 'model', NOW - 3 * 86_400_000, NOW);
        assert.equal(got.reduce((a, g) => a + g.requests, 0), 40);
        // the newest 40 were kept
        const ids = await o.db.selectFrom('spend').select('request_id').execute();
        assert.deepEqual(ids.map((r) => r.request_id).sort(), records.slice(10).map((r) => r.requestId).sort());
      } finally {
        if (down) flavour.outage?.up();
        await ledger.close();
        await o.close();
      }
    });

    test('a ledger row takes at most 200 bytes on disk, its indexes included', async () => {
      const o = await openDatabase(flavour.fresh());
      try {
        const N = 20_000;
        const rows: NewSpend[] = Array.from({ length: N }, (_, i) => ({
          at: NOW + i * 37,
          key_ref: 1 + (i % 300),
          team_ref: 1 + (i % 20),
          model_ref: 1 + (i % 12),
          backend_ref: 1 + (i % 5),
          upstream_ref: 1 + (i % 12),
          tokens_in: 200 + (i % 4000),
          tokens_out: 50 + (i % 900),
          tokens_cached: i % 3 === 0 ? 1024 : 0,
          cost_micros: 1500 + i,
          latency_ms: 300 + (i % 5000),
          status: i % 50 === 0 ? 502 : 200,
          request_id: `req_${(i * 2654435761).toString(16).padStart(32, '0').slice(-32)}`,
        }));
        for (let i = 0; i < N; i += 1000) await o.db.insertInto('spend').values(rows.slice(i, i + 1000)).execute();
        const perRow = (await flavour.spendBytes(o)) / N;
        console.log(`# ${name}: ${perRow.toFixed(0)} bytes per ledger row, indexes included`);
        assert.ok(perRow <= 200, `${perRow.toFixed(0)} bytes per row`);
      } finally {
        await o.close();
      }
    });
  });
}

suite('SQLite', false, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-db-'));
  let n = 0;
  return {
    flavour: {
      fresh: () => ({ type: 'sqlite', path: join(dir, `nested-${++n}`, 'switchyard.db') }),
      spendBytes: async (o) => {
        // dbstat (where built in) counts the table's and its indexes' pages exactly; else the whole file
        const r = await sql<{ bytes: number }>`select sum(pgsize) as bytes from dbstat where name = 'spend' or name like 'spend\\_%' escape '\\' and name not like 'spend\\_daily%' escape '\\'`.execute(o.db).catch(() => undefined);
        if (r?.rows[0]?.bytes) return r.rows[0].bytes;
        const p = await sql<{ bytes: number }>`select page_count * page_size as bytes from pragma_page_count(), pragma_page_size()`.execute(o.db);
        return p.rows[0]?.bytes ?? Infinity;
      },
    },
    stop: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

suite('PostgreSQL', postgresSkip, async () => {
  const pg = await PostgresServer.start();
  let n = 0;
  return {
    flavour: {
      fresh: () => ({ type: 'postgres', url: pg.createDatabase(`t${++n}`), pool_size: 4, statement_timeout_ms: 10_000 }),
      outage: { down: () => pg.halt(), up: () => pg.resume() },
      spendBytes: async (o) => {
        await sql`vacuum analyze spend`.execute(o.db);
        const r = await sql<{ bytes: number }>`select pg_total_relation_size('spend') as bytes`.execute(o.db);
        return r.rows[0]?.bytes ?? Infinity;
      },
    },
    stop: () => pg.stop(),
  };
});

describe('database settings', () => {
  test('SQLite: switchyard.db beside the config file; database.path and SWITCHYARD_DB move it', () => {
    const base = 'backends: { f: { type: fake } }\nmodels: { m: { targets: [ { backend: f, model: echo } ] } }\n';
    const at = (yaml: string, env: Record<string, string> = {}): unknown => parseConfig(yaml, '/etc/switchyard/providers.yaml', env).config.database;
    assert.deepEqual(at(base), { type: 'sqlite', path: '/etc/switchyard/switchyard.db' });
    assert.deepEqual(at(`${base}database: { type: sqlite, path: data/gw.db }`), { type: 'sqlite', path: '/etc/switchyard/data/gw.db' });
    assert.deepEqual(at(`${base}database: { type: sqlite, path: data/gw.db }`, { SWITCHYARD_DB: '/var/lib/switchyard/gw.db' }), { type: 'sqlite', path: '/var/lib/switchyard/gw.db' });
    assert.deepEqual(at(base, { SWITCHYARD_DB: ':memory:' }), { type: 'sqlite', path: ':memory:' });
    const pg = at(`${base}database: { type: postgres, url: "postgres://u:p@db:5432/gw" }`);
    assert.deepEqual(pg, { type: 'postgres', url: 'postgres://u:p@db:5432/gw', pool_size: 10, statement_timeout_ms: 10_000 });
    assert.throws(() => parseConfig(`${base}database: { type: postgres, url: "mysql://x" }`, 'p.yaml', {}), /database\.url: must be a postgres:\/\/ or postgresql:\/\/ URL/);
  });

  test('SQLite: the file is created on first open, in WAL mode', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-db-'));
    try {
      const path = join(dir, 'a', 'b', 'switchyard.db');
      const o = await openDatabase({ type: 'sqlite', path });
      try {
        assert.ok(existsSync(path));
        const mode = await sql<{ journal_mode: string }>`pragma journal_mode`.execute(o.db);
        assert.equal(mode.rows[0]?.journal_mode, 'wal');
      } finally {
        await o.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a database that cannot be reached: a DatabaseError naming it, never its password', async () => {
    const err = await openDatabase({ type: 'postgres', url: 'postgres://gw:s3cret-pw@127.0.0.1:9/gw', pool_size: 1, statement_timeout_ms: 1000 }).catch((e: unknown) => e);
    assert.ok(err instanceof DatabaseError, String(err));
    assert.match(err.message, /postgres:\/\/gw@127\.0\.0\.1:9\/gw/);
    assert.doesNotMatch(err.message, /s3cret/);
    assert.equal(redactUrl('postgresql://a:b@h/d?sslmode=require'), 'postgresql://a@h/d?sslmode=require');
    // a folder that cannot be made: its parent is a file
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-db-'));
    try {
      writeFileSync(join(dir, 'plain-file'), '');
      const path = join(dir, 'plain-file', 'x.db');
      const file = await openDatabase({ type: 'sqlite', path }).catch((e: unknown) => e);
      assert.ok(file instanceof DatabaseError, String(file));
      assert.ok(file.message.includes(path), file.message);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
