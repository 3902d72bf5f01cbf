#!/usr/bin/env node
// Runs every *.test.ts under test/ and src/ with Node's test runner (Node 20 does not expand
// globs itself). Extra arguments are passed to `node --test` (e.g. --test-name-pattern=foo);
// arguments ending in .ts replace the file list (and skip the layering check and the lint).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function find(dir) {
  let out = [];
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const e of entries) {
    if (e === 'node_modules' || e.startsWith('.')) continue;
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out = out.concat(find(p));
    else if (e.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

const args = process.argv.slice(2);
const explicit = args.filter((a) => a.endsWith('.ts'));
const flags = args.filter((a) => !a.endsWith('.ts'));
const files = explicit.length > 0 ? explicit : [...find('src'), ...find('test')].sort();
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
// The layering rules (.dependency-cruiser.cjs) first: no import cycles, no import up a layer.
if (explicit.length === 0) {
  const dc = spawnSync(process.execPath, ['node_modules/dependency-cruiser/bin/dependency-cruise.mjs', 'src', '--config', '.dependency-cruiser.cjs', '--output-type', 'err'], { stdio: 'inherit' });
  if (dc.status !== 0) {
    console.error('layering check failed (npm run deps to see it alone)');
    process.exit(dc.status ?? 1);
  }
  // The type-aware lint (eslint.config.js): floating promises, exhaustive switches, no `any`, ...
  const lint = spawnSync(process.execPath, ['node_modules/eslint/bin/eslint.js', '.'], { stdio: 'inherit' });
  if (lint.status !== 0) {
    console.error('lint failed (npm run lint to see it alone)');
    process.exit(lint.status ?? 1);
  }
}
// Two test files at a time: most wait on sockets and child processes, and Node 20's default (one
// fewer than the cores) runs them one by one on a 2-core machine. A --test-concurrency given wins.
const concurrency = flags.some((f) => f.startsWith('--test-concurrency')) ? [] : ['--test-concurrency=2'];
const r = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-timeout=60000', ...concurrency, ...flags, ...files], {
  stdio: 'inherit',
});
process.exit(r.status ?? 1);
