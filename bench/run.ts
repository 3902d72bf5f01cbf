/**
 * `npm run bench`: Switchyard's overhead next to the floor (a bare node:http + undici.request
 * pass-through) and no proxy at all, in one run, against a zero-latency mock upstream.
 *
 *   npm run bench [-- --seconds 2] [--rounds 2] [--rounds-64 3] [--warm 1] [--warm-start 2] [--only chat-c64,stream-c1] [--long [--long-seconds 5]]
 *                 [--wait-quiet 120] [--tsx] [--no-docs]
 *   npm run bench -- --profile [--only chat-c64,embed-float-c64]   CPU profile of Switchyard instead
 *   npm run bench -- --perf [--only stream-c64]   Switchyard and the floor under Linux perf instead (bench/perf.ts)
 *   npm run bench -- --path [--path-rounds 10] [--path-against <git rev>]   where a one-connection first token spends its time in each proxy (bench/path.ts)
 *   npm run bench -- --workers N [--seconds 5]   throughput and CPU per response with 1..N workers (bench/workers.ts)
 *   npm run bench -- --ab <git rev> [--ab-starts 4] [--ab-rounds 4] [--only chat-c64,stream-c64]   CPU per response, this checkout vs that revision (bench/ab.ts)
 *   npm run bench -- --tracing [--ab-starts 4] [--ab-rounds 4] [--only chat-c64,stream-c64]   CPU per response with tracing off / on / sampled (bench/tracing.ts)
 *   npm run bench -- --shared-health [--ab-starts 4] [--ab-rounds 4]   CPU per response with routing.shared_health off / on, workers and Redis (bench/shared-health.ts)
 *   npm run bench -- --coalesce [--ab-starts 4] [--ab-rounds 4] [--coalesce-against <rev>]   a cache miss with cache.coalesce off / on, workers and Redis (bench/coalesce.ts)
 *   npm run bench -- --onnx-memory [--onnx-requests 200]   RSS per process without / with a local ONNX model, 1 process and 2 workers (bench/onnx-memory.ts)
 *
 * Processes: the mock upstream (bench/mock-upstream.ts), the floor (bench/floor-proxy.ts) and two
 * Switchyards (src/main.ts with a generated config: default features, and the same with the
 * response cache on) are separate processes. With taskset and two or more cores, every proxy under
 * test is pinned to one core and the mock + this process (autocannon) to another. They run from a
 * tsc build by default, as production runs dist/ (`npm start`, the Docker image); `--tsx` runs the
 * TypeScript through tsx instead (`npm run dev`), which costs more: tsx compiles with esbuild's
 * keepNames, so every closure created per request also gets its name defined.
 * Prints one markdown report, saves it to bench/results/latest.md (+ latest.json), and copies it
 * into docs/performance.md between the `bench:begin` / `bench:end` markers.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { compiledCommands, revisionGateway, tsxCommands } from './build.ts';
import { combineProbes, load, median, probeStream, type LoadResult, type ProbeResult } from './measure.ts';
import { STREAM_CHUNKS, pacedBody, streamBody, streamFraming } from './payloads.ts';
import { cpuMs, machineBusyMs, machineLoad, planPinning, pinSelf, sampleRss, startProc, stopProc, type Proc } from './procs.ts';
import { abScenario } from './ab.ts';
import { pathScenario } from './path.ts';
import { perfScenarios } from './perf.ts';
import { profileScenarios } from './profile.ts';
import { sharedHealthScenario } from './shared-health.ts';
import { coalesceScenario } from './coalesce.ts';
import { onnxMemoryScenario } from './onnx-memory.ts';
import { tracingScenario } from './tracing.ts';
import { workersScenario } from './workers.ts';
import { render, type LongRow, type ProbeRow, type Report, type Row, type TargetName } from './report.ts';
import { CACHE_SCENARIOS, PROTOCOL_PROBES, SCENARIOS, startSwitchyard, type Scenario } from './scenarios.ts';

const { values: a } = parseArgs({
  options: {
    seconds: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '2' },
    'rounds-64': { type: 'string', default: '3' },
    warm: { type: 'string', default: '1' },
    'warm-start': { type: 'string', default: '2' },
    'long-seconds': { type: 'string', default: '5' },
    only: { type: 'string' },
    long: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    perf: { type: 'boolean', default: false },
    path: { type: 'boolean', default: false },
    'path-rounds': { type: 'string', default: '10' },
    'path-against': { type: 'string' },
    ab: { type: 'string' },
    'ab-starts': { type: 'string', default: '4' },
    'ab-rounds': { type: 'string', default: '4' },
    tracing: { type: 'boolean', default: false },
    'shared-health': { type: 'boolean', default: false },
    coalesce: { type: 'boolean', default: false },
    'coalesce-against': { type: 'string' },
    'onnx-memory': { type: 'boolean', default: false },
    'onnx-requests': { type: 'string', default: '200' },
    'profile-interval': { type: 'string', default: '250' },
    'no-docs': { type: 'boolean', default: false },
    workers: { type: 'string' },
    'wait-quiet': { type: 'string', default: '0' },
    tsx: { type: 'boolean', default: false },
    /** the default now; kept so older command lines still work */
    compiled: { type: 'boolean', default: false },
  },
});
const seconds = Number(a.seconds);
const rounds = Math.max(1, Number(a.rounds));
const rounds64 = Math.max(1, Number(a['rounds-64']));
const warm = Number(a.warm);
const warmStart = Number(a['warm-start']);
const longSeconds = Number(a['long-seconds']);
const root = join(import.meta.dirname, '..');
const results = join(root, 'bench', 'results');
const started = performance.now();
const elapsed = (): string => `${((performance.now() - started) / 1000).toFixed(0).padStart(3)}s`;
const say = (s: string): void => void process.stderr.write(`[${elapsed()}] ${s}\n`);

