/**
 * `npm run bench -- --perf [--only stream-c64,chat-c64]`: Switchyard and the floor under Linux
 * `perf` (sampling every thread, native frames and the kernel included; JavaScript frames named
 * through `node --perf-basic-prof`), one scenario and one target at a time, and each main-thread
 * sample charged to its innermost JavaScript function, with the builtins, runtime calls, C++ and
 * system calls below it. Per scenario it writes bench/results/perf-<id>.md: µs of the main thread
 * per response, by file and by function, for both targets side by side.
 *
 * Why next to `--profile`: V8's own profiler samples only JavaScript and under-samples deep async
 * paths (in one pair it put a path at 2.3× another where the CPU counters said 1.3×); perf sees
 * where native time goes (JSON.parse, regular expressions, slow property paths, system calls) and
 * whose code asked for it. Needs `perf` (linux-perf) and permission to attach (root, or
 * kernel.perf_event_paranoid ≤ 1).
 */
import { spawn, spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Commands } from './build.ts';
import { load } from './measure.ts';
import { startProc, stopProc, type Pinning, type Proc } from './procs.ts';
import { SCENARIOS, startSwitchyard } from './scenarios.ts';

const HZ = 2999;

interface Sample {
  tid: string;
  /** leaf first */
  frames: string[];
}

/** `perf script -F tid,ip,sym` output → samples. */
export function parsePerfScript(text: string): Sample[] {
  const out: Sample[] = [];
  let cur: Sample | undefined;
  for (const line of text.split('\n')) {
    if (line.trim() === '') {
      if (cur) out.push(cur);
      cur = undefined;
    } else if (/^\s*\d+\s*$/.test(line)) {
      cur = { tid: line.trim(), frames: [] };
    } else if (cur) {
      const m = /^\s*[0-9a-f]+ (.*)$/.exec(line);
      if (m) cur.frames.push(m[1] as string);
    }
  }
  if (cur) out.push(cur);
  return out;
}

