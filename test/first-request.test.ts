/**
 * The first request after start-up, for every backend type, against the gateway as a real child
 * process (`node --import tsx src/main.ts --config FILE`): once `/health` answers 200 — and, for a
 * local backend (llamacpp, onnx), `/ready` too, since a local model may honestly still be loading —
 * the very next request is answered 200 with a real answer. A remote API backend (openai,
 * anthropic) is never "still loading": `/health` alone must suffice.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic-upstream.ts';
import { startFakeLlamaServer, type FakeLlamaServer } from './support/fake-llama-server.ts';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { randomTable, writeTinyModel } from './support/onnx-model.ts';
import { VOCAB, writeTokenizer } from './support/wordpiece.ts';
import { startGatewayProcess, type GatewayProcess } from './support/gateway-process.ts';

const KEY = 'sk-first-request-test-key';

type Child = GatewayProcess;

/** Starts the gateway as a child process; resolves with its URL once it logged "listening". */
function startProcess(dir: string, yaml: string): Promise<Child> {
  return startGatewayProcess(join(dir, `providers-${Math.random().toString(36).slice(2)}.yaml`), yaml);
}

/** Resolves once the child's output matches `re`. */
function waitForOutput(c: Child, re: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${re} in: ${c.output()}`)), 30_000);
    const check = (): void => {
      if (!re.test(c.output())) return;
      clearTimeout(timer);
      c.child.stdout?.off('data', check);
      resolve();
    };
    c.child.stdout?.on('data', check);
    check();
  });
}

/** Polls `path` until it answers 200 (no pause between polls beyond the round trip). */
async function until200(url: string, path: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await fetch(`${url}${path}`);
    await res.arrayBuffer();
    if (res.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${path} never answered 200 (last ${res.status})`);
  }
}

async function stop(c: Child): Promise<void> {
  if (c.child.exitCode !== null) return;
  const exited = new Promise<void>((r) => c.child.once('exit', () => r()));
  c.child.kill('SIGKILL');
  await exited;
}

const chat = (url: string, content: string, model = 'm'): Promise<Response> =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }] }),
  });

describe('the first request after start-up', () => {
  let dir = '';
  let openai: FakeUpstream | undefined;
  let anthropic: FakeAnthropic | undefined;
  let llama: FakeLlamaServer | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-first-'));
    openai = await startFakeOpenAI({ apiKey: KEY });
    anthropic = await startFakeAnthropic({ apiKey: KEY });
    llama = await startFakeLlamaServer();
  });

  after(async () => {
    await openai?.close();
    await anthropic?.close();
    await llama?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Starts a gateway with one backend, waits as a client would, then sends the first request. */
  async function firstAnswer(backend: string, local: boolean, send: (url: string) => Promise<Response>): Promise<{ status: number; body: unknown; text: string }> {
    const c = await startProcess(dir, `backends:\n  only: ${backend}\nmodels:\n  m: { targets: [ { backend: only, model: the-model } ] }\n`);
    try {
      await until200(c.url, '/health');
      if (local) await until200(c.url, '/ready');
      const res = await send(c.url);
      const text = await res.text();
      return { status: res.status, body: JSON.parse(text) as unknown, text };
    } finally {
      await stop(c);
    }
  }

  const content = (body: unknown): unknown => (body as { choices?: Array<{ message?: { content?: unknown } }> }).choices?.[0]?.message?.content;

  it('anthropic: /health 200 is enough; the first chat request is answered', async () => {
    const r = await firstAnswer(`{ type: anthropic, base_url: "${anthropic?.url}", api_key: "${KEY}" }`, false, (u) => chat(u, 'hello claude'));
    assert.equal(r.status, 200, r.text);
    assert.equal(content(r.body), 'echo: hello claude');
  });

  it('openai: /health 200 is enough; the first chat request is answered', async () => {
    const r = await firstAnswer(`{ type: openai, base_url: "${openai?.url}", api_key: "${KEY}" }`, false, (u) => chat(u, 'hello openai'));
    assert.equal(r.status, 200, r.text);
    assert.equal(content(r.body), 'Hello from the-model');
  });

  it('fake: /health 200 is enough; the first chat request is answered', async () => {
    const r = await firstAnswer('{ type: fake }', false, (u) => chat(u, 'hello fake'));
    assert.equal(r.status, 200, r.text);
    assert.equal(content(r.body), 'echo: hello fake');
  });

  it('llamacpp: once /ready is 200, the first chat request is answered', async () => {
    const r = await firstAnswer(`{ type: llamacpp, base_url: "${llama?.url}" }`, true, (u) => chat(u, 'hello llama'));
    assert.equal(r.status, 200, r.text);
    assert.equal(typeof content(r.body), 'string');
    assert.ok(String(content(r.body)).length > 0, r.text);
  });

  it('onnx: once /ready is 200, the first embeddings request is answered', async () => {
    const model = join(dir, 'tiny', 'model.onnx');
    writeTinyModel(model, { table: randomTable(VOCAB.length, 8, 7) });
    writeTokenizer(join(dir, 'tiny', 'tokenizer.json'));
    const r = await firstAnswer(`{ type: onnx, model_path: "${model}" }`, true, (u) =>
      fetch(`${u}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'hello world' }) }),
    );
    assert.equal(r.status, 200, r.text);
    const data = (r.body as { data?: Array<{ embedding?: unknown }> }).data;
    assert.ok(Array.isArray(data?.[0]?.embedding) && data[0].embedding.length === 8, r.text);
  });

  it('anthropic added by a reload: the first request after "config reloaded" is answered', async () => {
    const c = await startProcess(dir, 'backends: { f: { type: fake } }\nmodels: { m: { targets: [ { backend: f, model: echo } ] } }\n');
    try {
      await until200(c.url, '/health');
      writeFileSync(
        c.cfg,
        `backends:\n  f: { type: fake }\n  claude: { type: anthropic, base_url: "${anthropic?.url}", api_key: "${KEY}" }\n` +
          'models:\n  m: { targets: [ { backend: f, model: echo } ] }\n  c: { targets: [ { backend: claude, model: the-model } ] }\n',
      );
      c.child.kill('SIGHUP');
      await waitForOutput(c, /"msg":"config reloaded"/);
      const res = await chat(c.url, 'hello again', 'c');
      const text = await res.text();
      assert.equal(res.status, 200, text);
      assert.equal(content(JSON.parse(text)), 'echo: hello again');
    } finally {
      await stop(c);
    }
  });
});
