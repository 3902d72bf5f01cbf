/**
 * `npm run bench -- --profile [--only chat-c64,embed-float-c64,…]`: Switchyard under `node --cpu-prof`,
 * loaded with one scenario at a time, then its profile summarised over the load window only
 * (start-up is left out). Switchyard runs from a `tsc` build (bench/build.ts): under tsx every
 * module is one line (no line numbers in the profile) and tsx's loader thread and source maps add
 * costs production does not pay. Writes, per scenario,
 * bench/results/profile/switchyard-<id>.cpuprofile (open it in Chrome DevTools or speedscope),
 * a .folded file for flame-graph tools, the load window (.window.json, which profile-summary.ts
 * picks up by itself), and profile-<id>.md.
 */
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Commands } from './build.ts';
import { load } from './measure.ts';
import { stopProc, type Pinning, type Proc } from './procs.ts';
import { summarize, writeFolded, type CpuProfile } from './profile-summary.ts';
import { CACHE_SCENARIOS, SCENARIOS, startSwitchyard } from './scenarios.ts';

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);

export async function profileScenarios(ids: string[], opts: { results: string; mock: Proc; pin: Pinning; seconds: number; intervalUs: number; commands: Commands }): Promise<string> {
  const dir = join(opts.results, 'profile');
  mkdirSync(dir, { recursive: true });
  const out: string[] = [];
  const gw = opts.commands;
  for (const id of ids) {
    const cached = CACHE_SCENARIOS.find((s) => s.id === id);
    const sc = cached ?? SCENARIOS.find((s) => s.id === id);
    if (!sc) throw new Error(`unknown scenario "${id}" (known: ${[...SCENARIOS, ...CACHE_SCENARIOS].map((s) => s.id).join(', ')})`);
    const name = `switchyard-${id}.cpuprofile`;
    // one file per thread (tsx's loader hooks run in a worker thread): write them apart, keep the main thread's
    const raw = join(dir, `raw-${id}`);
    rmSync(raw, { recursive: true, force: true });
    const sw = await startSwitchyard({
      name: 'switchyard (cpu-prof)',
      args: ['--cpu-prof', `--cpu-prof-dir=${raw}`, `--cpu-prof-interval=${opts.intervalUs}`, ...gw.gateway],
      yamlPath: join(opts.results, 'switchyard-profile.yaml'),
      mockPort: opts.mock.port,
      cache: cached !== undefined,
      native: 'native' in sc && sc.native === true,
      core: opts.pin.enabled ? opts.pin.proxyCore : undefined,
      env: gw.proxyEnv,
    });
    process.stderr.write(`profiling ${sc.label} for ${opts.seconds} s (after a 2 s warm-up)…\n`);
    let fromUs = 0;
    let toUs = 0;
    let rps = 0;
    try {
      await load(sw.url, { path: sc.path, body: sc.body, connections: sc.connections, seconds: 2 }, 0);
      fromUs = nowUs();
      rps = (await load(sw.url, { path: sc.path, body: sc.body, connections: sc.connections, seconds: opts.seconds }, 0)).rps;
      toUs = nowUs();
    } finally {
      await stopProc(sw, 'SIGTERM');
    }
    // CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile; the main thread is thread 0
    const files = readdirSync(raw).filter((f) => f.endsWith('.cpuprofile'));
    const main = files.find((f) => f.includes(`.${sw.pid}.0.`)) ?? files.sort((x, y) => statSync(join(raw, y)).size - statSync(join(raw, x)).size)[0];
    if (!main) throw new Error(`no CPU profile written in ${raw}`);
    renameSync(join(raw, main), join(dir, name));
    rmSync(raw, { recursive: true, force: true });
    const profile = JSON.parse(readFileSync(join(dir, name), 'utf8')) as CpuProfile;
    const window = { fromUs, toUs };
    writeFileSync(join(dir, name.replace(/\.cpuprofile$/, '.window.json')), `${JSON.stringify(window)}\n`);
    writeFolded(profile, join(dir, name.replace(/\.cpuprofile$/, '.folded')), window);
    const md = [`### Profile: Switchyard, ${sc.label} (${Math.round(rps).toLocaleString('en-US')} RPS under the profiler; ${gw.note})`, '', summarize(profile, 25, window)].join('\n');
    writeFileSync(join(opts.results, `profile-${id}.md`), `${md}\n`);
    out.push(md);
  }
  return out.join('\n\n');
}