function machine(): string[] {
  const info = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const model = /^model name\s*:\s*(.+)$/m.exec(info)?.[1] ?? cpus()[0]?.model ?? 'unknown CPU';
  return [`${cpus().length} cores (nproc)`, model.trim(), `${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM`, `Linux ${release()}`, `Node.js ${process.version}`];
}

/** What is wrong with `who`'s answer to `sc` (not 200, or a stream without its last token or end event); undefined if nothing; the body. */
async function answer(base: string, sc: Scenario, who: string): Promise<{ problem: string | undefined; text: string }> {
  const r = await fetch(`${base}${sc.path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: sc.body });
  const text = await r.text();
  if (r.status !== 200) return { problem: `${who}: ${sc.id} answered ${r.status}: ${text.slice(0, 300)}`, text };
  const { end } = streamFraming(sc.path);
  const last = `tok${String(STREAM_CHUNKS - 1).padStart(2, '0')}`;
  if (sc.stream && (!text.includes(end) || !text.includes(last))) return { problem: `${who}: ${sc.id} stream lacks ${last} or ${end}: …${text.slice(-300)}`, text };
  return { problem: undefined, text };
}

async function check(base: string, sc: Scenario, who: string): Promise<string> {
  const { problem, text } = await answer(base, sc, who);
  if (problem) throw new Error(problem);
  return text;
}

async function cacheWorks(sw: Proc, sc: Scenario): Promise<boolean> {
  await check(sw.url, sc, 'switchyard+cache');
  const r = await fetch(`${sw.url}${sc.path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: sc.body });
  await r.arrayBuffer();
  return r.headers.get('x-switchyard-cache') === 'hit';
}

interface Acc {
  /** the round with the most RPS */
  best?: LoadResult;
  /** the proxy's CPU µs per response and its share of its core, in its cheapest round */
  cpuUs?: number;
  busyPct?: number;
  peakKb: number;
  series: number[];
}

/** One measured round of one (scenario, target); CPU time and memory of the proxy accumulate in `acc`. */
async function round(target: TargetName, base: string, proc: Proc | undefined, sc: Scenario, acc: Acc, warmSecs: number, secs = seconds): Promise<void> {
  if (warmSecs > 0) await load(base, { path: sc.path, body: sc.body, connections: sc.connections, seconds: warmSecs }, 0);
  const rss = proc ? sampleRss(proc.pid) : undefined;
  const cpu0 = proc ? cpuMs(proc.pid) : 0;
  const t0 = performance.now();
  const r = await load(base, { path: sc.path, body: sc.body, connections: sc.connections, seconds: secs }, 0);
  const wall = performance.now() - t0;
  const m = rss?.stop();
  if (proc && r.responses > 0) {
    // the cheapest round, as RPS keeps the fastest: other load and a cold JIT only ever add
    const used = cpuMs(proc.pid) - cpu0;
    const us = (used * 1000) / r.responses;
    if (acc.cpuUs === undefined || us < acc.cpuUs) {
      acc.cpuUs = us;
      acc.busyPct = (100 * used) / wall;
    }
  }
  if (m) {
    acc.peakKb = Math.max(acc.peakKb, m.peakKb);
    acc.series.push(...m.series);
  }
  if (!acc.best || r.rps > acc.best.rps) acc.best = r;
  say(`${sc.label.padEnd(30)} ${target.padEnd(16)} ${Math.round(r.rps).toString().padStart(6)} RPS  p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms  errors ${r.errors}${m ? `  peak RSS ${(m.peakKb / 1024).toFixed(0)} MB` : ''}`);
}

