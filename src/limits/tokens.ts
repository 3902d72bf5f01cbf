/**
 * Token counting with a real tokenizer (js-tiktoken's bundled BPE ranks), off the event loop.
 *
 * js-tiktoken is pure JavaScript: building an encoder takes 1–3 s (o200k_base is the slow one) and
 * encoding costs about 0.6 µs per character, so a 20 KB prompt would block the event loop for
 * ~13 ms. Both happen in one worker thread instead: encoders are built there once, at start-up,
 * only for the encodings the configured models need, and the main thread only posts texts and
 * gets a number back. The worker also remembers the count of every text it has seen (bounded), so
 * a conversation that resends its history pays only for its new message.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

export type Encoding = 'o200k_base' | 'cl100k_base';

/** o200k_base for OpenAI's 4o / 4.1 / 4.5 / 5 / o-series / gpt-oss; cl100k_base for everything else. */
export function encodingFor(model: string): Encoding {
  const m = model.toLowerCase().replace(/^.*\//, '');
  return /^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|chatgpt-4o|o[134](-|$)|gpt-oss)/.test(m) ? 'o200k_base' : 'cl100k_base';
}

// The worker is plain CommonJS evaluated from a string, so it runs the same under tsx and from dist/.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { Tiktoken } = require(workerData.lite);
const encoders = new Map();
function encoder(name) {
  let e = encoders.get(name);
  if (!e) { e = new Tiktoken(require(workerData.ranks[name])); encoders.set(name, e); }
  return e;
}
const memo = new Map();
let memoChars = 0;
const MEMO_MAX = workerData.memoChars;
function count(name, text) {
  if (text.length === 0) return 0;
  const k = name + '\\u0000' + text;
  const hit = memo.get(k);
  if (hit !== undefined) return hit;
  const n = encoder(name).encode(text, 'all').length;
  if (text.length >= 16 && text.length <= MEMO_MAX / 8) {
    memo.set(k, n);
    memoChars += k.length;
    for (const key of memo.keys()) {
      if (memoChars <= MEMO_MAX) break;
      memo.delete(key);
      memoChars -= key.length;
    }
  }
  return n;
}
parentPort.on('message', (m) => {
  try {
    if (m.warm) { for (const n of m.warm) encoder(n); parentPort.postMessage({ id: m.id, n: 0 }); return; }
    let n = 0;
    for (const t of m.texts) n += count(m.enc, t);
    parentPort.postMessage({ id: m.id, n });
  } catch (err) {
    parentPort.postMessage({ id: m.id, error: String(err && err.message || err) });
  }
});
`;

const require = createRequire(import.meta.url);

interface Pending {
  resolve(n: number): void;
  reject(e: Error): void;
}

export class TokenCounter {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(private readonly memoChars = 8_000_000) {}

  private start(): Worker {
    if (this.worker) return this.worker;
    const ranks: Record<Encoding, string> = {
      o200k_base: require.resolve('js-tiktoken/ranks/o200k_base'),
      cl100k_base: require.resolve('js-tiktoken/ranks/cl100k_base'),
    };
    const w = new Worker(WORKER, {
      eval: true,
      workerData: { lite: require.resolve('js-tiktoken/lite'), ranks, memoChars: this.memoChars },
      // plain CommonJS: no TypeScript loader needed in the worker
      execArgv: [],
    });
    w.unref();
    w.on('message', (m: { id: number; n?: number; error?: string }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error !== undefined) p.reject(new Error(`tokenizer: ${m.error}`));
      else p.resolve(m.n ?? 0);
    });
    const fail = (err: Error): void => {
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      this.worker = undefined;
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`tokenizer worker exited (${code})`)));
    this.worker = w;
    return w;
  }

  private send(msg: { warm: Encoding[] } | { enc: Encoding; texts: string[] }): Promise<number> {
    const w = this.start();
    const id = this.nextId++;
    return new Promise<number>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      w.postMessage({ id, ...msg });
    });
  }

  /** Builds the encoders now (at start-up), so the first request does not wait for them. */
  warm(encodings: readonly Encoding[]): Promise<void> {
    if (encodings.length === 0) return Promise.resolve();
    return this.send({ warm: [...new Set(encodings)] }).then(() => undefined);
  }

  /** Total tokens of `texts` in `enc`. */
  count(enc: Encoding, texts: readonly string[]): Promise<number> {
    const nonEmpty = texts.filter((t) => t.length > 0);
    if (nonEmpty.length === 0) return Promise.resolve(0);
    return this.send({ enc, texts: nonEmpty });
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }
}
