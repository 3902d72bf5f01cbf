#!/usr/bin/env node
// The `switchyard` command (package.json "bin"). In a checkout it runs src/cli.ts through tsx;
// in a build without tsx (the Docker image) it runs the compiled dist/cli.js.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const src = new URL('../src/cli.ts', import.meta.url);
const dist = new URL('../dist/cli.js', import.meta.url);

let cli;
if (existsSync(fileURLToPath(src))) {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import(src.href);
} else {
  cli = await import(dist.href);
}
process.exitCode = await cli.runCli(process.argv.slice(2));
