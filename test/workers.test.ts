/**
 * server.workers: 2 — the gateway as a real primary with two worker processes sharing one port.
 * Requests reach both workers; a key's rpm admits exactly N across them; an answer cached by one
 * worker is a hit on the other; /metrics (asked of any worker) counts every request once; a killed
 * worker is replaced while the other keeps serving; SIGHUP reaches every worker; on SIGTERM a slow
 * stream in flight on each worker finishes and the primary exits 0.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { request, type IncomingHttpHeaders } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

const root = join(import.meta.dirname, '..');
const KEY_LIMITED = 'sk-limited-0123456789';
const KEY_FREE = 'sk-free-0123456789';
const KEY_ADMIN = 'sk-admin-0123456789';
const RPM = 6;

const yaml = (extraModel = ''): string => `
server: { workers: 2, shutdown_grace_ms: 15000 }
backends:
  fast: { type: fake }
  slow: { type: fake, chunk_delay_ms: 150 }
models:
  m: { targets: [ { backend: fast, model: echo } ] }
  slow: { targets: [ { backend: slow, model: echo } ] }
${extraModel}
keys:
  - { name: limited, key: "${KEY_LIMITED}", limits: { rpm: ${RPM} } }
  - { name: free, key: "${KEY_FREE}" }
cache: { enabled: true }
admin: { public_metrics: true, key: "${KEY_ADMIN}" }
`;

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request on a connection of its own (the primary hands connections to the workers in turn). */
function send(url: string, method: string, path: string, body?: unknown, key = KEY_FREE): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${path}`,
      { method, agent: false, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', connection: 'close' }, timeout: 20_000 },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const chat = (url: string, content: string, key?: string): Promise<Reply> =>
  send(url, 'POST', '/v1/chat/completions', { model: 'm', temperature: 0, messages: [{ role: 'user', content }] }, key);

interface Gateway {
  child: ChildProcess;
  url: string;
  dir: string;
  cfg: string;
  output(): string;
  exited: Promise<number | null>;
}

/** Waits (bounded) until the output has a line matching `re`; returns the match. */
async function waitFor(g: Gateway, re: RegExp, ms = 30_000): Promise<RegExpMatchArray> {
  const end = Date.now() + ms;
  for (;;) {
    const m = g.output().match(re);
    if (m) return m;
    if (Date.now() > end) throw new Error(`no log line matching ${re} within ${ms} ms:\n${g.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The worker index on the access-log line of each request id. */
async function workersOf(g: Gateway, ids: readonly string[]): Promise<number[]> {
  const out: number[] = [];
  for (const id of ids) {
    const m = await waitFor(g, new RegExp(`"msg":"request","request_id":"${id}"[^\\n]*"worker":(\\d+)`), 10_000);
    out.push(Number(m[1]));
  }
  return out;
}

async function start(): Promise<Gateway> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-workers-'));
  const cfg = join(dir, 'providers.yaml');
  writeFileSync(cfg, yaml());
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'src/main.ts'), '--config', cfg], {
    cwd: root,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const g: Gateway = { child, url: '', dir, cfg, output: () => out, exited };
  const m = await Promise.race([waitFor(g, /"msg":"listening","url":"([^"]+)"[^\n]*"workers":2/, 60_000), exited.then((c) => Promise.reject(new Error(`exited ${c}: ${out}`)))]);
  g.url = m[1] ?? '';
  return g;
}

/** Pids of the live workers by index, from the primary's `worker started` lines (the latest per index). */
function workerPids(g: Gateway): Map<number, number> {
  const pids = new Map<number, number>();
  for (const m of g.output().matchAll(/"msg":"worker started","worker":(\d+),"pid":(\d+)/g)) pids.set(Number(m[1]), Number(m[2]));
  return pids;
}

describe('server.workers: 2', { timeout: 180_000 }, () => {
  let g: Gateway;
  before(async () => {
    g = await start();
  });
  after(async () => {
    // the workers exit with their primary (node:cluster ends a worker whose primary is gone)
    if (g?.child.exitCode === null) g.child.kill('SIGKILL');
    for (const pid of g ? workerPids(g).values() : []) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    if (g) rmSync(g.dir, { recursive: true, force: true });
  });

  it('serves from both workers, and a key with rpm N admits exactly N across them', async () => {
    const replies = await Promise.all(Array.from({ length: 2 * RPM }, (_, i) => chat(g.url, `limited ${i}`, KEY_LIMITED)));
    const ok = replies.filter((r) => r.status === 200).length;
    const limited = replies.filter((r) => r.status === 429);
    assert.equal(ok, RPM, `200s: ${replies.map((r) => r.status).join(',')}`);
    assert.equal(limited.length, RPM);
    for (const r of limited) assert.equal((JSON.parse(r.body) as { error: { code: string } }).error.code, 'rate_limit_exceeded');
    const workers = await workersOf(g, replies.map((r) => String(r.headers['x-request-id'])));
    assert.deepEqual([...new Set(workers)].sort(), [0, 1], 'both workers served some of them');
  });

  it('an answer cached by one worker is a hit on the other', async () => {
    const first = await chat(g.url, 'cache me across workers');
    assert.equal(first.status, 200);
    assert.equal(first.headers['x-switchyard-cache'], 'miss');
    const [firstWorker] = await workersOf(g, [String(first.headers['x-request-id'])]);
    const seen = new Set<number>();
    for (let i = 0; i < 10 && ![...seen].some((w) => w !== firstWorker); i++) {
      const again = await chat(g.url, 'cache me across workers');
      assert.equal(again.status, 200);
      assert.equal(again.headers['x-switchyard-cache'], 'hit', `request ${i + 1} after the first`);
      assert.equal(again.body, first.body);
      const [w] = await workersOf(g, [String(again.headers['x-request-id'])]);
      seen.add(w ?? -1);
    }
    assert.ok([...seen].some((w) => w !== firstWorker), `a hit was served by the other worker (first: ${firstWorker}, then: ${[...seen].join(',')})`);
  });

  it('/metrics, asked of either worker, counts every request once', async () => {
    const total = async (): Promise<{ n: number; worker: number }> => {
      const r = await send(g.url, 'GET', '/metrics');
      assert.equal(r.status, 200);
      let n = 0;
      for (const m of r.body.matchAll(/^switchyard_requests_total\{route="\/v1\/chat\/completions"[^}]*\} (\d+)$/gm)) n += Number(m[1]);
      const [worker] = await workersOf(g, [String(r.headers['x-request-id'])]);
      return { n, worker: worker ?? -1 };
    };
    const before = await total();
    const K = 8;
    const replies = await Promise.all(Array.from({ length: K }, (_, i) => chat(g.url, `count ${i}`)));
    assert.ok(replies.every((r) => r.status === 200));
    assert.deepEqual([...new Set(await workersOf(g, replies.map((r) => String(r.headers['x-request-id']))))].sort(), [0, 1]);
    const askedOf = new Set<number>();
    for (let i = 0; i < 10 && askedOf.size < 2; i++) {
      const now = await total();
      askedOf.add(now.worker);
      assert.equal(now.n - before.n, K, `asked of worker ${now.worker}`);
    }
    assert.equal(askedOf.size, 2, 'both workers answered /metrics with the same sum');
  });

  it('/status, asked of either worker, shows both workers', async () => {
    const pids = workerPids(g);
    const askedOf = new Set<number>();
    for (let i = 0; i < 10 && askedOf.size < 2; i++) {
      const r = await send(g.url, 'GET', '/status', undefined, KEY_ADMIN);
      assert.equal(r.status, 200);
      const report = JSON.parse(r.body) as { extras: { workers?: Array<{ worker: number; pid: number; state: string; in_flight: number; breakers: unknown[] }> } };
      const list = report.extras.workers ?? [];
      assert.deepEqual(list.map((w) => w.worker), [0, 1]);
      assert.deepEqual(list.map((w) => w.pid), [pids.get(0), pids.get(1)]);
      assert.ok(list.every((w) => w.state === 'serving' && typeof w.in_flight === 'number' && Array.isArray(w.breakers)));
      const [worker] = await workersOf(g, [String(r.headers['x-request-id'])]);
      askedOf.add(worker ?? -1);
    }
    assert.equal(askedOf.size, 2, 'both workers answered /status with both workers');
    const page = await send(g.url, 'GET', '/', undefined, KEY_ADMIN);
    assert.match(page.body, /<h2>workers<\/h2>/);
    assert.match(page.body, new RegExp(`<td class="num">${pids.get(1)}</td>`));
  });

  it('SIGHUP: every worker applies the new configuration', async () => {
    writeFileSync(g.cfg, yaml('  m2: { targets: [ { backend: fast, model: echo } ] }'));
    g.child.kill('SIGHUP');
    await waitFor(g, /"msg":"config reloaded"[^\n]*"workers":2/);
    const replies = await Promise.all(
      Array.from({ length: 6 }, (_, i) => send(g.url, 'POST', '/v1/chat/completions', { model: 'm2', messages: [{ role: 'user', content: `new ${i}` }] })),
    );
    assert.deepEqual(
      replies.map((r) => r.status),
      replies.map(() => 200),
    );
    assert.deepEqual([...new Set(await workersOf(g, replies.map((r) => String(r.headers['x-request-id']))))].sort(), [0, 1]);
  });

  it('a killed worker is replaced while the other keeps serving', async () => {
    const pids = workerPids(g);
    const victim = pids.get(0);
    assert.ok(victim !== undefined);
    process.kill(victim, 'SIGKILL');
    await waitFor(g, new RegExp(`"msg":"worker died: starting another","worker":0,"pid":${victim}`));
    // meanwhile worker 1 serves every request
    const during = await Promise.all(Array.from({ length: 4 }, (_, i) => chat(g.url, `during ${i}`)));
    assert.deepEqual(
      during.map((r) => r.status),
      [200, 200, 200, 200],
    );
    const replaced = await waitFor(g, new RegExp(`"msg":"worker started","worker":0,"pid":(?!${victim}\\b)(\\d+)`));
    assert.notEqual(Number(replaced[1]), victim);
    const afterwards = await Promise.all(Array.from({ length: 6 }, (_, i) => chat(g.url, `after ${i}`)));
    assert.ok(afterwards.every((r) => r.status === 200));
    assert.deepEqual([...new Set(await workersOf(g, afterwards.map((r) => String(r.headers['x-request-id']))))].sort(), [0, 1], 'the new worker serves too');
  });

  it('SIGTERM: a slow stream in flight on each worker finishes, then the primary exits 0', async () => {
    const streams = [0, 1].map(
      () =>
        new Promise<{ started: Promise<void>; done: Promise<string>; id: string }>((resolve, reject) => {
          const req = request(
            `${g.url}/v1/chat/completions`,
            { method: 'POST', agent: false, headers: { authorization: `Bearer ${KEY_FREE}`, 'content-type': 'application/json' } },
            (res) => {
              let text = '';
              let markStarted: () => void = () => {};
              const started = new Promise<void>((r) => (markStarted = r));
              res.setEncoding('utf8');
              res.on('data', (d: string) => {
                text += d;
                if (text.includes('"content":"echo: "')) markStarted();
              });
              const done = new Promise<string>((r, j) => {
                res.on('end', () => r(text));
                res.on('error', j);
              });
              resolve({ started, done, id: String(res.headers['x-request-id']) });
            },
          );
          req.on('error', reject);
          req.end(JSON.stringify({ model: 'slow', stream: true, messages: [{ role: 'user', content: 'one two three four five six seven eight nine ten' }] }));
        }),
    );
    const open = await Promise.all(streams);
    await Promise.all(open.map((s) => s.started));
    g.child.kill('SIGTERM');
    const texts = await Promise.all(open.map((s) => s.done));
    for (const t of texts) {
      assert.ok(t.endsWith('data: [DONE]\n\n'), 'the in-flight stream completed');
      assert.ok(t.includes('"content":"ten"'), 'with all its content');
    }
    assert.deepEqual((await workersOf(g, open.map((s) => s.id))).sort(), [0, 1], 'one stream on each worker');
    assert.equal(await g.exited, 0);
    for (const w of [0, 1]) assert.match(g.output(), new RegExp(`"msg":"stopped","worker":${w}`));
    assert.match(g.output(), /"msg":"stopped","workers":2/);
  });
});

describe('server.workers: workers that cannot start', { timeout: 120_000 }, () => {
  it('the primary exits 1 with the reason when a worker dies before listening again and again', async () => {
    // a port taken by another listener: every worker fails to listen
    const { createServer } = await import('node:net');
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as { port: number }).port;
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-workers-'));
    const cfg = join(dir, 'providers.yaml');
    writeFileSync(cfg, yaml());
    const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'src/main.ts'), '--config', cfg], {
      cwd: root,
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    try {
      const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
      assert.equal(code, 1);
      assert.match(out, /switchyard: worker \d exited before listening 5 times in a row/);
      assert.match(out, /EADDRINUSE/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      blocker.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