function toRow(sc: Scenario, target: TargetName, acc: Acc, proxied: boolean): Row {
  if (!acc.best) throw new Error(`no result for ${sc.id} ${target}`);
  return {
    scenario: sc,
    target,
    load: acc.best,
    peakRssKb: proxied ? acc.peakKb : undefined,
    cpuUsPerReq: proxied ? acc.cpuUs : undefined,
    busyPct: proxied ? acc.busyPct : undefined,
  };
}

const newAcc = (): Acc => ({ peakKb: 0, series: [] });

type Target = [TargetName, string, Proc | undefined];

/**
 * Rounds of `sc` on each of `targets`, interleaved; a row per target (its best round). The proxies
 * get `proxyRounds` each when given, else `rounds`, or `rounds64` in the 64-connection scenarios, where the
 * throughput targets judge the proxies' ratio and one machine hiccup in either proxy's rounds
 * moves it by ±10%. At 64 connections no proxy (direct) gets one round: its rate is a reference
 * no target judges (at one connection its p50 is what "added latency" subtracts, so it keeps
 * `rounds`).
 */
async function interleaved(sc: Scenario, targets: Target[], proxyRounds?: number): Promise<Row[]> {
  const accs = targets.map(newAcc);
  const many = sc.connections > 1;
  const perProxy = proxyRounds ?? (many ? rounds64 : rounds);
  const count = ([t]: Target): number => (t !== 'direct' ? perProxy : many ? 1 : rounds);
  const most = Math.max(...targets.map(count));
  for (let i = 0; i < most; i++) {
    for (const [k, target] of targets.entries()) {
      const [t, base, p] = target;
      if (i < count(target)) await round(t, base, p, sc, accs[k] as Acc, i === 0 ? warm : 0);
    }
  }
  return targets.map(([t, , p], k) => toRow(sc, t, accs[k] as Acc, p !== undefined));
}


