/**
 * The benchmark's processes: spawning them pinned to a core (`taskset -c`) when taskset exists,
 * learning their port, waiting until they answer, sampling their memory, stopping them.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Pinning {
  /** false: no taskset or a single core; every process shares the machine */
  enabled: boolean;
  /** the mock upstream and the load generator (this process) */
  loadCore: string;
  /** the proxy under test */
  proxyCore: string;
  note: string;
}

export function planPinning(): Pinning {
  const cores = availableParallelism();
  const has = spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!has) return { enabled: false, loadCore: '', proxyCore: '', note: `not pinned: taskset not found (${cores} cores shared by all processes)` };
  if (cores < 2) return { enabled: false, loadCore: '', proxyCore: '', note: 'not pinned: only one core' };
  // the last core for the proxy under test, the one before it for the mock and the load generator
  const proxyCore = String(cores - 1);
  const loadCore = String(cores - 2);
  return { enabled: true, loadCore, proxyCore, note: `pinned with taskset: proxy under test on core ${proxyCore}; mock upstream + load generator (autocannon, this process) on core ${loadCore}` };
}

/** Moves this process (all its threads) to `core`. */
export function pinSelf(p: Pinning): void {
  if (p.enabled) spawnSync('taskset', ['-a', '-p', '-c', p.loadCore, String(process.pid)], { stdio: 'ignore' });
}

export interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  port: number;
  url: string;
  stderr: () => string;
}

export interface SpawnOptions {
  name: string;
  args: string[];
  core?: string | undefined;
  env?: NodeJS.ProcessEnv;
  /** the child prints {"port":N} on its first stdout line (else: `port` is given) */
  port?: number;
  /** GET this path until 200 before returning */
  readyPath?: string;
  /** where the child's stdout goes once the port is known: the gateway's JSON log lines are discarded */
  quiet?: boolean;
}

export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/**
 * The glibc allocator settings (`MALLOC_*=value`) the Docker image's runtime stage sets for the
 * gateway (Dockerfile, `text` its contents). The bench runs both proxies, the floor and
 * Switchyard, with them: Switchyard as it is deployed, and the floor under the same allocator.
 */
export function imageAllocatorEnv(text: string): Record<string, string> {
  const runtime = text.slice(text.lastIndexOf('\nFROM '));
  return Object.fromEntries([...runtime.matchAll(/\b(MALLOC_[A-Z_]+)=(\S+)/g)].map((m) => [m[1] as string, m[2] as string]));
}

export async function startProc(o: SpawnOptions): Promise<Proc> {
  const cmd = o.core !== undefined ? 'taskset' : process.execPath;
  const args = o.core !== undefined ? ['-c', o.core, process.execPath, ...o.args] : o.args;
  const child = spawn(cmd, args, { stdio: ['ignore', o.quiet ? 'ignore' : 'pipe', 'pipe'], env: o.env ?? process.env });
  let err = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (d: string) => (err = (err + d).slice(-4000)));
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, sig) => reject(new Error(`${o.name} exited early (${code ?? sig}): ${err.trim().slice(-1500)}`))),
  );
  exited.catch(() => undefined);
  let port = o.port;
  if (port === undefined) {
    const out = child.stdout;
    if (!out) throw new Error(`${o.name}: no stdout`);
    out.setEncoding('utf8');
    const line = new Promise<number>((resolve) => {
      let buf = '';
      const onData = (d: string): void => {
        buf += d;
        const nl = buf.indexOf('\n');
        if (nl < 0) return;
        out.off('data', onData);
        out.resume(); // keep draining whatever else it prints
        resolve((JSON.parse(buf.slice(0, nl)) as { port: number }).port);
      };
      out.on('data', onData);
    });
    port = await Promise.race([line, exited, sleep(30_000).then(() => Promise.reject(new Error(`${o.name}: no port after 30 s`)))]);
  }
  const url = `http://127.0.0.1:${port}`;
  if (o.readyPath) await Promise.race([waitReady(`${url}${o.readyPath}`, 60_000), exited]);
  if (child.pid === undefined) throw new Error(`${o.name}: no pid`);
  return { name: o.name, child, pid: child.pid, port, url, stderr: () => err };
}

async function waitReady(url: string, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    try {
      const r = await fetch(url);
      await r.arrayBuffer();
      if (r.status === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`${url} not ready after ${ms} ms`);
}

export async function stopProc(p: Proc, signal: NodeJS.Signals = 'SIGTERM', waitMs = 15_000): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  const done = new Promise<void>((r) => p.child.once('exit', () => r()));
  p.child.kill(signal);
  const t = setTimeout(() => p.child.kill('SIGKILL'), waitMs);
  await done;
  clearTimeout(t);
}

/** kB values from /proc/<pid>/status; undefined where /proc is missing. */
export function memory(pid: number): { rssKb: number; hwmKb: number } | undefined {
  const f = `/proc/${pid}/status`;
  if (!existsSync(f)) return undefined;
  const text = readFileSync(f, 'utf8');
  const num = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { rssKb: num('VmRSS'), hwmKb: num('VmHWM') };
}

/** Samples VmRSS every `everyMs` until stopped; returns the largest value seen (kB) and the series. */
export function sampleRss(pid: number, everyMs = 100): { stop(): { peakKb: number; series: number[] } } {
  const series: number[] = [];
  const take = (): void => {
    const m = memory(pid);
    if (m) series.push(m.rssKb);
  };
  take();
  const t = setInterval(take, everyMs);
  return {
    stop() {
      clearInterval(t);
      take();
      return { peakKb: series.length ? Math.max(...series) : 0, series };
    },
  };
}

const TICK_MS = 1000 / (Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100);

/** CPU time (user + system) a process has used so far, ms; 0 when /proc is missing. */
export function cpuMs(pid: number): number {
  const f = `/proc/${pid}/stat`;
  if (!existsSync(f)) return 0;
  // fields after the ")" that ends the command name: state is field 3, utime 14, stime 15
  const rest = readFileSync(f, 'utf8').split(') ').pop()?.split(' ') ?? [];
  return ((Number(rest[11]) || 0) + (Number(rest[12]) || 0)) * TICK_MS;
}

/** Busy CPU time of the whole machine so far, ms (all cores, from /proc/stat). */
export function machineBusyMs(): number {
  if (!existsSync('/proc/stat')) return 0;
  const f = /^cpu\s+(.+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1]?.split(/\s+/).map(Number) ?? [];
  // user nice system idle iowait irq softirq steal (guest time is already in user)
  const busy = (f[0] ?? 0) + (f[1] ?? 0) + (f[2] ?? 0) + (f[5] ?? 0) + (f[6] ?? 0) + (f[7] ?? 0);
  return busy * TICK_MS;
}

/** Cores' worth of CPU the whole machine uses over `ms` (call it while the benchmark itself is idle). */
export async function machineLoad(ms = 1000): Promise<number> {
  const b0 = machineBusyMs();
  const t0 = performance.now();
  await sleep(ms);
  return (machineBusyMs() - b0) / (performance.now() - t0);
}
