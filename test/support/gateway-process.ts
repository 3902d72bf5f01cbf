/**
 * Starts the gateway as a child process (`node --import tsx src/main.ts --config <file>`, PORT=0 on
 * loopback) for tests of what only a real process shows: start-up order, signals, exit codes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { until } from './redis-server.ts';

const root = join(import.meta.dirname, '..', '..');

export interface GatewayProcess {
  child: ChildProcess;
  /** from its `listening` log line */
  url: string;
  /** everything it wrote to stdout and stderr so far */
  output: () => string;
  /** the config file it was started with */
  cfg: string;
}

/** Writes `yaml` to `cfg` and starts a gateway on it; resolves once it logged "listening". */
export async function startGatewayProcess(cfg: string, yaml: string, timeoutMs = 30_000): Promise<GatewayProcess> {
  writeFileSync(cfg, yaml);
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'src/main.ts'), '--config', cfg], {
    cwd: root,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start: ${out}`)), timeoutMs);
    const check = (): void => {
      const m = /"msg":"listening","url":"([^"]+)"/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout?.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code}: ${out}`));
    });
  });
  return { child, url, output: () => out, cfg };
}

/** Stops it: SIGTERM, then SIGKILL when it has not exited within `graceMs`. Undefined or exited: nothing. */
export async function stopGatewayProcess(g: GatewayProcess | undefined, graceMs = 10_000): Promise<void> {
  if (!g || g.child.exitCode !== null || g.child.signalCode !== null) return;
  const exited = new Promise((r) => g.child.once('exit', r));
  g.child.kill('SIGTERM');
  await Promise.race([exited, sleep(graceMs, undefined, { ref: false })]);
  if (g.child.exitCode !== null || g.child.signalCode !== null) return;
  g.child.kill('SIGKILL');
  await exited;
}

/**
 * Waits until it is ready as a load balancer sees it: `/ready` 200 with its state store connected.
 * It listens before that (docs/operations.md): a request sent earlier is served without the shared
 * state (no Redis claim, no shared breaker), which is right for it and wrong for a test of sharing.
 */
export async function untilReady(g: GatewayProcess, ms = 15_000): Promise<void> {
  await until(
    `${g.cfg}: /ready 200 with its state store ok`,
    async () => {
      const r = await fetch(`${g.url}/ready`).catch(() => undefined);
      const body = (await r?.json().catch(() => undefined)) as { state?: { state: string } } | undefined;
      return r?.status === 200 && (body?.state === undefined || body.state.state === 'ok');
    },
    ms,
  );
}
