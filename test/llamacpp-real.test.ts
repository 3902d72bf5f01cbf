/**
 * The `llamacpp` backend against the real llama.cpp `llama-server` (built by
 * scripts/build-llama-server.sh into ~/.cache), serving a tiny random-weight llama model this test
 * writes itself (test/support/gguf.ts). Random weights produce gibberish, so chat requests carry a
 * GBNF grammar to keep it to clean characters.
 *
 * Skipped only when the binary is absent and CI is not set; in CI it must run.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { LlamaCppBackend } from '../src/backends/llamacpp/backend.ts';
import { parseConfig } from '../src/config/load.ts';
import { base64ToFloats } from '../src/protocol/embeddings/schema.ts';
import { startServer, type RunningServer } from '../src/main.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { writeTinyLlama } from './support/gguf.ts';

const VERSION = '3.21.1';
const BIN =
  process.env.LLAMA_SERVER_BIN ?? join(process.env.LLAMA_SERVER_CACHE ?? join(homedir(), '.cache', 'switchyard', `llama-server-${VERSION}`), 'bin', 'llama-server');
const skip = !existsSync(BIN) && !process.env.CI ? 'llama-server binary not built: run scripts/build-llama-server.sh' : false;

const GRAMMAR = 'root ::= [a-z ]+';
const N_PARALLEL = 2;
const N_EMBD = 32;

interface Envelope {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

class LlamaServerProcess {
  child: ChildProcess | undefined;
  readonly url: string;
  constructor(
    readonly port: number,
    private readonly args: string[],
    private readonly logPath: string,
  ) {
    this.url = `http://127.0.0.1:${port}`;
  }

  start(): void {
    const log = createWriteStream(this.logPath, { flags: 'a' });
    this.child = spawn(BIN, ['--host', '127.0.0.1', '--port', String(this.port), ...this.args], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout?.pipe(log);
    this.child.stderr?.pipe(log);
  }

  /** For direct probes of llama-server itself (not through the gateway). */
  async waitHealthy(ms = 60_000): Promise<void> {
    const end = Date.now() + ms;
    for (;;) {
      if (this.child?.exitCode !== null && this.child?.exitCode !== undefined) {
        assert.fail(`llama-server exited with ${this.child.exitCode}:\n${this.logTail()}`);
      }
      try {
        const r = await fetch(`${this.url}/health`);
        if (r.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > end) assert.fail(`llama-server did not become healthy:\n${this.logTail()}`);
      await sleep(50);
    }
  }

  logTail(): string {
    try {
      return readFileSync(this.logPath, 'utf8').split('\n').slice(-30).join('\n');
    } catch {
      return '(no log)';
    }
  }

  async stop(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise<void>((r) => c.once('exit', () => r()));
    c.kill('SIGTERM');
    const timer = setTimeout(() => c.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}

describe('llama-server (real binary) through the gateway', { skip }, () => {
  let dir: string;
  let model: string;
  let server: LlamaServerProcess;
  let noEmbeddings: LlamaServerProcess;
  let gw: RunningServer;
  let client: OpenAI;

  before(async () => {
    assert.ok(existsSync(BIN), `llama-server binary missing at ${BIN}: run scripts/build-llama-server.sh`);
    dir = mkdtempSync(join(tmpdir(), 'switchyard-llama-'));
    model = join(dir, 'tiny-llama.gguf');
    writeTinyLlama(model, { nEmbd: N_EMBD, nLayer: 2, nHead: 2, contextLength: 1024 });
    const common = ['-m', model, '-c', '1024', '-np', String(N_PARALLEL), '-t', '1', '--no-warmup', '--alias', 'tiny'];
    server = new LlamaServerProcess(await freePort(), [...common, '--embeddings', '--pooling', 'mean', '--metrics'], join(dir, 'server.log'));
    noEmbeddings = new LlamaServerProcess(await freePort(), common, join(dir, 'server-noembd.log'));
  });

  after(async () => {
    await gw?.close(0);
    await server?.stop();
    await noEmbeddings?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('readiness: /ready is 503 until llama-server is up and has loaded its model, then 200', async () => {
    // The gateway starts first: the server is not even running yet.
    const yaml = [
      'routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0, min_requests: 100000 } }',
      'backends:',
      `  llama: { type: llamacpp, base_url: "${server.url}", slots_poll_ms: 100, load_timeout_ms: 60000 }`,
      `  plain: { type: llamacpp, base_url: "${noEmbeddings.url}", slots_poll_ms: 100, load_timeout_ms: 60000 }`,
      'models:',
      '  tiny: { targets: [ { backend: llama, model: tiny } ] }',
      '  tiny-plain: { targets: [ { backend: plain, model: tiny } ] }',
      '',
    ].join('\n');
    gw = await startServer(parseConfig(yaml, 'test.yaml', {}), { logger: createLogger('silent'), port: 0, host: '127.0.0.1' });
    client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    await sleep(300);
    const r1 = await fetch(`${gw.url}/ready`);
    assert.equal(r1.status, 503);
    assert.match(((await r1.json()) as Envelope).error.message, /loading/);

    server.start();
    noEmbeddings.start();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      gw.deps.lifecycle.loading,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`not ready in 60 s:\n${server.logTail()}`)), 60_000);
      }),
    ]).finally(() => clearTimeout(timer));
    const r2 = await fetch(`${gw.url}/ready`);
    assert.equal(r2.status, 200);
    const ready = (await r2.json()) as { status: string; backends: Record<string, string> };
    assert.equal(ready.status, 'ready');
    assert.deepEqual(ready.backends, { llama: 'ready', plain: 'ready' });
    const h = await fetch(`${server.url}/health`);
    assert.deepEqual(await h.json(), { status: 'ok' });
  });

  it('chat: an answer (grammar-constrained), with usage and `timings`', async () => {
    const r = await client.chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'hello there' }],
      max_tokens: 8,
      temperature: 0,
      grammar: GRAMMAR,
      cache_prompt: true,
      n_probs: 2,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const content = r.choices[0]?.message.content ?? '';
    assert.match(content, /^[a-z ]+$/, `content: ${JSON.stringify(content)}`);
    assert.ok(r.choices[0]?.finish_reason === 'length' || r.choices[0]?.finish_reason === 'stop');
    assert.ok((r.usage?.completion_tokens ?? 0) > 0);
    const timings = (r as unknown as { timings?: Record<string, number> }).timings;
    assert.ok(timings && (timings.predicted_n ?? 0) > 0 && typeof timings.prompt_per_second === 'number', `timings: ${JSON.stringify(timings)}`);
    assert.equal(r.choices[0]?.logprobs?.content?.[0]?.top_logprobs.length, 2, 'n_probs reached llama-server');
  });

  it('streaming chat: chunks arrive, finish_reason and `timings` at the end', async () => {
    const stream = await client.chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'the cat sat' }],
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
      grammar: GRAMMAR,
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    let content = '';
    let chunks = 0;
    let finish: string | null = null;
    let last: Record<string, unknown> | undefined;
    for await (const c of stream) {
      chunks++;
      content += c.choices[0]?.delta?.content ?? '';
      finish = c.choices[0]?.finish_reason ?? finish;
      last = c as unknown as Record<string, unknown>;
    }
    assert.ok(chunks >= 3, `chunks: ${chunks}`);
    assert.match(content, /^[a-z ]+$/);
    assert.ok(finish === 'length' || finish === 'stop');
    assert.ok(last?.usage && last.timings, 'usage and timings on the last chunk');
  });

  it('legacy completions', async () => {
    const r = await client.completions.create({ model: 'tiny', prompt: 'once upon a time', max_tokens: 6, temperature: 0, grammar: GRAMMAR } as OpenAI.CompletionCreateParamsNonStreaming);
    assert.match(r.choices[0]?.text ?? '', /^[a-z ]+$/);
  });

  it('capacity from /slots: n_parallel slots, idle', async () => {
    const slots = (await (await fetch(`${server.url}/slots`)).json()) as Array<{ id: number; n_ctx: number; is_processing: boolean }>;
    assert.equal(slots.length, N_PARALLEL);
    assert.deepEqual(
      slots.map((s) => [typeof s.id, typeof s.n_ctx, s.is_processing]),
      Array.from({ length: N_PARALLEL }, () => ['number', 'number', false]),
    );
    const backend = gw.deps.registry.get('llama')?.llm;
    assert.ok(backend instanceof LlamaCppBackend);
    // (the previous test's request leaves the gateway's count a moment after its client has the answer)
    const end = Date.now() + 5_000;
    while (backend.capacity()?.busy !== 0 && Date.now() < end) await sleep(20);
    assert.deepEqual(backend.capacity(), { total: N_PARALLEL, busy: 0 });
  });

  it('embeddings: float and base64 (the SDK default) agree', async () => {
    const floats = (await (
      await fetch(`${gw.url}/v1/embeddings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', input: ['hello world', 'the cat'], encoding_format: 'float' }),
      })
    ).json()) as { data: Array<{ embedding: number[]; index: number }>; usage: { prompt_tokens: number } };
    assert.equal(floats.data.length, 2);
    const v = floats.data[0]?.embedding ?? [];
    assert.equal(v.length, N_EMBD);
    assert.ok(v.every((x) => Number.isFinite(x)));
    assert.ok(floats.usage.prompt_tokens > 0);

    const b64 = (await (
      await fetch(`${gw.url}/v1/embeddings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', input: ['hello world', 'the cat'], encoding_format: 'base64' }),
      })
    ).json()) as { data: Array<{ embedding: string }> };
    const decoded = base64ToFloats(b64.data[0]?.embedding ?? '');
    assert.equal(decoded.length, N_EMBD);
    decoded.forEach((x, i) => assert.ok(Math.abs(x - (v[i] ?? NaN)) < 1e-5, `component ${i}`));

    const sdk = await client.embeddings.create({ model: 'tiny', input: 'hello world' });
    assert.equal(sdk.data[0]?.embedding.length, N_EMBD);
  });

  it('a mid-stream error event from llama-server reaches the client as an error, not a clean end', async () => {
    // `response_format: json_object` without a schema: llama-server expects JSON but constrains
    // nothing, the random model writes prose, and the chat parser fails after HTTP 200 was sent:
    // `data: {"error":{"code":500,"message":"The model produced output that does not match the expected … format",…}}`.
    const stream = await client.chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'the cat' }],
      max_tokens: 60,
      temperature: 0,
      stream: true,
      response_format: { type: 'json_object' },
    });
    let content = '';
    let chunks = 0;
    await assert.rejects(
      async () => {
        for await (const c of stream) {
          chunks++;
          content += c.choices[0]?.delta?.content ?? '';
        }
      },
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.APIError, `an APIError, got ${String(err)}`);
        assert.match(err.message, /llama-server backend "llama" reported an error mid-stream: The model produced output that does not match the expected/);
        return true;
      },
    );
    assert.ok(chunks > 0 && content.length > 0, 'content was streamed before the error');
  });

  it('a server started without --embeddings: 501 from llama-server, 400 `unsupported` naming the flag', async () => {
    const direct = await fetch(`${noEmbeddings.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'x' }),
    });
    assert.equal(direct.status, 501);
    const body = (await direct.json()) as { error: { type: string } };
    assert.equal(body.error.type, 'not_supported_error');

    const res = await fetch(`${gw.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-plain', input: 'x' }),
    });
    assert.equal(res.status, 400);
    const e = ((await res.json()) as Envelope).error;
    assert.equal(e.code, 'unsupported');
    assert.match(e.message, /was started without --embeddings/);
  });
});
