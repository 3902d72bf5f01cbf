/**
 * Aggregates a V8 CPU profile (`node --cpu-prof`) into markdown tables: self time by function,
 * self and inclusive time by package (node_modules package, Node.js internal module, Switchyard
 * source folder, GC, native builtins), and inclusive time by function. Optionally writes folded
 * stacks for a flame graph (flamegraph.pl, speedscope, inferno). The .cpuprofile itself also
 * opens in Chrome DevTools or https://www.speedscope.app.
 *
 *   node --import tsx bench/profile-summary.ts <file.cpuprofile> [--top 25] [--folded out.folded] [--find 'regex']
 *
 * `--find` lists the inclusive time of every frame whose "function file:line" matches the regex.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Which "package" a frame belongs to. */
export function packageOf(f: CallFrame): string {
  const { url, functionName } = f;
  if (url === '') {
    if (functionName.startsWith('(')) return functionName; // (garbage collector), (program), (idle), (root)
    return '(native builtins)';
  }
  if (url.startsWith('wasm://')) return 'undici (llhttp wasm)';
  if (url.startsWith('node:')) {
    const rest = url.slice(5);
    if (rest.startsWith('internal/deps/')) return `node:${rest.split('/').slice(0, 3).join('/')}`;
    if (rest.startsWith('internal/')) return `node:${rest.split('/').slice(0, 2).join('/')}`;
    return `node:${rest}`;
  }
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = url.slice(nm + 14).split('/');
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1] ?? ''}` : (parts[0] ?? url);
  }
  const src = /\/(src|bench|test|dist)\/(.+)$/.exec(url);
  if (src) {
    const dir = src[2]?.includes('/') ? src[2].split('/')[0] : (src[2] ?? '').replace(/\.[jt]s$/, '');
    return `${src[1] === 'dist' ? 'src' : src[1]}/${dir}`;
  }
  return url;
}

function frameName(f: CallFrame): string {
  const file = f.url === '' ? '' : ` ${f.url.replace(/^file:\/\/.*?\/(node_modules|src|bench|dist)\//, '$1/')}:${f.lineNumber + 1}`;
  return `${f.functionName || '(anonymous)'}${file}`;
}

interface Tally {
  self: Map<string, number>;
  total: Map<string, number>;
}

const add = (m: Map<string, number>, k: string, v: number): void => void m.set(k, (m.get(k) ?? 0) + v);

/** Sample timestamps are CLOCK_MONOTONIC µs, the clock of `process.hrtime` in any process on the machine. */
export interface Window {
  fromUs: number;
  toUs: number;
}

export function aggregate(p: CpuProfile, window?: Window): { fn: Tally; pkg: Tally; totalUs: number; idleUs: number; stacks: Map<string, number> } {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of p.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const fn: Tally = { self: new Map(), total: new Map() };
  const pkg: Tally = { self: new Map(), total: new Map() };
  const stacks = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (window && (t < window.fromUs || t > window.toUs)) continue;
    const id = p.samples[i];
    const dt = p.timeDeltas[i + 1] ?? p.timeDeltas[i] ?? 0;
    const leaf = id === undefined ? undefined : byId.get(id);
    if (!leaf) continue;
    totalUs += dt;
    if (leaf.callFrame.functionName === '(idle)') idleUs += dt;
    add(fn.self, frameName(leaf.callFrame), dt);
    add(pkg.self, packageOf(leaf.callFrame), dt);
    const seenFn = new Set<string>();
    const seenPkg = new Set<string>();
    const path: string[] = [];
    for (let n: ProfileNode | undefined = leaf; n; n = byId.get(parent.get(n.id) ?? -1)) {
      if (n.callFrame.functionName === '(root)') break;
      const name = frameName(n.callFrame);
      const pk = packageOf(n.callFrame);
      path.push(`${n.callFrame.functionName || '(anonymous)'} [${pk}]`.replaceAll(';', ','));
      if (!seenFn.has(name)) {
        seenFn.add(name);
        add(fn.total, name, dt);
      }
      if (!seenPkg.has(pk)) {
        seenPkg.add(pk);
        add(pkg.total, pk, dt);
      }
    }
    add(stacks, path.reverse().join(';'), 1);
  }
  return { fn, pkg, totalUs, idleUs, stacks };
}

