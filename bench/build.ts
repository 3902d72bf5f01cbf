/**
 * A plain-JavaScript build of src/ and bench/ with tsc into .cache/bench-build/ (gitignored), so
 * the processes under test can run as production runs them (`npm run build` → dist/): without
 * tsx, whose loader thread, per-module transform and source-map support add memory and CPU that
 * production does not pay, and with real line numbers in CPU profiles.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { imageAllocatorEnv } from './procs.ts';

export interface Commands {
  /** node arguments that start each process (script path first, its own arguments to be appended) */
  mock: string[];
  floor: string[];
  gateway: string[];
  /** the environment of the two proxies (floor and gateway): the Docker image's allocator settings */
  proxyEnv: NodeJS.ProcessEnv;
  note: string;
}

/**
 * What both proxies run with: this environment plus the Docker image's `MALLOC_*` settings, and
 * what the run's note says about them (the Dockerfile read once).
 */
function proxySetup(root: string): { proxyEnv: NodeJS.ProcessEnv; envNote: string } {
  const image = imageAllocatorEnv(readFileSync(join(root, 'Dockerfile'), 'utf8'));
  const set = Object.entries(image).map(([k, v]) => `${k}=${v}`);
  return { proxyEnv: { ...process.env, ...image }, envNote: set.length > 0 ? `; the floor and Switchyard with the Docker image's ${set.join(' ')}` : '' };
}

export function tsxCommands(root: string): Commands {
  const tsx = (f: string): string[] => ['--import', 'tsx', join(root, f)];
  const { proxyEnv, envNote } = proxySetup(root);
  return { mock: tsx('bench/mock-upstream.ts'), floor: tsx('bench/floor-proxy.ts'), gateway: tsx('src/main.ts'), proxyEnv, note: `TypeScript run through tsx (\`node --import tsx\`)${envNote}` };
}

/**
 * Writes a tsconfig at `path` (paths relative to it) and emits JavaScript with tsc. `noCheck`: emit
 * only (`npm run typecheck` checks), a third of the time of a checked build; type errors do not
 * stop the emit, so callers judge by the files produced.
 */
function emitWithTsc(root: string, path: string, o: { extends: string; rootDir: string; outDir: string; include: string[]; exclude: string[] }): void {
  const compilerOptions = { noEmit: false, noCheck: true, rootDir: o.rootDir, outDir: o.outDir, sourceMap: false, declaration: false };
  writeFileSync(path, JSON.stringify({ extends: o.extends, compilerOptions, include: o.include, exclude: o.exclude }));
  spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path], { cwd: root, stdio: 'ignore' });
}

/** Compiles with tsc; falls back to tsx (and says so) when the build produced no entry points. */
export function compiledCommands(root: string): Commands {
  const out = join(root, '.cache', 'bench-build');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  emitWithTsc(root, join(out, 'tsconfig.json'), { extends: '../../tsconfig.json', rootDir: '../..', outDir: '.', include: ['../../src', '../../bench'], exclude: ['../../src/**/*.test.ts'] });
  const files = { mock: join(out, 'bench', 'mock-upstream.js'), floor: join(out, 'bench', 'floor-proxy.js'), gateway: join(out, 'src', 'main.js') };
  const { proxyEnv, envNote } = proxySetup(root);
  if (!Object.values(files).every((f) => existsSync(f))) return { ...tsxCommands(root), note: `TypeScript run through tsx (the tsc build failed)${envNote}` };
  // src/main.js reads ../package.json; "type": "module" must also apply to the build
  copyFileSync(join(root, 'package.json'), join(out, 'package.json'));
  return { mock: [files.mock], floor: [files.floor], gateway: [files.gateway], proxyEnv, note: `a tsc build of src/ and bench/ (.cache/bench-build/), plain \`node\`${envNote}` };
}

/**
 * Another revision's gateway, for A/Bs (`--path-against <rev>`, `--ab <rev>`): its src/, package.json and
 * tsconfig.json taken with `git archive` into .cache/rev-<rev>/ and compiled as above, against
 * this checkout's node_modules. Returns the node arguments that start it.
 */
export function revisionGateway(root: string, rev: string): string[] {
  const dir = join(root, '.cache', `rev-${rev.replace(/[^A-Za-z0-9._-]/g, '_')}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const tar = spawnSync('git', ['archive', rev, 'src', 'package.json', 'tsconfig.json'], { cwd: root, maxBuffer: 1 << 28 });
  if (tar.status !== 0) throw new Error(`git archive ${rev}: ${tar.stderr.toString().trim()}`);
  spawnSync('tar', ['-x', '-C', dir], { input: tar.stdout });
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  emitWithTsc(root, join(dir, 'tsconfig.build.json'), { extends: './tsconfig.json', rootDir: '.', outDir: 'build', include: ['src'], exclude: ['src/**/*.test.ts'] });
  const main = join(dir, 'build', 'src', 'main.js');
  if (!existsSync(main)) throw new Error(`the build of ${rev} produced no src/main.js`);
  copyFileSync(join(dir, 'package.json'), join(dir, 'build', 'package.json'));
  return [main];
}
