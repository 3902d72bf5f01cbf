/**
 * `npm run bench -- --onnx-memory [--onnx-requests 200]`: what a local ONNX model costs in memory,
 * per process, in a single process and with `server.workers: 2`. Each setup is started once with
 * each of these, on the bench's default config (scenarios.ts's gatewayYaml, the zero-latency mock):
 *   - nothing (no onnx backend; the embeddings requests go to the mock upstream);
 *   - an `onnx` backend with a tiny model (ONNX Runtime and the tokenizer library loaded, the model
 *     itself negligible);
 *   - an `onnx` backend with a model the size of all-MiniLM-L6-v2's embedding table (vocabulary
 *     30522 × 384 float32, about 47 MB, plus two dense 384×384 layers) and a 30522-token WordPiece
 *     tokenizer.json, generated with test/support/onnx-model.ts into .cache/bench-onnx-memory/.
 * Every process of the gateway (the primary and each worker, found with `pgrep -P`) is sampled
 * from /proc/<pid>/status after start-up (/ready, then 1 s) and again after `--onnx-requests`
 * embeddings requests of 16 inputs each (8 at a time, each on a new connection, so the primary's
 * round robin spreads them over the workers), 1 s after the last answer. RSS counts the pages of
 * shared libraries in every process that maps them; RssAnon is the process's own memory.
 */
import { readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import type { Commands } from './build.ts';
import { EMBED_MODEL } from './payloads.ts';
import { freePort, startProc, stopProc, type Proc } from './procs.ts';
import { gatewayYaml } from './scenarios.ts';
import { randomTable, writeTinyModel } from '../test/support/onnx-model.ts';
import { VOCAB, WORDS, tokenizerJson } from '../test/support/wordpiece.ts';

export interface OnnxMemoryOptions {
  root: string;
  mock: Proc;
  commands: Commands;
  /** embeddings requests sent to each gateway before the second sample */
  requests: number;
  say: (s: string) => void;
}

/** all-MiniLM-L6-v2's vocabulary and embedding size */
const VOCAB_SIZE = 30522;
const DIM = 384;
const LOCAL_MODEL = 'local-embed';

interface Variant {
  id: 'none' | 'tiny' | 'big';
  /** the backend line and its model line, or none */
  backend?: string;
}

interface Mem {
  rssKb: number;
  anonKb: number;
}

interface Sample {
  /** 'process' (single), 'primary', 'worker 1', … */
  role: string;
  start: Mem;
  warm: Mem;
}

function mem(pid: number): Mem {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const num = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { rssKb: num('VmRSS'), anonKb: num('RssAnon') };
}

/** The gateway's workers, by pid (none for a single process). */
function workers(pid: number): number[] {
  return spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean)
    .map(Number)
    .sort((x, y) => x - y);
}

function roles(pid: number, n: number): Array<[string, number]> {
  if (n === 1) return [['process', pid]];
  const kids = workers(pid);
  if (kids.length !== n) throw new Error(`expected ${n} workers under pid ${pid}, found ${kids.length}`);
  return [['primary', pid], ...kids.map((k, i): [string, number] => [`worker ${i + 1}`, k])];
}

/** The big model's tokenizer: the test WordPiece vocabulary padded with made-up tokens to VOCAB_SIZE. */
function bigTokenizer(): object {
  const json = tokenizerJson() as { model: { vocab: Record<string, number> } };
  for (let id = VOCAB.length; id < VOCAB_SIZE; id++) json.model.vocab[`tok${id}`] = id;
  return json;
}

/** Writes both models; returns the big model's file size in bytes. */
function writeModels(dir: string): number {
  const layers = (seed: number): number[][][] => [0, 1].map((i) => randomTable(DIM, DIM, seed + i).map((r) => r.map((x) => x / Math.sqrt(DIM))));
  const big = join(dir, 'models', 'big', 'v1');
  writeTinyModel(join(big, 'model.onnx'), { table: randomTable(VOCAB_SIZE, DIM, 1), layers: layers(100) });
  writeFileSync(join(big, 'tokenizer.json'), JSON.stringify(bigTokenizer()));
  const tiny = join(dir, 'models', 'tiny', 'v1');
  writeTinyModel(join(tiny, 'model.onnx'), { table: randomTable(VOCAB.length, DIM, 1), layers: layers(100) });
  writeFileSync(join(tiny, 'tokenizer.json'), JSON.stringify(tokenizerJson()));
  return statSync(join(big, 'model.onnx')).size;
}

/** 16 sentences of 8-24 words from the test vocabulary, fixed. */
function body(model: string): string {
  const words = WORDS.filter((w) => !w.startsWith('##'));
  const input = Array.from({ length: 16 }, (_, i) => Array.from({ length: 8 + ((i * 5) % 17) }, (_, j) => words[(i * 7 + j * 13) % words.length]).join(' '));
  return JSON.stringify({ model, input, encoding_format: 'float' });
}

async function send(url: string, payload: string, count: number): Promise<void> {
  const pool = new Pool(url, { connections: 8 });
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < count) {
          next++;
          // a new connection per request: the primary hands connections, not requests, to workers
          const res = await pool.request({ path: '/v1/embeddings', method: 'POST', headers: { 'content-type': 'application/json' }, body: payload, reset: true });
          const text = await res.body.text();
          if (res.statusCode !== 200) throw new Error(`embeddings answered ${res.statusCode}: ${text.slice(0, 300)}`);
        }
      }),
    );
  } finally {
    await pool.close();
  }
}