/** A frame's short name: `JS:*fn file:///…/src/x.js:1:2` → `fn src/x.js:1`. */
function shortName(frame: string): string {
  return frame
    .replace(/^JS:[*~^]?/, '')
    .replace(/file:\/\/\/?[^ ]*?\/((?:src|bench)\/)/, '$1')
    .replace(/\/[^ ]*?\/node_modules\//, '')
    .replace(/:(\d+):\d+$/, ':$1');
}

/** Where a sample's time is charged: its innermost JavaScript frame, else a native bucket. */
function charge(s: Sample): { fn: string; file: string } {
  const js = s.frames.find((f) => f.startsWith('JS:'));
  if (js) {
    const name = shortName(js);
    const fn = name.startsWith(' ') ? `(anonymous)${name}` : name || '(anonymous)';
    const file = /((?:src|bench)\/[^:]+|node:[^:]+|[@\w.-]+(?:\/[\w.-]+)?\/(?:lib|dist)\/[^:]+|wasm)/.exec(fn)?.[1] ?? fn;
    return { fn, file };
  }
  if (s.frames.some((f) => /Scaveng|MarkCompact|Heap::|GC/.test(f))) return { fn: '(garbage collector)', file: '(garbage collector)' };
  if (s.frames.some((f) => /epoll_wait|uv__io_poll/.test(f))) return { fn: '(event loop: epoll)', file: '(event loop: epoll)' };
  return { fn: '(native, no JS caller)', file: '(native, no JS caller)' };
}

export interface PerfSummary {
  responses: number;
  /** µs of CPU per response, main thread / all threads */
  mainUs: number;
  allUs: number;
  byFile: Map<string, number>;
  byFn: Map<string, number>;
  /** native work wherever it was called from, µs per response */
  natives: Map<string, number>;
}

const NATIVES: Array<[string, RegExp]> = [
  ['system calls', /entry_SYSCALL|do_syscall_64/],
  ['garbage collection', /Scaveng|MarkCompact|Heap::/],
  ['JSON.parse', /JsonParser|Builtin_JsonParse/],
  ['JSON.stringify', /JsonStringif/],
  ['regular expressions', /^RegExp:|RegExpPrototype|RegExpExec/],
  ['runtime calls (slow paths)', /^v8::internal::Runtime_(?!.*(?:Json|RegExp))/],
];

export function summarize(samples: Sample[], responses: number): PerfSummary {
  const perThread = new Map<string, number>();
  for (const s of samples) perThread.set(s.tid, (perThread.get(s.tid) ?? 0) + 1);
  const mainTid = [...perThread].sort((a, b) => b[1] - a[1])[0]?.[0];
  const us = (n: number): number => (n * 1e6) / HZ / Math.max(1, responses);
  const byFile = new Map<string, number>();
  const byFn = new Map<string, number>();
  const natives = new Map<string, number>();
  let main = 0;
  for (const s of samples) {
    for (const [name, re] of NATIVES) if (s.frames.some((f) => re.test(f))) natives.set(name, (natives.get(name) ?? 0) + 1);
    if (s.tid !== mainTid) continue;
    main++;
    const c = charge(s);
    byFile.set(c.file, (byFile.get(c.file) ?? 0) + 1);
    byFn.set(c.fn, (byFn.get(c.fn) ?? 0) + 1);
  }
  const scale = (m: Map<string, number>): Map<string, number> => new Map([...m].map(([k, v]) => [k, us(v)]));
  return { responses, mainUs: us(main), allUs: us(samples.length), byFile: scale(byFile), byFn: scale(byFn), natives: scale(natives) };
}

function table(title: string, a: Map<string, number>, b: Map<string, number>, rows: number): string {
  const keys = [...new Set([...a.keys(), ...b.keys()])].sort((x, y) => (b.get(y) ?? 0) + (a.get(y) ?? 0) - ((b.get(x) ?? 0) + (a.get(x) ?? 0)));
  const f = (v: number | undefined): string => (v === undefined ? '—' : v.toFixed(1));
  return [`| ${title} | Switchyard µs/resp | floor µs/resp |`, '|---|--:|--:|', ...keys.slice(0, rows).map((k) => `| \`${k.replaceAll('|', '\\|')}\` | ${f(a.get(k))} | ${f(b.get(k))} |`)].join('\n');
}

async function record(proc: Proc, path: string, body: string, connections: number, seconds: number): Promise<{ samples: Sample[]; responses: number; rps: number }> {
  await load(proc.url, { path, body, connections, seconds: 2 }, 0);
  const data = join('/tmp', `switchyard-perf-${proc.pid}.data`);
  const perf = spawn('perf', ['record', '-F', String(HZ), '-g', '-p', String(proc.pid), '-o', data, '--', 'sleep', String(seconds)], { stdio: 'ignore' });
  const exited = new Promise<number | null>((ok) => perf.on('exit', ok));
  // the load outlasts the recording a little, so every recorded sample is under load
  const r = await load(proc.url, { path, body, connections, seconds: seconds + 0.5 }, 0);
  if ((await exited) !== 0) throw new Error('perf record failed (is perf installed, and may it attach to a process?)');
  const script = spawnSync('perf', ['script', '-i', data, '-F', 'tid,ip,sym'], { encoding: 'utf8', maxBuffer: 1 << 30 });
  rmSync(data, { force: true });
  // responses within the recording: the load's rate over the recorded seconds
  return { samples: parsePerfScript(script.stdout), responses: Math.round(r.rps * seconds), rps: r.rps };
}

export async function perfScenarios(ids: string[], opts: { results: string; mock: Proc; pin: Pinning; seconds: number; commands: Commands }): Promise<string> {
  const out: string[] = [];
  for (const id of ids) {
    const sc = SCENARIOS.find((s) => s.id === id);
    if (!sc) throw new Error(`unknown scenario "${id}" (known: ${SCENARIOS.map((s) => s.id).join(', ')})`);
    const got: Record<string, { s: PerfSummary; rps: number }> = {};
    for (const target of ['switchyard', 'floor'] as const) {
      const core = opts.pin.enabled ? opts.pin.proxyCore : undefined;
      const name = `${target} (perf)`;
      const proc =
        target === 'floor'
          ? await startProc({ name, args: ['--perf-basic-prof', ...opts.commands.floor, opts.mock.url], core, env: opts.commands.proxyEnv })
          : await startSwitchyard({ name, args: ['--perf-basic-prof', ...opts.commands.gateway], yamlPath: join(opts.results, 'switchyard-perf.yaml'), mockPort: opts.mock.port, native: sc.native === true, core, env: opts.commands.proxyEnv });
      process.stderr.write(`perf: ${target}, ${sc.label}, ${opts.seconds} s…\n`);
      try {
        const r = await record(proc, sc.path, sc.body, sc.connections, opts.seconds);
        got[target] = { s: summarize(r.samples, r.responses), rps: r.rps };
      } finally {
        await stopProc(proc, 'SIGTERM');
        rmSync(`/tmp/perf-${proc.pid}.map`, { force: true });
      }
    }
    const a = got.switchyard as { s: PerfSummary; rps: number };
    const b = got.floor as { s: PerfSummary; rps: number };
    const md = [
      `### perf: ${sc.label}`,
      '',
      `Switchyard ${Math.round(a.rps).toLocaleString('en-US')} RPS, floor ${Math.round(b.rps).toLocaleString('en-US')} RPS under perf (${HZ} Hz, call graphs). CPU per response: main thread ${a.s.mainUs.toFixed(0)} vs ${b.s.mainUs.toFixed(0)} µs, all threads ${a.s.allUs.toFixed(0)} vs ${b.s.allUs.toFixed(0)} µs. Each main-thread sample is charged to its innermost JavaScript function (builtins, runtime calls, C++ and system calls below it go with it); "native work" counts a sample wherever it was called from, all threads.`,
      '',
      table('native work', a.s.natives, b.s.natives, 10),
      '',
      table('by file', a.s.byFile, b.s.byFile, 30),
      '',
      table('by function', a.s.byFn, b.s.byFn, 40),
    ].join('\n');
    writeFileSync(join(opts.results, `perf-${id}.md`), `${md}\n`);
    out.push(md);
  }
  return out.join('\n\n');
}