async function main(): Promise<void> {
  const pin = planPinning();
  pinSelf(pin);
  mkdirSync(results, { recursive: true });
  say(pin.note);
  const waitUntil = performance.now() + Number(a['wait-quiet']) * 1000;
  for (;;) {
    const bg = await machineLoad(1000);
    if (bg < 0.3 || performance.now() >= waitUntil) {
      say(`other load on the machine before start: ${bg.toFixed(2)} cores${bg >= 0.3 ? ' (measurements will be noisy)' : ''}`);
      break;
    }
    say(`waiting for a quiet machine: ${bg.toFixed(2)} cores busy`);
  }
  const procs: Proc[] = [];
  const core = (c: string): string | undefined => (pin.enabled ? c : undefined);
  const compiled = !a.tsx || a.profile || a.perf || a.path || a.ab !== undefined || a.tracing || a['shared-health'] || a.coalesce || a['onnx-memory'];
  if (compiled) say('compiling src/ and bench/ with tsc…');
  const cmd = compiled ? compiledCommands(root) : tsxCommands(root);
  say(`processes run from ${cmd.note}`);
  try {
    const mock = await startProc({ name: 'mock upstream', args: cmd.mock, core: core(pin.loadCore) });
    procs.push(mock);
    if (a.perf) {
      const md = await perfScenarios(a.only?.split(',') ?? ['stream-c64'], { results, mock, pin, seconds: Math.max(5, seconds), commands: cmd });
      process.stdout.write(`${md}\n`);
      return;
    }
    if (a.path) {
      const rev = a['path-against'];
      if (rev !== undefined) say(`compiling ${rev}'s src/ with tsc…`);
      const against = rev === undefined ? undefined : { name: `switchyard@${rev}`, gateway: revisionGateway(root, rev) };
      const md = await pathScenario({ root, results, mock, pin, commands: cmd, rounds: Math.max(1, Number(a['path-rounds'])), seconds: 1.5, against });
      process.stdout.write(`${md}\n`);
      return;
    }
    if (a.ab !== undefined) {
      say(`compiling ${a.ab}'s src/ with tsc…`);
      const other = { name: a.ab, gateway: revisionGateway(root, a.ab) };
      const ids = a.only?.split(',') ?? ['chat-c64', 'stream-c64'];
      const md = await abScenario({ results, mock, pin, commands: cmd, other, ids, starts: Math.max(1, Number(a['ab-starts'])), rounds: Math.max(1, Number(a['ab-rounds'])), say });
      process.stdout.write(`${md}\n`);
      return;
    }
    if (a.tracing) {
      const ids = a.only?.split(',') ?? ['chat-c64', 'stream-c64'];
      const md = await tracingScenario({ results, mock, pin, commands: cmd, ids, starts: Math.max(1, Number(a['ab-starts'])), rounds: Math.max(1, Number(a['ab-rounds'])), say });
      process.stdout.write(`${md}\n`);
      return;
    }
    if (a['shared-health']) {
      const md = await sharedHealthScenario({ results, mock, pin, commands: cmd, starts: Math.max(1, Number(a['ab-starts'])), rounds: Math.max(1, Number(a['ab-rounds'])), say });
      process.stdout.write(`${md}\n`);
      return;
    }
    if (a.coalesce) {
      const rev = a['coalesce-against'];
      if (rev !== undefined) say(`compiling ${rev}'s src/ with tsc…`);
      const against = rev === undefined ? undefined : { name: rev, gateway: revisionGateway(root, rev) };
      const md = await coalesceScenario({ results, mock, pin, commands: cmd, starts: Math.max(1, Number(a['ab-starts'])), rounds: Math.max(1, Number(a['ab-rounds'])), against, say });
      process.stdout.write(`${md}\n`);
      return;
    }
    if (a['onnx-memory']) {
      const md = await onnxMemoryScenario({ root, mock, commands: cmd, requests: Math.max(1, Number(a['onnx-requests'])), say });
      process.stdout.write(`${md}\n`);
      return;
    }
    if (a.workers !== undefined) {
      const md = await workersScenario({ results, mock, commands: cmd, max: Math.max(1, Number(a.workers)), seconds: Math.max(2, seconds), say });
      process.stdout.write(`${md}\n`);
      return;
    }
    if (a.profile) {
      const ids = a.only?.split(',') ?? ['chat-c64'];
      const md = await profileScenarios(ids, { results, mock, pin, seconds: Math.max(5, seconds), intervalUs: Number(a['profile-interval']), commands: cmd });
      process.stdout.write(`${md}\n`);
      return;
    }
    const gatewayProc = async (cache: boolean): Promise<Proc> => {
      const yamlPath = join(results, cache ? 'switchyard-cache.yaml' : 'switchyard.yaml');
      return startSwitchyard({ name: cache ? 'switchyard+cache' : 'switchyard', args: cmd.gateway, yamlPath, mockPort: mock.port, cache, core: core(pin.proxyCore), env: cmd.proxyEnv });
    };
    // started side by side: start-up is most of the fixed cost of a run
    const booted = await Promise.allSettled([startProc({ name: 'floor proxy', args: [...cmd.floor, mock.url], core: core(pin.proxyCore), env: cmd.proxyEnv }), gatewayProc(false), gatewayProc(true)]);
    for (const s of booted) if (s.status === 'fulfilled') procs.push(s.value);
    for (const s of booted) if (s.status === 'rejected') throw s.reason;
    const [floor, sw, swCache] = procs.slice(1) as [Proc, Proc, Proc];
    const targets: Target[] = [
      ['direct', mock.url, undefined],
      ['floor', floor.url, floor],
      ['switchyard', sw.url, sw],
    ];
    const only = a.only?.split(',');
    const unknown = only?.filter((id) => !SCENARIOS.some((s) => s.id === id) && !CACHE_SCENARIOS.some((s) => s.id === id));
    if (unknown?.length) throw new Error(`unknown scenario ${unknown.join(', ')} (known: ${SCENARIOS.map((s) => s.id).join(', ')})`);
    const selected = SCENARIOS.filter((s) => !only || only.includes(s.id));
    // Report lines about the native scenarios: which were skipped and why, and which passed bytes.
    const notes: string[] = [];
    let native: Proc | undefined;
    let nativeResponses = false;
    if (selected.some((s) => s.native)) {
      const why = (err: unknown): string => (err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ').replace(/ \(known: .*/, '').slice(0, 300);
      const start = (mode: true | 'no-responses'): Promise<Proc> =>
        startSwitchyard({ name: 'switchyard (native)', args: cmd.gateway, yamlPath: join(results, 'switchyard-native.yaml'), mockPort: mock.port, native: mode, core: core(pin.proxyCore), env: cmd.proxyEnv });
      try {
        native = await start(true);
        nativeResponses = true;
      } catch (err) {
        notes.push(`the gateway refused an \`openai\` backend with \`responses: true\`: ${why(err)}`);
        try {
          native = await start('no-responses');
        } catch (err2) {
          notes.push(`the native gateway (an \`anthropic\` backend at the mock) did not start: ${why(err2)}`);
        }
      }
      if (native) procs.push(native);
    }
    const gatewayFor = (sc: Scenario): Proc | undefined => (sc.native ? native : sw);
    const targetsFor = (sc: Scenario): Target[] => {
      const g = gatewayFor(sc) as Proc;
      return [...targets.slice(0, 2), ['switchyard', g.url, g]];
    };
    const scenarios: Scenario[] = [];
    for (const sc of selected) {
      const direct = await check(mock.url, sc, 'direct');
      await check(floor.url, sc, 'floor');
      const g = gatewayFor(sc);
      if (!g || (sc.native && sc.path === '/v1/responses' && !nativeResponses)) {
        notes.push(`${sc.id}: not measured (${g ? 'no backend with `responses: true`' : 'no native gateway'})`);
        continue;
      }
      const r = await answer(g.url, sc, 'switchyard');
      if (r.problem && !sc.native) throw new Error(r.problem);
      if (r.problem) {
        notes.push(`${sc.id}: not measured, ${r.problem.replace(/\s+/g, ' ')}`);
        continue;
      }
      if (sc.native) notes.push(`${sc.id}: the gateway's answer ${r.text === direct ? 'is byte for byte the upstream\'s (passed through)' : 'is not the upstream\'s bytes (translated, or re-serialized)'}`);
      scenarios.push(sc);
    }
    for (const n of notes) say(`note: ${n}`);
    const cacheOk = await cacheWorks(swCache, CACHE_SCENARIOS[0] as Scenario);
    say(`all targets answer; cache ${cacheOk ? 'serves hits' : 'does not serve hits'}`);
    // Steady state: every proxy gets the same JIT warm-up before anything is measured (64-conn chat
    // and stream, `--warm-start` s each), so the first scenario does not measure code still being
    // compiled; the gateway has far more of it than the floor.
    if (warmStart > 0) {
      say(`warming every proxy up for ${warmStart} s of 64-conn chat and of 64-conn stream…`);
      const warmers = SCENARIOS.filter((sc) => sc.id === 'chat-c64' || sc.id === 'stream-c64');
      for (const base of [floor.url, sw.url, swCache.url, ...(native ? [native.url] : [])]) {
        for (const sc of warmers) await load(base, { path: sc.path, body: sc.body, connections: sc.connections, seconds: warmStart }, 0);
      }
    }

    const ourPids = [process.pid, ...procs.map((p) => p.pid)];
    const ourCpu = (): number => ourPids.reduce((sum, pid) => sum + cpuMs(pid), 0);
    const busy0 = machineBusyMs();
    const ours0 = ourCpu();
    const wall0 = performance.now();

    const rows: Row[] = [];
    for (const sc of scenarios) rows.push(...(await interleaved(sc, targetsFor(sc))));
    let cacheNote: string | undefined = 'n/a (cache not implemented)';
    if (cacheOk) {
      cacheNote = undefined;
      // the floor passes the same body through in rounds interleaved with the hits: compared with
      // its rows of the chat scenario, measured a minute or two earlier, the check would compare two
      // moments of a machine whose one-connection round trips move by 2× within minutes
      const pair: Target[] = [['floor', floor.url, floor], ['switchyard+cache', swCache.url, swCache]];
      for (const sc of CACHE_SCENARIOS.filter((s) => !only || only.includes(s.floorOf))) {
        // (`rounds` also at 64 connections: the time of a run; the hits' margin is wider)
        for (const row of await interleaved(sc, pair, rounds)) rows.push({ ...row, floorOf: sc.floorOf });
      }
    }

    const probes: ProbeRow[] = [];
    // [id, label, body, seconds per round, rounds]: one-connection latencies move by tenths of a
    // millisecond with the machine (its idle vCPUs halt and are woken through the hypervisor), so
    // each probe runs in interleaved rounds and each target keeps the median of its rounds (a paced
    // stream takes ~125 ms: 1.5 s is a dozen of them)
    // [id, label, path, body, seconds per round, rounds, targets]; the Responses and Messages probes
    // run beside their one-connection stream scenario, on the gateway that scenario uses
    const probeSpecs: Array<[ProbeRow['id'], string, string, string, number, number, Target[]]> = [
      ['ttfb-zero', 'stream, zero-latency', '/v1/chat/completions', streamBody, 1, 3, targets],
      ['ttfb-paced', 'stream, paced 5 ms/chunk', '/v1/chat/completions', pacedBody, 1.5, 3, targets],
    ];
    for (const [id, label, scId] of PROTOCOL_PROBES) {
      const sc = scenarios.find((s) => s.id === scId);
      if (sc) probeSpecs.push([id, `${label}, zero-latency`, sc.path, sc.body, 1, 3, targetsFor(sc)]);
    }
    for (const [id, label, path, body, secs, probeRounds, probeTargets] of probeSpecs) {
      for (const [, base] of probeTargets) await probeStream(base, path, body, 0.2, 3);
      const byTarget = new Map<TargetName, ProbeResult[]>();
      for (let r = 0; r < probeRounds; r++) {
        for (const [t, base] of r % 2 ? [...probeTargets].reverse() : probeTargets) {
          const one = await probeStream(base, path, body, secs, 10);
          byTarget.set(t, [...(byTarget.get(t) ?? []), one]);
        }
      }
      for (const [t] of probeTargets) {
        const result = combineProbes(byTarget.get(t) ?? []);
        probes.push({ id, label, target: t, result });
        say(`probe ${label.padEnd(24)} ${t.padEnd(11)} TTFB ${result.ttfb50.toFixed(2)} ms  TTFT ${result.ttft50.toFixed(2)} ms  end ${result.total50.toFixed(2)} ms  n ${result.count}`);
      }
    }

    const backgroundCores = busy0 > 0 ? Math.max(0, machineBusyMs() - busy0 - (ourCpu() - ours0)) / (performance.now() - wall0) : undefined;

    let long: LongRow[] | undefined;
    if (a.long) {
      long = [];
      const chat = SCENARIOS.find((s) => s.id === 'chat-c64') as Scenario;
      for (const [t, base, p] of targets.slice(1)) {
        for (const secs of [longSeconds, longSeconds * 10]) {
          const acc = newAcc();
          await round(t, base, p, chat, acc, warm, secs);
          const tenth = Math.max(1, Math.floor(acc.series.length / 10));
          long.push({
            target: t,
            seconds: secs,
            peakKb: acc.peakKb,
            medianKb: median(acc.series),
            firstKb: median(acc.series.slice(0, tenth)),
            secondKb: median(acc.series.slice(tenth, 2 * tenth)),
            lastKb: median(acc.series.slice(-tenth)),
            rps: acc.best?.rps ?? 0,
            // the sampler takes one value every 100 ms
            rssMbPerSecond: acc.series.filter((_, i) => i % 10 === 0).map((kb) => Math.round(kb / 1024)),
          });
        }
      }
    }

    const report: Report = {
      date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      machine: machine(),
      command: ['npm run bench', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' '),
      pinning: `${pin.note}; ${cmd.note}`,
      seconds,
      rounds,
      rounds64,
      warmStart,
      backgroundCores,
      elapsedSec: (performance.now() - started) / 1000,
      rows,
      probes,
      cacheNote,
      notes,
      long,
    };
    const md = render(report);
    process.stdout.write(`\n${md}\n`);
    writeFileSync(join(results, 'latest.md'), `${md}\n`);
    writeFileSync(join(results, 'latest.json'), `${JSON.stringify(report, null, 2)}\n`);
    const docs = join(root, 'docs', 'performance.md');
    let copied = false;
    if (!a['no-docs'] && existsSync(docs)) {
      const text = readFileSync(docs, 'utf8');
      const m = /(<!-- bench:begin[^>]*-->)[\s\S]*?(<!-- bench:end -->)/.exec(text);
      if (m) {
        writeFileSync(docs, text.replace(m[0], () => `${m[1]}\n${md}\n${m[2]}`));
        copied = true;
      }
    }
    say(`saved bench/results/latest.md${copied ? ' and the table in docs/performance.md' : ''}`);
  } finally {
    await Promise.all(procs.reverse().map((p) => stopProc(p)));
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