async function measure(o: OnnxMemoryOptions, dir: string, n: number, v: Variant): Promise<Sample[]> {
  const port = await freePort();
  let yaml = gatewayYaml({ port, mockPort: o.mock.port, cache: false });
  if (n > 1) yaml = yaml.replace('shutdown_grace_ms: 2000 }', `shutdown_grace_ms: 2000, workers: ${n} }`);
  if (v.backend) {
    yaml = yaml
      .replace('\nbackends:\n', `\nbackends:\n  local: ${v.backend}\n`)
      .replace('\nmodels:\n', `\nmodels:\n  ${LOCAL_MODEL}: { targets: [ { backend: local, model: ${LOCAL_MODEL} } ] }\n`);
  }
  const yamlPath = join(dir, `gateway-${n}-${v.id}.yaml`);
  writeFileSync(yamlPath, yaml);
  const gw = await startProc({ name: `switchyard ×${n} (${v.id})`, args: [...o.commands.gateway, '--config', yamlPath], port, readyPath: '/ready', quiet: true, env: o.commands.proxyEnv });
  try {
    await sleep(1000);
    const procs = roles(gw.pid, n);
    const start = procs.map(([, pid]) => mem(pid));
    await send(gw.url, body(v.backend ? LOCAL_MODEL : EMBED_MODEL), o.requests);
    await sleep(1000);
    const after = roles(gw.pid, n);
    if (after.some(([, pid], i) => pid !== procs[i]?.[1])) throw new Error(`${gw.name}: a worker was replaced during the run`);
    return procs.map(([role, pid], i) => ({ role, start: start[i] as Mem, warm: mem(pid) }));
  } finally {
    await stopProc(gw);
  }
}

const mb = (kb: number): string => (kb / 1024).toFixed(0);
const signed = (kb: number): string => (Math.round(kb / 1024) === 0 ? '0' : `${kb > 0 ? '+' : '−'}${mb(Math.abs(kb))}`);
/** RSS growth from `a` to `b`, RssAnon's in brackets */
const grew = (a: Mem, b: Mem): string => `${signed(b.rssKb - a.rssKb)} (${signed(b.anonKb - a.anonKb)})`;

export async function onnxMemoryScenario(o: OnnxMemoryOptions): Promise<string> {
  const dir = join(o.root, '.cache', 'bench-onnx-memory');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  o.say(`writing a ${VOCAB_SIZE} × ${DIM} float32 ONNX model into ${dir}…`);
  const size = writeModels(dir);
  const sizeMb = size / 2 ** 20;
  o.say(`model.onnx: ${(size / 1e6).toFixed(1)} MB (${sizeMb.toFixed(1)} MiB)`);
  const onnx = (m: string): string => `{ type: onnx, model_path: ${join(dir, 'models', m, 'v1', 'model.onnx')} }`;
  const variants: Variant[] = [{ id: 'none' }, { id: 'tiny', backend: onnx('tiny') }, { id: 'big', backend: onnx('big') }];
  const rows: string[] = [];
  for (const n of [1, 2]) {
    const byVariant = new Map<Variant['id'], Sample[]>();
    for (const v of variants) {
      const samples = await measure(o, dir, n, v);
      byVariant.set(v.id, samples);
      o.say(`workers ${n}, ${v.id}: ${samples.map((s) => `${s.role} ${mb(s.start.rssKb)} → ${mb(s.warm.rssKb)} MB`).join(', ')}`);
    }
    const none = byVariant.get('none') ?? [];
    const tiny = byVariant.get('tiny') ?? [];
    const big = byVariant.get('big') ?? [];
    const setup = n === 1 ? 'one process' : `\`server.workers: ${n}\``;
    const total = (xs: Sample[], k: 'start' | 'warm'): Mem => ({ rssKb: xs.reduce((s, x) => s + x[k].rssKb, 0), anonKb: xs.reduce((s, x) => s + x[k].anonKb, 0) });
    for (const k of ['start', 'warm'] as const) {
      const when = k === 'start' ? 'after start-up' : `after ${o.requests} requests`;
      const lines: Array<[string, Mem, Mem, Mem]> = none.map((s, i) => [s.role, s[k], (tiny[i] as Sample)[k], (big[i] as Sample)[k]]);
      if (n > 1) lines.push(['all processes', total(none, k), total(tiny, k), total(big, k)]);
      for (const [role, a, t, b] of lines) {
        rows.push(`| ${setup} | ${role} | ${when} | ${mb(a.rssKb)} | ${mb(t.rssKb)} | ${mb(b.rssKb)} | ${grew(a, t)} | ${grew(t, b)} | ${grew(a, b)} |`);
      }
    }
  }
  return [
    `### ONNX model memory (model.onnx ${(size / 1e6).toFixed(1)} MB = ${sizeMb.toFixed(1)} MiB: a ${VOCAB_SIZE} × ${DIM} float32 embedding table and two ${DIM}×${DIM} layers; ${o.requests} embeddings requests of 16 inputs)`,
    '',
    'RSS in MiB of each process of the gateway: without an onnx backend (its embeddings requests go to the mock upstream), with one serving a tiny model (ONNX Runtime and the tokenizer library loaded, the model negligible), and with one serving the model above; the differences give the growth of RSS and, in brackets, of RssAnon (the process\'s own memory; the rest is mapped files such as ONNX Runtime\'s library, whose pages the processes share). One start of each; a few MiB move between runs.',
    '',
    '| setup | process | when | no onnx backend | onnx, tiny model | onnx, this model | runtime: tiny − none | model: this − tiny | both: this − none |',
    '|---|---|---|--:|--:|--:|--:|--:|--:|',
    ...rows,
  ].join('\n');
}
