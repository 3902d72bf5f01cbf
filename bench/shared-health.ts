/**
 * `npm run bench -- --shared-health [--ab-starts 4] [--ab-rounds 4]`: what `routing.shared_health`
 * costs Switchyard in CPU per response, chat at 64 connections (chat-c64), in two pairs:
 *   - `server.workers: 2` on the memory store (outcomes to the primary over IPC): shared_health
 *     false vs left unset (on in workers); CPU is the primary's and both workers', summed;
 *   - one process on `state.store: redis` (a redis-server this bench starts on a free loopback
 *     port, no persistence, stopped by its pid): shared_health false vs true; the redis-server's
 *     own CPU per response is reported beside it. Skipped, with a note, without `redis-server`.
 * Both gateways of a pair otherwise run the default config (scenarios.ts's gatewayYaml). Measured
 * as bench/tracing.ts measures: each gateway started afresh `--ab-starts` times (in alternating
 * order), rounds of 2 s alternating between the two, the cheapest round kept and the median beside
 * it. With pinning, the gateway (its workers and the redis-server too) share the proxy core.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Commands } from './build.ts';
import { load, median } from './measure.ts';
import { cpuMs, freePort, startProc, stopProc, type Pinning, type Proc } from './procs.ts';
import { SCENARIOS, gatewayYaml, type Scenario } from './scenarios.ts';

export interface SharedHealthOptions {
  results: string;
  mock: Proc;
  pin: Pinning;
  commands: Commands;
  starts: number;
  rounds: number;
  say: (s: string) => void;
}

/** The gateway's pid and its workers' (bench/workers.ts). */
function family(pid: number): number[] {
  const kids = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);
  return [pid, ...kids];
}

export const familyCpuMs = (pid: number): number => family(pid).reduce((sum, p) => sum + cpuMs(p), 0);

export interface Variant {
  id: string;
  label: string;
  /** lines appended to the generated config */
  extra: string[];
  /** node arguments that start this variant's gateway (default: this checkout's) */
  gateway?: string[];
}

export interface Pair {
  id: string;
  label: string;
  /** `server.workers` (1: a single process) */
  workers: number;
  variants: [Variant, Variant];
}

export interface Redis {
  child: ChildProcess;
  pid: number;
  url: string;
}

export const hasRedis = (): boolean => spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;

async function redisAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.setTimeout(500);
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => {
      s.destroy();
      resolve(d.toString().startsWith('+PONG'));
    });
    s.once('error', () => resolve(false));
    s.once('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

/** A redis-server in the foreground on a free loopback port, without persistence. */
export async function startRedis(core: string | undefined): Promise<Redis> {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  const child = core !== undefined ? spawn('taskset', ['-c', core, 'redis-server', ...args], { stdio: 'ignore' }) : spawn('redis-server', args, { stdio: 'ignore' });
  if (child.pid === undefined) throw new Error('redis-server: no pid');
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`redis-server exited early (${child.exitCode})`);
    if (await redisAnswers(port)) return { child, pid: child.pid, url: `redis://127.0.0.1:${port}` };
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error('redis-server did not answer PING within 10 s');
}

export async function stopRedis(r: Redis): Promise<void> {
  if (r.child.exitCode !== null || r.child.signalCode !== null) return;
  const done = new Promise<void>((res) => r.child.once('exit', () => res()));
  process.kill(r.pid, 'SIGTERM');
  await done;
}

export function pairs(redisUrl: string | undefined): Pair[] {
  const out: Pair[] = [
    {
      id: 'workers',
      label: '`server.workers: 2`, memory store (IPC)',
      workers: 2,
      variants: [
        { id: 'off', label: 'false', extra: ['routing: { shared_health: false }'] },
        { id: 'on', label: 'unset (on)', extra: [] },
      ],
    },
  ];
  if (redisUrl !== undefined) {
    const state = (v: string): string => `state: { store: redis, url: "${redisUrl}", key_prefix: "sy-bench-${v}:" }`;
    out.push({
      id: 'redis',
      label: 'one process, `state.store: redis`',
      workers: 1,
      variants: [
        { id: 'off', label: 'false', extra: ['routing: { shared_health: false }', state('off')] },
        { id: 'on', label: 'true', extra: ['routing: { shared_health: true }', state('on')] },
      ],
    });
  }
  return out;
}

/**
 * A gateway on the bench's default config (zero-latency mock, no cache) with `server.workers` and
 * more top-level lines, started and ready (bench/coalesce.ts too).
 */
export async function startConfigured(
  o: { results: string; mock: Proc; pin: Pinning; commands: Commands },
  g: { name: string; file: string; workers: number; extra: string[]; gateway?: string[] | undefined },
): Promise<Proc> {
  const port = await freePort();
  const yamlPath = join(o.results, g.file);
  let yaml = gatewayYaml({ port, mockPort: o.mock.port, cache: false });
  if (g.workers > 1) yaml = yaml.replace('shutdown_grace_ms: 2000 }', `shutdown_grace_ms: 2000, workers: ${g.workers} }`);
  writeFileSync(yamlPath, `${yaml}${g.extra.join('\n')}\n`);
  return startProc({
    name: g.name,
    args: [...(g.gateway ?? o.commands.gateway), '--config', yamlPath],
    core: o.pin.enabled ? o.pin.proxyCore : undefined,
    port,
    readyPath: '/ready',
    quiet: true,
    env: o.commands.proxyEnv,
  });
}

