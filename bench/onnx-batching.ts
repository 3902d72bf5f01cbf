/**
 * Dynamic batching of the onnx backend, measured: the same generated model served by two
 * backends, one batching (window_ms / max_batch_size as configured) and one running every request
 * alone (max_batch_size: 1), each loaded with the same closed loop of concurrent requests, twice:
 * through the real gateway over loopback HTTP, and straight into the backends' embed() (the
 * model-side effect without the HTTP layer's cost).
 *
 *   node --import tsx bench/onnx-batching.ts [--seconds 5] [--concurrency 32] [--dim 384] [--layers 2] [--window 2] [--max-batch 32] [--threads N]
 *
 * The model is generated (an embedding table, `layers` dense tanh layers per token, masked mean,
 * L2), so no model hub is needed; `--layers` sets how much work each token costs.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { OnnxBackend } from '../src/backends/onnx/backend.ts';
import { parseConfig } from '../src/config/load.ts';
import { startServer } from '../src/main.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { randomTable, writeTinyModel } from '../test/support/onnx-model.ts';
import { VOCAB, WORDS, writeTokenizer } from '../test/support/wordpiece.ts';

const { values: a } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '32' },
    dim: { type: 'string', default: '384' },
    layers: { type: 'string', default: '2' },
    window: { type: 'string', default: '2' },
    'max-batch': { type: 'string', default: '32' },
    threads: { type: 'string' },
  },
});
const seconds = Number(a.seconds);
const concurrency = Number(a.concurrency);
const dim = Number(a.dim);
const layers = Number(a.layers);

const dir = join(import.meta.dirname, '..', '.cache', `bench-onnx-${process.pid}`);
mkdirSync(dir, { recursive: true });
const model = join(dir, 'models', 'bench', 'v1', 'model.onnx');
writeTinyModel(model, {
  table: randomTable(VOCAB.length, dim, 1),
  layers: Array.from({ length: layers }, (_, i) => randomTable(dim, dim, 100 + i).map((r) => r.map((x) => x / Math.sqrt(dim)))),
});
writeTokenizer(join(dir, 'models', 'bench', 'v1', 'tokenizer.json'));

const threads = a.threads ? `, intra_op_threads: ${a.threads}` : '';
const yaml = `
backends:
  batched:   { type: onnx, model_path: ${model}${threads}, batch: { window_ms: ${a.window}, max_batch_size: ${a['max-batch']} } }
  unbatched: { type: onnx, model_path: ${model}${threads}, batch: { window_ms: 0, max_batch_size: 1 } }
models:
  batched:   { targets: [ { backend: batched, model: bench } ] }
  unbatched: { targets: [ { backend: unbatched, model: bench } ] }
`;
const running = await startServer(parseConfig(yaml, 'bench.yaml', {}), { logger: createLogger('error'), port: 0, host: '127.0.0.1' });
await running.deps.lifecycle.loading;

/** Sentences of 8-24 words drawn from the vocabulary, fixed by seed. */
const words = WORDS.filter((w) => !w.startsWith('##'));
const sentences = Array.from({ length: 64 }, (_, i) =>
  Array.from({ length: 8 + (i % 17) }, (_, j) => words[(i * 7 + j * 13) % words.length]).join(' '),
);

interface Result {
  rps: number;
  p50: number;
  p99: number;
  batches: number;
  requests: number;
}

function backendOf(name: string): OnnxBackend {
  const backend = running.deps.registry.get(name)?.llm;
  if (!(backend instanceof OnnxBackend)) throw new Error(`${name} is not an onnx backend`);
  return backend;
}

/** `concurrency` closed loops calling `one(i)` for `seconds`. */
async function closedLoop(name: string, one: (i: number) => Promise<void>): Promise<Result> {
  const backend = backendOf(name);
  const before = backend.stats.batches;
  const latencies: number[] = [];
  const end = Date.now() + seconds * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      for (let i = w; Date.now() < end; i += concurrency) {
        const t0 = performance.now();
        await one(i);
        latencies.push(performance.now() - t0);
        n++;
      }
    }),
  );
  latencies.sort((x, y) => x - y);
  const q = (p: number): number => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  return { rps: n / seconds, p50: q(0.5), p99: q(0.99), batches: backend.stats.batches - before, requests: n };
}

async function overHttp(name: 'batched' | 'unbatched'): Promise<Result> {
  const pool = new Pool(running.url, { connections: concurrency });
  try {
    return await closedLoop(name, async (i) => {
      const res = await pool.request({
        path: '/v1/embeddings',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: name, input: sentences[i % sentences.length], encoding_format: 'base64' }),
      });
      await res.body.text();
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
    });
  } finally {
    await pool.close();
  }
}

function direct(name: 'batched' | 'unbatched'): Promise<Result> {
  const backend = backendOf(name);
  return closedLoop(name, async (i) => {
    await backend.embed({ model: 'bench', input: sentences[i % sentences.length] ?? '', encoding_format: 'base64' }, { signal: new AbortController().signal, requestId: String(i) });
  });
}

try {
  // Warm both backends (JIT, ORT arenas) before measuring.
  for (const name of ['batched', 'unbatched'] as const) {
    const backend = backendOf(name);
    await Promise.all(sentences.slice(0, 8).map((input, i) => backend.embed({ model: 'bench', input }, { signal: new AbortController().signal, requestId: `warm-${i}` })));
  }
  const row = (name: string, r: Result): string =>
    `  ${name.padEnd(10)} ${r.rps.toFixed(0).padStart(6)} req/s   p50 ${r.p50.toFixed(1).padStart(6)} ms   p99 ${r.p99.toFixed(1).padStart(6)} ms   ` +
    `${r.batches} session runs for ${r.requests} requests (${(r.requests / Math.max(1, r.batches)).toFixed(1)} per run)`;
  console.log(
    `onnx batching: dim ${dim}, ${layers} dense layers, ${concurrency} concurrent clients, ${seconds} s each, ` +
      `window ${a.window} ms, max batch ${a['max-batch']}${a.threads ? `, ${a.threads} intra-op threads` : ''}`,
  );
  for (const [label, fn] of [
    ['through the gateway (HTTP, loopback)', overHttp],
    ["straight into the backend's embed()", direct],
  ] as const) {
    const u = await fn('unbatched');
    const b = await fn('batched');
    console.log(label);
    console.log(row('unbatched', u));
    console.log(row('batched', b));
    console.log(`  batched / unbatched throughput: ${(b.rps / u.rps).toFixed(2)}x`);
  }
} finally {
  await running.close(0);
  rmSync(dir, { recursive: true, force: true });
}