function top(m: Map<string, number>, n: number): Array<[string, number]> {
  return [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n);
}

/** Markdown: shares are of busy (non-idle) time. */
export function summarize(p: CpuProfile, n = 25, window?: Window): string {
  const a = aggregate(p, window);
  const busy = a.totalUs - a.idleUs;
  const pct = (v: number): string => `${((100 * v) / busy).toFixed(1)}%`;
  const ms = (v: number): string => (v / 1000).toFixed(0);
  const pkgRows = [...new Set([...a.pkg.self.keys(), ...a.pkg.total.keys()])]
    .filter((k) => k !== '(idle)' && k !== '(root)')
    .map((k): [string, number, number] => [k, a.pkg.self.get(k) ?? 0, a.pkg.total.get(k) ?? 0])
    .sort((x, y) => y[1] - x[1])
    .slice(0, n);
  return [
    `Profile: ${ms(a.totalUs)} ms sampled${window ? ' (the load window only)' : ''}, ${ms(busy)} ms busy (${((100 * busy) / Math.max(1, a.totalUs)).toFixed(0)}%).`,
    '',
    '**By package** (self = time in the package\'s own code; inclusive = time with the package anywhere on the stack)',
    '',
    '| package | self | self ms | inclusive |',
    '|---|--:|--:|--:|',
    ...pkgRows.map(([k, s, t]) => `| ${k} | ${pct(s)} | ${ms(s)} | ${pct(t)} |`),
    '',
    '**By function, self time**',
    '',
    '| function | self | ms |',
    '|---|--:|--:|',
    ...top(a.fn.self, n)
      .filter(([k]) => !k.startsWith('(idle)'))
      .map(([k, v]) => `| \`${k}\` | ${pct(v)} | ${ms(v)} |`),
    '',
    '**By function, inclusive time** (Switchyard and dependency code only)',
    '',
    '| function | inclusive |',
    '|---|--:|',
    ...top(new Map([...a.fn.total].filter(([k]) => / (src|dist|node_modules)\//.test(k))), n).map(([k, v]) => `| \`${k}\` | ${pct(v)} |`),
  ].join('\n');
}

/** Inclusive share of busy time of the frames whose name matches `re`, largest first. */
export function find(p: CpuProfile, re: RegExp, window?: Window): Array<[string, number]> {
  const a = aggregate(p, window);
  const busy = a.totalUs - a.idleUs;
  return top(new Map([...a.fn.total].filter(([k]) => re.test(k))), 1000).map(([k, v]) => [k, (100 * v) / busy]);
}

export function writeFolded(p: CpuProfile, file: string, window?: Window): void {
  const { stacks } = aggregate(p, window);
  writeFileSync(file, [...stacks].map(([s, c]) => `${s} ${c}`).join('\n') + '\n');
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '25' }, folded: { type: 'string' }, find: { type: 'string' } } });
  const file = positionals[0];
  if (!file) {
    process.stderr.write('usage: profile-summary.ts <file.cpuprofile> [--top 25] [--folded out.folded]\n');
    process.exit(2);
  }
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  // bench/profile.ts leaves the load window beside the profile: start-up stays out of the numbers
  const wf = file.replace(/\.cpuprofile$/, '.window.json');
  const window = wf !== file && existsSync(wf) ? (JSON.parse(readFileSync(wf, 'utf8')) as Window) : undefined;
  if (values.find) {
    for (const [k, v] of find(p, new RegExp(values.find), window)) process.stdout.write(`${v.toFixed(2).padStart(6)}%  ${k}\n`);
    process.exit(0);
  }
  process.stdout.write(`${summarize(p, Number(values.top), window)}\n`);
  if (values.folded) writeFolded(p, values.folded, window);
}
