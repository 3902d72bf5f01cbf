/**
 * `npm run bench -- --ab <git rev> [--ab-starts 4] [--ab-rounds 4] [--only chat-c64,stream-c64]`:
 * this checkout's gateway against another revision's, by the CPU each spends per response, in
 * alternating rounds of 2 s. Both are started afresh `--ab-starts` times (in alternating order),
 * because a process's own luck (what the JIT made of it, its heap's layout) moves its cost per
 * request by several per cent for its whole life: an A/B of one pair of processes can show a
 * change of 15 µs as 3 or 17. Prints each start's medians, the median over all rounds and the
 * per-start differences; writes bench/results/ab.md.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Commands } from './build.ts';
import { load, median } from './measure.ts';
import { cpuMs, stopProc, type Pinning, type Proc } from './procs.ts';
import { SCENARIOS, startSwitchyard, type Scenario } from './scenarios.ts';

interface AbOptions {
  results: string;
  mock: Proc;
  pin: Pinning;
  commands: Commands;
  /** the other revision: its name and node arguments (build.ts revisionGateway) */
  other: { name: string; gateway: string[] };
  ids: string[];
  starts: number;
  rounds: number;
  say: (s: string) => void;
}

/** CPU µs per response of `p` over one round of `sc`. */
async function cpuPerResponse(p: Proc, sc: Scenario, seconds: number): Promise<number> {
  const before = cpuMs(p.pid);
  const r = await load(p.url, { path: sc.path, body: sc.body, connections: sc.connections, seconds }, 0);
  return ((cpuMs(p.pid) - before) * 1000) / Math.max(1, r.responses);
}

export async function abScenario(o: AbOptions): Promise<string> {
  const scenarios = o.ids.map((id) => SCENARIOS.find((s) => s.id === id)).filter((s): s is Scenario => s !== undefined);
  // both revisions run the default config (scenarios.ts's gatewayYaml): no native backends
  const native = scenarios.filter((s) => s.native).map((s) => s.id);
  if (native.length) throw new Error(`--ab measures translated routes only; drop ${native.join(', ')}`);
  if (scenarios.length === 0) throw new Error(`--ab: no scenario among ${o.ids.join(', ')}`);
  const builds: Array<[string, string[]]> = [
    ['this checkout', o.commands.gateway],
    [o.other.name, o.other.gateway],
  ];
  const all = new Map<string, number[][]>(scenarios.map((s) => [s.id, [[], []]]));
  const diffs = new Map<string, number[]>(scenarios.map((s) => [s.id, []]));
  const lines: string[] = [];
  for (let start = 0; start < o.starts; start++) {
    const order = start % 2 ? [1, 0] : [0, 1];
    const procs: Proc[] = [];
    try {
      for (const i of order) {
        const [name, args] = builds[i] as [string, string[]];
        procs[i] = await startSwitchyard({ name, args, yamlPath: join(o.results, `ab-${i}.yaml`), mockPort: o.mock.port, core: o.pin.enabled ? o.pin.proxyCore : undefined, env: o.commands.proxyEnv });
      }
      // JIT warm-up of every scenario measured, nothing recorded
      for (const i of order) for (const sc of scenarios) await cpuPerResponse(procs[i] as Proc, sc, 3);
      for (const sc of scenarios) {
        const mine: number[][] = [[], []];
        for (let r = 0; r < o.rounds; r++) {
          for (const i of r % 2 ? [...order].reverse() : order) mine[i]?.push(await cpuPerResponse(procs[i] as Proc, sc, 2));
        }
        const [a, b] = mine.map(median) as [number, number];
        all.get(sc.id)?.forEach((xs, i) => xs.push(...(mine[i] ?? [])));
        diffs.get(sc.id)?.push(a - b);
        const line = `start ${start + 1}, ${sc.id}: this checkout ${a.toFixed(1)}, ${o.other.name} ${b.toFixed(1)} µs/req`;
        o.say(line);
        lines.push(`- ${line}`);
      }
    } finally {
      for (const p of procs) if (p) await stopProc(p);
    }
  }
  const md = [
    `CPU µs per response, this checkout vs ${o.other.name}: ${o.starts} fresh starts of both × ${o.rounds} alternating rounds of 2 s per scenario.`,
    '',
    `| scenario | this checkout | ${o.other.name} | difference | per start |`,
    '|---|--:|--:|--:|---|',
    ...scenarios.map((sc) => {
      const [a, b] = (all.get(sc.id) ?? [[], []]).map(median) as [number, number];
      return `| ${sc.id} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(a - b).toFixed(1)} (${(((a - b) / b) * 100).toFixed(1)}%) | ${(diffs.get(sc.id) ?? []).map((d) => d.toFixed(1)).join(', ')} |`;
    }),
    '',
    ...lines,
  ].join('\n');
  writeFileSync(join(o.results, 'ab.md'), `${md}\n`);
  return md;
}