const startGateway = (o: SharedHealthOptions, pair: Pair, v: Variant): Promise<Proc> =>
  startConfigured(o, { name: `switchyard (${pair.id}, shared_health ${v.id})`, file: `shared-health-${pair.id}-${v.id}.yaml`, workers: pair.workers, extra: v.extra, gateway: v.gateway });

export interface RoundResult {
  /** the gateway's CPU µs per response (primary + workers) */
  us: number;
  /** the redis-server's CPU µs per response over the same round */
  redisUs: number;
  rps: number;
}

async function cpuRound(p: Proc, sc: Scenario, seconds: number, redis: Redis | undefined): Promise<RoundResult> {
  const before = familyCpuMs(p.pid);
  const redis0 = redis ? cpuMs(redis.pid) : 0;
  const r = await load(p.url, { path: sc.path, body: sc.body, connections: sc.connections, seconds }, 0);
  if (r.errors > 0) throw new Error(`${p.name}: ${r.errors} errors in a round`);
  const n = Math.max(1, r.responses);
  return { us: ((familyCpuMs(p.pid) - before) * 1000) / n, redisUs: redis ? ((cpuMs(redis.pid) - redis0) * 1000) / n : 0, rps: r.rps };
}

export async function measurePair(o: SharedHealthOptions, pair: Pair, sc: Scenario, redis: Redis | undefined): Promise<RoundResult[][]> {
  const all: RoundResult[][] = [[], []];
  for (let start = 0; start < o.starts; start++) {
    const order = start % 2 ? [1, 0] : [0, 1];
    const procs: Proc[] = [];
    try {
      for (const i of order) procs[i] = await startGateway(o, pair, pair.variants[i] as Variant);
      // JIT warm-up, nothing recorded
      for (const i of order) await load((procs[i] as Proc).url, { path: sc.path, body: sc.body, connections: sc.connections, seconds: 3 }, 0);
      const mine: RoundResult[][] = [[], []];
      for (let r = 0; r < o.rounds; r++) {
        for (const i of r % 2 ? [...order].reverse() : order) {
          // the gateway measured before may still be sending its last outcomes on the same core
          await sleep(500);
          mine[i]?.push(await cpuRound(procs[i] as Proc, sc, 2, redis));
        }
      }
      mine.forEach((xs, i) => all[i]?.push(...xs));
      o.say(`start ${start + 1}, ${pair.id}: ${pair.variants.map((v, i) => `${v.id} ${Math.min(...(mine[i] ?? []).map((x) => x.us)).toFixed(1)}`).join(', ')} µs/resp (cheapest round)`);
    } finally {
      for (const p of procs) if (p) await stopProc(p);
    }
  }
  return all;
}

const pct = (x: number, base: number): string => `${x >= base ? '+' : ''}${(((x - base) / base) * 100).toFixed(1)}%`;

export async function sharedHealthScenario(o: SharedHealthOptions): Promise<string> {
  const sc = SCENARIOS.find((s) => s.id === 'chat-c64');
  if (!sc) throw new Error('chat-c64 scenario missing');
  const notes: string[] = [];
  let redis: Redis | undefined;
  if (hasRedis()) redis = await startRedis(o.pin.enabled ? o.pin.proxyCore : undefined);
  else notes.push('The redis pair was skipped: `redis-server` is not installed (apt-get install redis-server).');
  const rows: string[] = [];
  try {
    for (const pair of pairs(redis?.url)) {
      const all = await measurePair(o, pair, sc, pair.id === 'redis' ? redis : undefined);
      const off = all[0] ?? [];
      const offBest = Math.min(...off.map((x) => x.us));
      const offMedian = median(off.map((x) => x.us));
      for (const [i, v] of pair.variants.entries()) {
        const xs = all[i] ?? [];
        const best = Math.min(...xs.map((x) => x.us));
        const mid = median(xs.map((x) => x.us));
        const redisCol = pair.id === 'redis' ? median(xs.map((x) => x.redisUs)).toFixed(1) : '–';
        rows.push(`| ${pair.label} | ${v.label} | ${best.toFixed(1)} | ${mid.toFixed(1)} | ${i === 0 ? '–' : pct(best, offBest)} | ${i === 0 ? '–' : pct(mid, offMedian)} | ${median(xs.map((x) => x.rps)).toFixed(0)} | ${redisCol} |`);
      }
    }
  } finally {
    if (redis) await stopRedis(redis);
  }
  return [
    `CPU µs per response of chat at 64 connections (chat-c64) with \`routing.shared_health\` off and on: ${o.starts} fresh starts of each gateway × ${o.rounds} alternating rounds of 2 s; the cheapest round, the median beside it. Gateway CPU is the primary's and its workers', summed; ${o.pin.note}.`,
    '',
    '| setup | shared_health | µs/resp (cheapest) | µs/resp (median) | vs false (cheapest) | vs false (median) | responses/s (median) | redis-server µs/resp (median) |',
    '|---|---|--:|--:|--:|--:|--:|--:|',
    ...rows,
    ...(notes.length ? ['', ...notes] : []),
  ].join('\n');
}
