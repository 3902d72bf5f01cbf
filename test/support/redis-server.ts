/**
 * A throwaway `redis-server` (Debian's) on a free loopback port, no persistence, stopped by the pid
 * it wrote. `hasRedis` says whether one can be started here.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, redisPing } from './net.ts';

export const hasRedis = spawnSync('redis-server', ['--version']).status === 0;

async function until(what: string, f: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return;
    await sleep(50);
  }
  assert.fail(`timed out waiting for: ${what}`);
}

export class RedisServer {
  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  /** Starts one in `dir` (its pid file goes there). */
  static async start(dir: string): Promise<RedisServer> {
    const s = new RedisServer(await freePort(), dir);
    const r = spawnSync('redis-server', ['--port', String(s.port), '--bind', '127.0.0.1', '--daemonize', 'yes', '--pidfile', s.pidfile, '--save', '', '--appendonly', 'no', '--dir', dir], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, `redis-server did not start: ${r.stdout}${r.stderr}`);
    await until('redis answers PING', () => redisPing(s.port));
    return s;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  private get pidfile(): string {
    return join(this.dir, `redis-${this.port}.pid`);
  }

  async stop(): Promise<void> {
    let pid: number | undefined;
    try {
      pid = Number(readFileSync(this.pidfile, 'utf8').trim());
    } catch {
      return;
    }
    if (!Number.isInteger(pid) || pid <= 0) return;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
    rmSync(this.pidfile, { force: true });
    await until('redis is gone', async () => !(await redisPing(this.port)));
  }
}
