/**
 * `npm run bench -- --path [--path-rounds 10]`: where a one-connection stream's first token spends
 * its time inside each proxy. The floor and Switchyard run with bench/hop-times.ts preloaded; in
 * alternating rounds of 1.5 s of one-connection streams (direct, floor, Switchyard, then the reverse
 * order), each proxy reports the median µs from the request's start to its upstream request being
 * sent ("before the upstream call") and from the upstream's head to the client's first write
 * ("after"), and the client times the first token. Writes bench/results/path.md.
 *
 * The rest of a proxy's added latency is waiting: for the other vCPU to wake, for the mock, and for
 * the client's reads. Comparing builds: `--path-against <git rev>` runs that revision's gateway as
 * a third proxy in the same alternating rounds (the figures move with the machine's state by tens
 * of µs from one quarter hour to the next, so separate runs compare badly).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Commands } from './build.ts';
import { load, median, probeStream } from './measure.ts';
import { chatBody, streamBody } from './payloads.ts';
import { startProc, stopProc, type Pinning, type Proc } from './procs.ts';
import { startSwitchyard } from './scenarios.ts';

const CHAT = '/v1/chat/completions';

interface PathOptions {
  root: string;
  results: string;
  mock: Proc;
  pin: Pinning;
  commands: Commands;
  rounds: number;
  seconds: number;
  /** another revision's gateway run beside this one (`--path-against <rev>`): its name and node arguments */
  against?: { name: string; gateway: string[] } | undefined;
}

interface Dump {
  n: number;
  pre: number;
  post: number;
}

/** The proxy's node arguments with the preload added before its script. */
function withPreload(args: string[], root: string): string[] {
  const script = args[args.length - 1] as string;
  const preload = script.endsWith('.ts') ? join(root, 'bench', 'hop-times.ts') : join(root, '.cache', 'bench-build', 'bench', 'hop-times.js');
  return [...args.slice(0, -1), '--import', preload, script];
}

const range = (xs: number[]): string => `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}`;

export async function pathScenario(o: PathOptions): Promise<string> {
  const core = (c: string): string | undefined => (o.pin.enabled ? c : undefined);
  const out = (name: string): string => join(o.results, `path-${name}.jsonl`);
  const gateways: Array<[string, string[]]> = [['switchyard', o.commands.gateway]];
  if (o.against) gateways.push([o.against.name, o.against.gateway]);
  for (const name of ['floor', ...gateways.map(([n]) => n)]) rmSync(out(name), { force: true });
  const procs: Array<[string, Proc]> = [];
  try {
    procs.push(['floor', await startProc({ name: 'floor proxy', args: [...withPreload(o.commands.floor, o.root), o.mock.url], core: core(o.pin.proxyCore), env: { ...o.commands.proxyEnv, HOP_TIMES_OUT: out('floor') } })]);
    for (const [name, gateway] of gateways) {
      const yamlPath = join(o.results, `${name.replace(/[^A-Za-z0-9._-]/g, '_')}-path.yaml`);
      const env = { ...o.commands.proxyEnv, HOP_TIMES_OUT: out(name) };
      procs.push([name, await startSwitchyard({ name, args: withPreload(gateway, o.root), yamlPath, mockPort: o.mock.port, core: core(o.pin.proxyCore), env })]);
    }
    // JIT warm-up, as the bench's: nothing measured
    for (const [, p] of procs) {
      await load(p.url, { path: CHAT, body: streamBody, connections: 64, seconds: 5 }, 0);
      await load(p.url, { path: CHAT, body: chatBody, connections: 64, seconds: 3 }, 0);
    }
    const targets: Array<[string, string, Proc | undefined]> = [['direct', o.mock.url, undefined], ...procs.map(([n, p]): [string, string, Proc] => [n, p.url, p])];
    const client: Record<string, number[]> = Object.fromEntries(targets.map(([n]) => [n, []]));
    for (let r = 0; r < o.rounds; r++) {
      for (const [name, url, p] of r % 2 ? [...targets].reverse() : targets) {
        await probeStream(url, CHAT, streamBody, 0.2, 3);
        if (p) process.kill(p.pid, 'SIGWINCH');
        await new Promise((res) => setTimeout(res, 20));
        const probe = await probeStream(url, CHAT, streamBody, o.seconds, 10);
        client[name]?.push(probe.ttft50 * 1000);
        if (p) process.kill(p.pid, 'SIGUSR2');
        await new Promise((res) => setTimeout(res, 100));
      }
    }
    const direct = median(client.direct ?? []);
    const lines = [
      `One connection, streams (20 chunks), ${o.rounds} alternating rounds of ${o.seconds} s per target; µs, median of the rounds' medians (range across rounds).`,
      '',
      '| target | before the upstream call | after the upstream head | client first token | added vs direct |',
      '|---|--:|--:|--:|--:|',
      `| direct | — | — | ${direct.toFixed(0)} (${range(client.direct ?? [])}) | — |`,
    ];
    for (const [name] of procs) {
      const dumps = readFileSync(out(name), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Dump);
      const pre = dumps.map((d) => d.pre);
      const post = dumps.map((d) => d.post);
      const c = client[name] ?? [];
      lines.push(`| ${name} | ${median(pre).toFixed(0)} (${range(pre)}) | ${median(post).toFixed(0)} (${range(post)}) | ${median(c).toFixed(0)} (${range(c)}) | +${(median(c) - direct).toFixed(0)} |`);
    }
    const md = lines.join('\n');
    writeFileSync(join(o.results, 'path.md'), `${md}\n`);
    return md;
  } finally {
    for (const [, p] of procs) await stopProc(p);
  }
}
