/**
 * Hot reload in a real gateway process: the config file changes while a stream is in flight — the
 * stream completes on the target it started on, new requests go to the new target, breaker and
 * latency statistics of unchanged targets survive, a broken file is rejected without downtime, and
 * SIGHUP reloads too.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

const root = join(import.meta.dirname, '..');

const config = (target: string): string => `
backends:
  old: { type: fake, chunk_delay_ms: 60 }
  new: { type: fake }
  steady: { type: fake }
models:
  chat: { targets: [ { backend: ${target}, model: echo } ] }
  other: { targets: [ { backend: steady, model: echo } ] }
`;

async function waitFor(get: () => string, re: RegExp, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!re.test(get())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${re}: ${get().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('hot reload', () => {
  let dir: string;
  let file: string;
  let child: ChildProcess;
  let out = '';
  let url = '';

  /** Replaces the file the way editors and config-map updates do: write aside, then rename. */
  const writeConfig = (text: string): void => {
    const tmp = join(dir, `.providers.${Date.now()}.tmp`);
    writeFileSync(tmp, text);
    renameSync(tmp, file);
  };

  const chat = (model: string, stream = false): Promise<Response> =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'one two three four five six seven eight' }] }),
    });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-reload-'));
    file = join(dir, 'providers.yaml');
    writeFileSync(file, config('old'));
    child = spawn(process.execPath, ['--import', 'tsx', join(root, 'src/main.ts'), '--config', file], {
      cwd: root,
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor(() => out, /"msg":"listening","url":"[^"]+"/, 20_000);
    url = /"msg":"listening","url":"([^"]+)"/.exec(out)?.[1] ?? '';
  });
  after(() => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('a stream in flight finishes on its old target; new requests use the new one; stats survive', async () => {
    // warm the unchanged target's statistics
    for (let i = 0; i < 3; i++) assert.equal((await chat('other')).status, 200);
    const before = (await (await fetch(`${url}/status`)).json()) as { models: Array<{ name: string; targets: Array<{ samples: number }> }> };
    const samplesBefore = before.models.find((m) => m.name === 'other')?.targets[0]?.samples ?? 0;
    assert.ok(samplesBefore >= 3);

    const res = await chat('chat', true);
    assert.equal(res.headers.get('x-switchyard-backend'), 'old');
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    assert.ok(!first.done);

    writeConfig(config('new'));
    await waitFor(() => out, /"msg":"config reloaded"/);

    const fresh = await chat('chat');
    assert.equal(fresh.status, 200);
    assert.equal(fresh.headers.get('x-switchyard-backend'), 'new', 'new requests go to the new target');

    let text = new TextDecoder().decode(first.value);
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      text += new TextDecoder().decode(r.value);
    }
    assert.ok(text.endsWith('data: [DONE]\n\n'), 'the old stream completed');
    assert.ok(text.includes('"content":"eight"'));

    const afterReload = (await (await fetch(`${url}/status`)).json()) as typeof before;
    const samplesAfter = afterReload.models.find((m) => m.name === 'other')?.targets[0]?.samples ?? 0;
    assert.ok(samplesAfter >= samplesBefore, 'statistics of an unchanged target survive the reload');
  });

  it('a broken file is rejected with its errors and the running config keeps serving', async () => {
    writeConfig('backends: { new: { type: fake } }\nmodels: { chat: { targets: [ { backend: nope, model: x } ] } }\n');
    await waitFor(() => out, /"msg":"config reload rejected[^"]*".*unknown backend \\"nope\\"/);
    const r = await chat('chat');
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-switchyard-backend'), 'new');
  });

  it('SIGHUP reloads the file', async () => {
    // put the valid config back without letting the watcher see it first: write, then signal
    writeConfig(config('old'));
    child.kill('SIGHUP');
    await waitFor(() => (out.match(/"msg":"config reloaded"/g) ?? []).length >= 2 ? 'y' : 'n', /y/);
    const r = await chat('chat');
    assert.equal(r.headers.get('x-switchyard-backend'), 'old');
    await r.text();
  });
});
