/**
 * Token counting with a real tokenizer (js-tiktoken's bundled BPE ranks), off the event loop.
 *
 * js-tiktoken is pure JavaScript: building an encoder takes 1–3 s (o200k_base is the slow one) and
 * encoding costs about 0.6 µs per character, so a 20 KB prompt would block the event loop for
 * ~13 ms. Both happen in one worker thread instead: encoders are built there once, at start-up,
 * only for the encodings the configured models need, and the main thread only posts texts and
 * gets their counts back. The main thread remembers the count of every text it has seen (bounded
 * in characters and entries), so a conversation that resends its history pays only for its new
 * message, and a prompt whose texts are all known is counted without a message to the worker.
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
function count(name, text) {
  return encoder(name).encode(text, 'all').length;
}
parentPort.on('message', (m) => {
  try {
    if (m.warm) { for (const n of m.warm) encoder(n); parentPort.postMessage({ id: m.id, n: 0 }); return; }
    parentPort.postMessage({ id: m.id, ns: m.texts.map((t) => count(m.enc, t)) });
  } catch (err) {
    parentPort.postMessage({ id: m.id, error: String(err && err.message || err) });
  }
});
`;

const require = createRequire(import.meta.url);

interface Pending {
  resolve(ns: number[]): void;
  reject(e: Error): void;
}

/** The most texts remembered, whatever their length (a Map entry costs about 80 bytes beside its text). */
const MEMO_ENTRIES = 100_000;

/** Counts of texts seen, per encoding, oldest first; bounded in characters and in entries. */
class CountMemo {
  private readonly maps: Record<Encoding, Map<string, number>> = { o200k_base: new Map(), cl100k_base: new Map() };
  private chars = 0;
  private entries = 0;

  constructor(private readonly maxChars: number) {}

  get(enc: Encoding, text: string): number | undefined {
    return this.maps[enc].get(text);
  }

  set(enc: Encoding, text: string, n: number): void {
    if (text.length > this.maxChars / 8) return;
    const map = this.maps[enc];
    if (map.has(text)) return;
    map.set(text, n);
    this.chars += text.length;
    this.entries++;
    while (this.chars > this.maxChars || this.entries > MEMO_ENTRIES) this.evictOne();
  }

  /** Drops the oldest text of the larger map. */
  private evictOne(): void {
    const a = this.maps.o200k_base;
    const b = this.maps.cl100k_base;
    const map = a.size >= b.size ? a : b;
    const oldest = map.keys().next();
    if (oldest.done === true) return;
    map.delete(oldest.value);
    this.chars -= oldest.value.length;
    this.entries--;
  }
}

export class TokenCounter {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly memo: CountMemo;

  constructor(memoChars = 8_000_000) {
    this.memo = new CountMemo(memoChars);
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const ranks: Record<Encoding, string> = {
      o200k_base: require.resolve('js-tiktoken/ranks/o200k_base'),
      cl100k_base: require.resolve('js-tiktoken/ranks/cl100k_base'),
    };
    const w = new Worker(WORKER, {
      eval: true,
      workerData: { lite: require.resolve('js-tiktoken/lite'), ranks },
      // plain CommonJS: no TypeScript loader needed in the worker
      execArgv: [],
    });
    w.unref();
    w.on('message', (m: { id: number; ns?: number[]; error?: string }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error !== undefined) p.reject(new Error(`tokenizer: ${m.error}`));
      else p.resolve(m.ns ?? []);
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

  private send(msg: { warm: Encoding[] } | { enc: Encoding; texts: string[] }): Promise<number[]> {
    const w = this.start();
    const id = this.nextId++;
    return new Promise<number[]>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      w.postMessage({ id, ...msg });
    });
  }

  /** Builds the encoders now (at start-up), so the first request does not wait for them. */
  warm(encodings: readonly Encoding[]): Promise<void> {
    if (encodings.length === 0) return Promise.resolve();
    return this.send({ warm: [...new Set(encodings)] }).then(() => undefined);
  }

  /** Total tokens of `texts` in `enc`: remembered counts, and the worker's for the rest. */
  count(enc: Encoding, texts: readonly string[]): Promise<number> {
    let known = 0;
    let unknown: string[] | undefined;
    for (const t of texts) {
      if (t.length === 0) continue;
      const n = this.memo.get(enc, t);
      if (n !== undefined) known += n;
      else (unknown ??= []).push(t);
    }
    if (unknown === undefined) return Promise.resolve(known);
    const asked = unknown;
    return this.send({ enc, texts: asked }).then((ns) => {
      let total = known;
      for (let i = 0; i < asked.length; i++) {
        const n = ns[i] ?? 0;
        this.memo.set(enc, asked[i] ?? '', n);
        total += n;
      }
      return total;
    });
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }
}
