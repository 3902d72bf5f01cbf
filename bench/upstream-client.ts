/**
 * How much the upstream call path costs, in one process, against a zero-latency local upstream:
 *
 *   sdk      the openai SDK (fetch: undici.fetch, a pooled keep-alive Agent, maxRetries 0), which is
 *            what the `openai` backend used before it moved to undici.request
 *   backend  the `openai` backend as it is now (OpenAICompatibleBackend: chat / chatStream / embed)
 *   undici   bare undici.request with a pooled Agent, the body read as text (no parsing): the floor
 *
 * Scenarios: JSON chat, SSE chat (role chunk, 20 content chunks, finish chunk, usage chunk, [DONE]),
 * embeddings of 16 × 1536 dimensions as base64. Each runs `--concurrency` loops (default 64) for
 * `--seconds` (default 5) after a one-second warm-up, and reports requests per second and CPU
 * milliseconds per request of this process. The clients take turns, `--rounds` times (default 3),
 * and the best round of each is reported (other load on the machine only ever slows a round down).
 * The upstream is a child process (node:http answering from prebuilt buffers), pinned to another
 * core than this one when taskset exists.
 *
 *   node --import tsx bench/upstream-client.ts [--seconds 5] [--concurrency 64] [--rounds 3]
 *       [--only sdk,backend,undici] [--scenarios chat-json,chat-sse,embed-base64]
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import type { ChatCompletionCreateParamsNonStreaming, ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions';
import type { EmbeddingCreateParams } from 'openai/resources/embeddings';
import { Agent, fetch as undiciFetch, request } from 'undici';
import { OpenAICompatibleBackend } from '../src/backends/upstream/openai-compatible.ts';
import { DEFAULT_MAX_RESPONSE_BYTES, type OpenAIBackendConfig } from '../src/config/schema.ts';
import type { ChatRequest } from '../src/protocol/chat/schema.ts';
import { RawEmbeddingResponse, type EmbeddingRequest } from '../src/protocol/embeddings/schema.ts';

// ---------------------------------------------------------------------------------------------
// the upstream (child process)

const CREATED = 1_700_000_000;
const CHUNKS = 20;
const EMBED_INPUTS = 16;
const EMBED_DIMS = 1536;
const usage = { prompt_tokens: 24, completion_tokens: CHUNKS, total_tokens: 24 + CHUNKS };

function upstreamPayloads(): { chat: Buffer; sse: Buffer; embed: Buffer } {
  const chat = Buffer.from(
    JSON.stringify({
      id: 'chatcmpl-bench',
      object: 'chat.completion',
      created: CREATED,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello! Nice to meet you, how can I help today?', refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage,
    }),
  );
  const chunk = (delta: Record<string, string>, finish: string | null): string =>
    `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: CREATED, model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
  let sse = chunk({ role: 'assistant', content: '' }, null);
  for (let i = 0; i < CHUNKS; i++) sse += chunk({ content: `tok${String(i).padStart(2, '0')} ` }, null);
  sse += chunk({}, 'stop');
  sse += `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: CREATED, model: 'm', choices: [], usage })}\n\n`;
  sse += 'data: [DONE]\n\n';
  const data = Array.from({ length: EMBED_INPUTS }, (_, i) => {
    const v = new Float32Array(EMBED_DIMS);
    for (let j = 0; j < EMBED_DIMS; j++) v[j] = Math.fround(Math.sin(i * 7919 + j) * 0.04);
    return { object: 'embedding', index: i, embedding: Buffer.from(v.buffer).toString('base64') };
  });
  const embed = Buffer.from(JSON.stringify({ object: 'list', data, model: 'm', usage: { prompt_tokens: 192, total_tokens: 192 } }));
  return { chat, sse: Buffer.from(sse), embed };
}

function runUpstream(): void {
  const p = upstreamPayloads();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const url = req.url ?? '';
      if (url.endsWith('/chat/completions') && body.includes('"stream":true')) {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
        res.end(p.sse);
      } else if (url.endsWith('/chat/completions')) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': p.chat.length });
        res.end(p.chat);
      } else if (url.endsWith('/embeddings')) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': p.embed.length });
        res.end(p.embed);
      } else {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"no route","type":"invalid_request_error"}}');
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
  });
}

// ---------------------------------------------------------------------------------------------
// the clients

type Scenario = 'chat-json' | 'chat-sse' | 'embed-base64';
type ClientName = 'sdk' | 'backend' | 'undici';
type Call = () => Promise<void>;

const messages = [
  { role: 'system', content: 'You are a helpful assistant. Answer briefly.' },
  { role: 'user', content: 'Say hello in one short sentence.' },
];
const inputs = Array.from({ length: EMBED_INPUTS }, (_, i) => `The quick brown fox number ${i} jumps over the lazy dog.`);
const chatReq = { model: 'm', messages, max_tokens: 32, temperature: 0 };
const streamReq = { ...chatReq, stream: true, stream_options: { include_usage: true } };
const embedReq = { model: 'm', input: inputs, encoding_format: 'base64' as const };

function newAgent(): Agent {
  return new Agent({ connections: 256, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, headersTimeout: 0, bodyTimeout: 0 });
}

function sdkClient(baseURL: string): { calls: Record<Scenario, Call>; close(): Promise<void> } {
  const agent = newAgent();
  const client = new OpenAI({
    apiKey: 'sk-bench-0000000000',
    baseURL,
    maxRetries: 0,
    timeout: 24 * 3600_000,
    fetch: undiciFetch as unknown as NonNullable<ConstructorParameters<typeof OpenAI>[0]>['fetch'],
    fetchOptions: { dispatcher: agent } as NonNullable<ConstructorParameters<typeof OpenAI>[0]>['fetchOptions'],
    logLevel: 'off',
  });
  return {
    calls: {
      'chat-json': async () => {
        const r = await client.chat.completions.create(chatReq as ChatCompletionCreateParamsNonStreaming, { signal: new AbortController().signal });
        if (r.choices.length !== 1) throw new Error('bad answer');
      },
      'chat-sse': async () => {
        const s = await client.chat.completions.create(streamReq as ChatCompletionCreateParamsStreaming, { signal: new AbortController().signal });
        let n = 0;
        for await (const _ of s) n++;
        if (n !== CHUNKS + 3) throw new Error(`bad stream: ${n} chunks`);
      },
      'embed-base64': async () => {
        const r = await client.embeddings.create(embedReq as EmbeddingCreateParams, { signal: new AbortController().signal });
        if (r.data.length !== EMBED_INPUTS || typeof r.data[0]?.embedding !== 'string') throw new Error('bad embeddings');
      },
    },
    close: () => agent.close(),
  };
}

function backendClient(baseURL: string): { calls: Record<Scenario, Call>; close(): Promise<void> } {
  const cfg: OpenAIBackendConfig = {
    type: 'openai',
    base_url: baseURL,
    api_key: 'sk-bench-0000000000',
    max_connections: 256,
    max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
    timeout_ms: 600_000,
    stream_idle_timeout_ms: 120_000,
  };
  const b = new OpenAICompatibleBackend('bench', cfg);
  let id = 0;
  const ctx = () => ({ signal: new AbortController().signal, requestId: `req-${++id}` });
  return {
    calls: {
      'chat-json': async () => {
        const r = await b.chat(chatReq as unknown as ChatRequest, ctx());
        if (r.choices.length !== 1) throw new Error('bad answer');
      },
      'chat-sse': async () => {
        const s = await b.chatStream(streamReq as unknown as ChatRequest, ctx());
        let n = 0;
        for await (const _ of s) n++;
        if (n !== CHUNKS + 3) throw new Error(`bad stream: ${n} chunks`);
      },
      'embed-base64': async () => {
        const r = await b.embed(embedReq as unknown as EmbeddingRequest, ctx());
        if (r instanceof RawEmbeddingResponse) {
          if (r.usage.prompt_tokens <= 0) throw new Error('bad embeddings');
          return;
        }
        if (r.data.length !== EMBED_INPUTS || typeof r.data[0]?.embedding !== 'string') throw new Error('bad embeddings');
      },
    },
    close: () => b.close(),
  };
}

function undiciClient(baseURL: string): { calls: Record<Scenario, Call>; close(): Promise<void> } {
  const agent = newAgent();
  const headers = { authorization: 'Bearer sk-bench-0000000000', 'content-type': 'application/json' };
  const post = async (path: string, body: unknown, accept: string): Promise<string> => {
    const r = await request(`${baseURL}${path}`, {
      method: 'POST',
      dispatcher: agent,
      headers: { ...headers, accept },
      body: JSON.stringify(body),
      signal: new AbortController().signal,
    });
    const text = await r.body.text();
    if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}`);
    return text;
  };
  return {
    calls: {
      'chat-json': async () => void (await post('/chat/completions', chatReq, 'application/json')),
      'chat-sse': async () => void (await post('/chat/completions', streamReq, 'text/event-stream')),
      'embed-base64': async () => void (await post('/embeddings', embedReq, 'application/json')),
    },
    close: () => agent.close(),
  };
}

const CLIENTS: Record<ClientName, (baseURL: string) => { calls: Record<Scenario, Call>; close(): Promise<void> }> = {
  sdk: sdkClient,
  backend: backendClient,
  undici: undiciClient,
};

interface Result {
  rps: number;
  cpuMsPerReq: number;
  errors: number;
}

async function measure(call: Call, concurrency: number, seconds: number): Promise<Result> {
  const loop = async (until: number, count: { ok: number; err: number; first?: unknown }): Promise<void> => {
    while (performance.now() < until) {
      try {
        await call();
        count.ok++;
      } catch (err) {
        count.err++;
        count.first ??= err;
      }
    }
  };
  // warm-up
  const warm = { ok: 0, err: 0 } as { ok: number; err: number; first?: unknown };
  const wEnd = performance.now() + 1000;
  await Promise.all(Array.from({ length: concurrency }, () => loop(wEnd, warm)));
  if (warm.err > 0) throw new Error(`warm-up failed: ${String(warm.first)}`);
  const count = { ok: 0, err: 0 } as { ok: number; err: number; first?: unknown };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, () => loop(end, count)));
  const took = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  if (count.err > 0) console.error(`  ${count.err} errors, first: ${String(count.first)}`);
  return { rps: count.ok / took, cpuMsPerReq: (cpu.user + cpu.system) / 1000 / Math.max(1, count.ok), errors: count.err };
}

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? dflt) : dflt;
}

async function startUpstream(core: string | undefined): Promise<{ child: ChildProcess; port: number }> {
  const self = fileURLToPath(import.meta.url);
  const cmd = core !== undefined ? 'taskset' : process.execPath;
  const args = [...(core !== undefined ? ['-c', core, process.execPath] : []), '--import', 'tsx', self, '--upstream'];
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (c: Buffer) => {
      buf += c.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve((JSON.parse(buf.slice(0, nl)) as { port: number }).port);
    });
    child.once('exit', (code) => reject(new Error(`upstream exited with ${code}`)));
  });
  return { child, port };
}

async function main(): Promise<void> {
  const seconds = Number(arg('seconds', '5'));
  const concurrency = Number(arg('concurrency', '64'));
  const only = arg('only', 'sdk,backend,undici').split(',') as ClientName[];
  const scenarios = arg('scenarios', 'chat-json,chat-sse,embed-base64').split(',') as Scenario[];
  const pin = availableParallelism() >= 2 && spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0;
  const cores = availableParallelism();
  if (pin) spawnSync('taskset', ['-a', '-p', '-c', String(cores - 1), String(process.pid)], { stdio: 'ignore' });
  const up = await startUpstream(pin ? String(cores - 2) : undefined);
  const baseURL = `http://127.0.0.1:${up.port}/v1`;
  console.log(`upstream-client bench: ${concurrency} concurrent, ${seconds} s per run, ${pin ? `client on core ${cores - 1}, upstream on core ${cores - 2}` : 'not pinned'}`);
  const rounds = Number(arg('rounds', '3'));
  const rows: Array<{ scenario: Scenario; client: ClientName } & Result> = [];
  try {
    for (const scenario of scenarios) {
      for (let round = 1; round <= rounds; round++) {
        for (const name of only) {
          const c = CLIENTS[name](baseURL);
          try {
            const r = await measure(c.calls[scenario], concurrency, seconds);
            const best = rows.find((x) => x.scenario === scenario && x.client === name);
            if (!best) rows.push({ scenario, client: name, ...r });
            else if (r.rps > best.rps) Object.assign(best, r);
            console.log(`${scenario.padEnd(13)} ${name.padEnd(8)} round ${round}: ${r.rps.toFixed(0).padStart(7)} req/s  ${r.cpuMsPerReq.toFixed(3)} CPU ms/req${r.errors ? `  (${r.errors} errors)` : ''}`);
          } finally {
            await c.close();
          }
        }
      }
    }
  } finally {
    up.child.kill();
  }
  console.log(`\nbest of ${rounds} rounds\n| scenario | client | req/s | CPU ms/req | × undici |`);
  console.log('|---|---|---:|---:|---:|');
  for (const r of rows) {
    const floor = rows.find((x) => x.scenario === r.scenario && x.client === 'undici');
    console.log(`| ${r.scenario} | ${r.client} | ${r.rps.toFixed(0)} | ${r.cpuMsPerReq.toFixed(3)} | ${floor ? (r.rps / floor.rps).toFixed(2) : '–'} |`);
  }
}

if (process.argv.includes('--upstream')) runUpstream();
else
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
