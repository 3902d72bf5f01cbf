/**
 * `npm run bench -- --workers N`: throughput and CPU per response of Switchyard with 1..N workers
 * (server.workers), chat at 64 connections against the zero-latency mock. CPU is the primary's and
 * every worker's, summed. What each added worker brings (the goal on free cores: ≥ 0.8× of one
 * worker's throughput) only shows on a machine with a free core per worker besides the mock and
 * the load generator: on fewer cores they share, and the table says how many there were.
 */
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import type { Commands } from './build.ts';
import { load } from './measure.ts';
import { cpuMs, freePort, startProc, stopProc, type Proc } from './procs.ts';
import { SCENARIOS, gatewayYaml } from './scenarios.ts';

/** The gateway's pid and its workers'. */
function family(pid: number): number[] {
  const kids = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);
  return [pid, ...kids];
}

const familyCpuMs = (pid: number): number => family(pid).reduce((sum, p) => sum + cpuMs(p), 0);

export async function workersScenario(o: { results: string; mock: Proc; commands: Commands; max: number; seconds: number; say: (s: string) => void }): Promise<string> {
  const sc = SCENARIOS.find((s) => s.id === 'chat-c64');
  if (!sc) throw new Error('chat-c64 scenario missing');
  const rows: string[] = [];
  let one = 0;
  for (let n = 1; n <= o.max; n++) {
    const port = await freePort();
    const yamlPath = join(o.results, `workers-${n}.yaml`);
    writeFileSync(yamlPath, gatewayYaml({ port, mockPort: o.mock.port, cache: false }).replace('shutdown_grace_ms: 2000 }', `shutdown_grace_ms: 2000, workers: ${n} }`));
    const gw = await startProc({ name: `switchyard ×${n}`, args: [...o.commands.gateway, '--config', yamlPath], port, readyPath: '/ready', quiet: true, env: o.commands.proxyEnv });
    try {
      await load(gw.url, { path: sc.path, body: sc.body, connections: sc.connections, seconds: 1 }, 0);
      const cpu0 = familyCpuMs(gw.pid);
      const r = await load(gw.url, { path: sc.path, body: sc.body, connections: sc.connections, seconds: o.seconds }, 0);
      const cpu = familyCpuMs(gw.pid) - cpu0;
      if (n === 1) one = r.rps;
      const added = n === 1 ? '' : `${((r.rps - one) / one / (n - 1)).toFixed(2)}×`;
      rows.push(`| ${n} | ${r.rps.toFixed(0)} | ${(r.rps / one).toFixed(2)}× | ${added} | ${((cpu / Math.max(1, r.responses)) * 1000).toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.errors} |`);
      o.say(`workers ${n}: ${r.rps.toFixed(0)} rps`);
    } finally {
      await stopProc(gw);
    }
  }
  return [
    `### Workers (chat, 64 connections, ${o.seconds} s each; ${cpus().length} cores on this machine, shared with the mock and the load generator)`,
    '',
    '| workers | responses/s | vs 1 worker | each added worker | CPU µs / response (all processes) | p50 ms | p99 ms | errors |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
