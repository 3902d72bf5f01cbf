/**
 * There is no Docker engine here, so the image is checked in two parts: the Dockerfile is linted
 * with dockerfile-utils and checked for the properties we promise (multi-stage, non-root,
 * HEALTHCHECK on /health), and the exact build + CMD it runs (`tsc -p tsconfig.build.json`, then
 * `node dist/main.js`) is executed for real and probed on /health.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { validate } from 'dockerfile-utils';
import { imageAllocatorEnv } from '../bench/procs.ts';

const root = join(import.meta.dirname, '..');
const text = readFileSync(join(root, 'Dockerfile'), 'utf8');
const lines = text.split('\n').map((l) => l.trim());
/** the last stage: what the image runs */
const runtime = text.slice(text.lastIndexOf('\nFROM '));

describe('Dockerfile', () => {
  it('passes dockerfile-utils validation with no errors or warnings', () => {
    const diags = validate(text);
    assert.deepEqual(
      diags.map((d) => `${d.range.start.line + 1}: ${d.message}`),
      [],
    );
  });

  it('lints a deliberately broken Dockerfile (the linter is live)', () => {
    assert.ok(validate('FROM node:20\nFRM x\n').length > 0);
  });

  it('is multi-stage, runs as a non-root user, and has a HEALTHCHECK on /health', () => {
    const froms = lines.filter((l) => /^FROM\s/i.test(l));
    assert.ok(froms.length >= 2, 'at least two stages');
    const user = /^USER\s+(\S+)/m.exec(runtime);
    assert.ok(user, 'USER in the runtime stage');
    assert.notEqual(user[1], 'root');
    assert.notEqual(user[1], '0');
    assert.match(runtime, /^HEALTHCHECK[\s\S]*\/health/m);
    assert.match(runtime, /^CMD \["node", "dist\/main\.js"\]/m);
    assert.doesNotMatch(runtime, /tsx/, 'the runtime does not need tsx');
  });

  it('runs the gateway with a fixed glibc mmap threshold (what the bench measures: bench/procs.ts reads it from here)', () => {
    assert.deepEqual(imageAllocatorEnv(text), { MALLOC_MMAP_THRESHOLD_: '131072' });
    assert.match(runtime, /^\s+MALLOC_MMAP_THRESHOLD_=131072$/m, 'set in the runtime stage');
  });

  describe('the build and CMD the image runs', () => {
    const out = join(root, '.cache', `dist-test-${process.pid}`);
    after(() => rmSync(out, { recursive: true, force: true }));

    it('compiles with tsconfig.build.json and serves /health from dist/main.js', async () => {
      mkdirSync(out, { recursive: true });
      const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json'), '--outDir', out], {
        encoding: 'utf8',
      });
      assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
      const cfg = join(out, 'providers.yaml');
      writeFileSync(cfg, 'backends: { demo: { type: fake } }\nmodels: { m: { targets: [ { backend: demo, model: x } ] } }\n');
      const child = spawn(process.execPath, [join(out, 'main.js'), '--config', cfg], {
        env: { ...process.env, ...imageAllocatorEnv(text), PORT: '0', HOST: '127.0.0.1', NODE_ENV: 'production' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      try {
        const url = await new Promise<string>((resolve, reject) => {
          let buf = '';
          const timer = setTimeout(() => reject(new Error(`no "listening" line: ${buf}`)), 15_000);
          child.stdout.on('data', (d: Buffer) => {
            buf += d.toString();
            const m = /"msg":"listening","url":"([^"]+)"/.exec(buf);
            if (m?.[1]) {
              clearTimeout(timer);
              resolve(m[1]);
            }
          });
          child.once('exit', (code) => reject(new Error(`exited ${code}: ${buf}`)));
        });
        const res = await fetch(`${url}/health`);
        assert.equal(res.status, 200);
        assert.deepEqual(await res.json(), { status: 'ok' });
        const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
        child.kill('SIGTERM');
        assert.equal(await exited, 0, 'SIGTERM drains and exits 0');
      } finally {
        child.kill('SIGKILL');
      }
    });
  });
});
