/**
 * bench/hop-times.ts, the preload of `npm run bench -- --path`: loaded into the floor proxy in
 * front of a small upstream, it reports one figure set per dump, counting only the requests since
 * the last reset, with both intervals measured (finite and positive).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

const root = join(import.meta.dirname, '..');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until<T>(get: () => T | undefined, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const v = get();
    if (v !== undefined) return v;
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('hop-times preload', () => {
  it('times each request before its upstream call and after the upstream head, since the last reset', async () => {
    const upstream = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const dir = mkdtempSync(join(tmpdir(), 'hop-times-'));
    const out = join(dir, 'hops.jsonl');
    const child = spawn(process.execPath, ['--import', 'tsx', '--import', join(root, 'bench', 'hop-times.ts'), join(root, 'bench', 'floor-proxy.ts'), `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`], {
      env: { ...process.env, HOP_TIMES_OUT: out },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      let first = '';
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (d: string) => (first += d));
      const port = await until(() => (first.includes('\n') ? (JSON.parse(first.split('\n')[0] as string) as { port: number }).port : undefined), 'the proxy');
      const call = async (): Promise<void> => {
        const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST', body: '{"model":"m"}', headers: { 'content-type': 'application/json' } });
        assert.equal(await res.text(), '{"ok":true}');
      };
      await call();
      await call();
      child.kill('SIGWINCH');
      await sleep(100);
      for (let i = 0; i < 5; i++) await call();
      child.kill('SIGUSR2');
      const line = await until(() => (existsSync(out) ? readFileSync(out, 'utf8').trim() || undefined : undefined), 'the dump');
      const d = JSON.parse(line) as { n: number; pre: number; post: number };
      assert.equal(d.n, 5, 'only the requests since the reset');
      assert.ok(Number.isFinite(d.pre) && d.pre > 0, `before the upstream call: ${d.pre} µs`);
      assert.ok(Number.isFinite(d.post) && d.post > 0, `after the upstream head: ${d.post} µs`);
    } finally {
      child.kill('SIGTERM');
      upstream.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
