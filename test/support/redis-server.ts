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

/** A suite's `skip`: in CI (CI set) a missing redis-server is a failure, never a skip. */
export const redisSkip: string | false = !hasRedis && !process.env.CI ? 'redis-server is not installed (apt-get install redis-server; .ci/run does it)' : false;

/** Waits until `f` holds (polled every 25 ms), failing the test after `ms`. */
export async function until(what: string, f: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return;
    await sleep(25);
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
    await s.launch();
    return s;
  }

  /** Starts it (again, after stop(): the same port, empty). */
  async launch(): Promise<void> {
    const r = spawnSync('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--daemonize', 'yes', '--pidfile', this.pidfile, '--save', '', '--appendonly', 'no', '--dir', this.dir], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, `redis-server did not start: ${r.stdout}${r.stderr}`);
    await until('redis answers PING', () => redisPing(this.port));
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
