/**
 * A minimal GGUF (v3) writer, and a tiny llama-architecture model built with it, so the
 * llama-server integration test needs no download: random F32 weights (seeded, so every run
 * writes the same file), a small SentencePiece ("llama") vocabulary with unique token strings,
 * byte-fallback tokens and a ChatML chat template. It produces gibberish, which is all a test of
 * the server's protocol needs; a GBNF grammar keeps the gibberish to clean characters.
 *
 * GGUF layout: "GGUF", version u32, tensor count u64, metadata count u64, metadata (key string,
 * value type u32, value), tensor infos (name, n_dims u32, dims u64[] innermost first, type u32,
 * offset u64 into the data section), padding to `general.alignment`, tensor data (each aligned).
 */
import { writeFileSync } from 'node:fs';
import { mulberry32 } from './prng.ts';

/** GGUF metadata value types */
const GgufType = { UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9 } as const;

const GGML_TYPE_F32 = 0;
const ALIGNMENT = 32;

export type GgufValue =
  | { type: 'u32'; value: number }
  | { type: 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'string[]'; value: readonly string[] }
  | { type: 'f32[]'; value: readonly number[] }
  | { type: 'i32[]'; value: readonly number[] };

export interface GgufTensor {
  name: string;
  /** ggml order: innermost (contiguous) dimension first */
  dims: readonly number[];
  data: Float32Array;
}

class Writer {
  private chunks: Buffer[] = [];
  size = 0;

  private push(b: Buffer): void {
    this.chunks.push(b);
    this.size += b.length;
  }

  u32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(n);
    this.push(b);
  }

  i32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(n);
    this.push(b);
  }

  u64(n: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(n));
    this.push(b);
  }

  f32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(n);
    this.push(b);
  }

  str(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }

  bytes(b: Buffer): void {
    this.push(b);
  }

  pad(alignment: number): void {
    const rem = this.size % alignment;
    if (rem !== 0) this.push(Buffer.alloc(alignment - rem));
  }

  value(v: GgufValue): void {
    switch (v.type) {
      case 'u32':
        this.u32(GgufType.UINT32);
        this.u32(v.value);
        return;
      case 'f32':
        this.u32(GgufType.FLOAT32);
        this.f32(v.value);
        return;
      case 'bool':
        this.u32(GgufType.BOOL);
        this.push(Buffer.from([v.value ? 1 : 0]));
        return;
      case 'string':
        this.u32(GgufType.STRING);
        this.str(v.value);
        return;
      case 'string[]':
        this.u32(GgufType.ARRAY);
        this.u32(GgufType.STRING);
        this.u64(v.value.length);
        for (const s of v.value) this.str(s);
        return;
      case 'f32[]':
        this.u32(GgufType.ARRAY);
        this.u32(GgufType.FLOAT32);
        this.u64(v.value.length);
        for (const x of v.value) this.f32(x);
        return;
      case 'i32[]':
        this.u32(GgufType.ARRAY);
        this.u32(GgufType.INT32);
        this.u64(v.value.length);
        for (const x of v.value) this.i32(x);
        return;
      default: {
        const never: never = v;
        throw new Error(`unknown GGUF value ${JSON.stringify(never)}`);
      }
    }
  }

  buffer(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

/** Serializes a GGUF v3 file. */
export function encodeGguf(metadata: ReadonlyArray<[string, GgufValue]>, tensors: readonly GgufTensor[]): Buffer {
  const w = new Writer();
  w.bytes(Buffer.from('GGUF', 'ascii'));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(metadata.length + 1);
  w.str('general.alignment');
  w.value({ type: 'u32', value: ALIGNMENT });
  for (const [k, v] of metadata) {
    w.str(k);
    w.value(v);
  }
  let offset = 0;
  const offsets: number[] = [];
  for (const t of tensors) {
    const n = t.dims.reduce((a, b) => a * b, 1);
    if (n !== t.data.length) throw new Error(`tensor ${t.name}: dims ${t.dims.join('x')} do not match ${t.data.length} values`);
    w.str(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(GGML_TYPE_F32);
    w.u64(offset);
    offsets.push(offset);
    offset += Math.ceil((n * 4) / ALIGNMENT) * ALIGNMENT;
  }
  w.pad(ALIGNMENT);
  for (const t of tensors) {
    w.bytes(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    w.pad(ALIGNMENT);
  }
  return w.buffer();
}

export interface TinyLlamaOptions {
  nEmbd?: number;
  nLayer?: number;
  nHead?: number;
  nFf?: number;
  contextLength?: number;
  seed?: number;
  chatTemplate?: string;
}

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** SPM token types */
const NORMAL = 1;
const UNKNOWN = 2;
const CONTROL = 3;
const BYTE = 6;

/** The vocabulary: <unk> <s> </s>, ChatML markers, 256 byte tokens, then "▁", letters and words. */
export function tinyVocab(): { tokens: string[]; scores: number[]; types: number[] } {
  const tokens: string[] = [];
  const scores: number[] = [];
  const types: number[] = [];
  const add = (t: string, score: number, type: number): void => {
    tokens.push(t);
    scores.push(score);
    types.push(type);
  };
  add('<unk>', 0, UNKNOWN);
  add('<s>', 0, CONTROL);
  add('</s>', 0, CONTROL);
  add('<|im_start|>', 0, CONTROL);
  add('<|im_end|>', 0, CONTROL);
  for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, 0, BYTE);
  const pieces = ['▁'];
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  for (const c of letters) pieces.push(c, `▁${c}`);
  for (const w of ['hello', 'world', 'the', 'cat', 'sat', 'on', 'mat', 'user', 'assistant', 'system', 'hi', 'there', 'llama', 'server']) {
    pieces.push(w, `▁${w}`);
  }
  const seen = new Set(tokens);
  let score = -1;
  for (const p of pieces) {
    if (seen.has(p)) continue;
    seen.add(p);
    // longer pieces win merges in the SPM tokenizer
    add(p, [...p].length * 10 + score, NORMAL);
    score -= 0.001;
  }
  if (new Set(tokens).size !== tokens.length) throw new Error('duplicate token strings');
  return { tokens, scores, types };
}

/** Builds the tiny model; returns the GGUF bytes. */
export function tinyLlamaGguf(opts: TinyLlamaOptions = {}): Buffer {
  const nEmbd = opts.nEmbd ?? 32;
  const nLayer = opts.nLayer ?? 2;
  const nHead = opts.nHead ?? 2;
  const nFf = opts.nFf ?? 64;
  const ctx = opts.contextLength ?? 512;
  const rand = mulberry32(opts.seed ?? 42);
  const vocab = tinyVocab();
  const nVocab = vocab.tokens.length;

  const random = (n: number, scale: number): Float32Array => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = (rand() * 2 - 1) * scale;
    return a;
  };
  const ones = (n: number): Float32Array => new Float32Array(n).fill(1);
  const tensors: GgufTensor[] = [
    { name: 'token_embd.weight', dims: [nEmbd, nVocab], data: random(nEmbd * nVocab, 0.5) },
    { name: 'output_norm.weight', dims: [nEmbd], data: ones(nEmbd) },
    { name: 'output.weight', dims: [nEmbd, nVocab], data: random(nEmbd * nVocab, 0.5) },
  ];
  for (let i = 0; i < nLayer; i++) {
    const s = 1 / Math.sqrt(nEmbd);
    tensors.push(
      { name: `blk.${i}.attn_norm.weight`, dims: [nEmbd], data: ones(nEmbd) },
      { name: `blk.${i}.attn_q.weight`, dims: [nEmbd, nEmbd], data: random(nEmbd * nEmbd, s) },
      { name: `blk.${i}.attn_k.weight`, dims: [nEmbd, nEmbd], data: random(nEmbd * nEmbd, s) },
      { name: `blk.${i}.attn_v.weight`, dims: [nEmbd, nEmbd], data: random(nEmbd * nEmbd, s) },
      { name: `blk.${i}.attn_output.weight`, dims: [nEmbd, nEmbd], data: random(nEmbd * nEmbd, s) },
      { name: `blk.${i}.ffn_norm.weight`, dims: [nEmbd], data: ones(nEmbd) },
      { name: `blk.${i}.ffn_gate.weight`, dims: [nEmbd, nFf], data: random(nEmbd * nFf, s) },
      { name: `blk.${i}.ffn_up.weight`, dims: [nEmbd, nFf], data: random(nEmbd * nFf, s) },
      { name: `blk.${i}.ffn_down.weight`, dims: [nFf, nEmbd], data: random(nFf * nEmbd, 1 / Math.sqrt(nFf)) },
    );
  }

  const metadata: Array<[string, GgufValue]> = [
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['general.name', { type: 'string', value: 'switchyard-tiny-llama' }],
    ['general.file_type', { type: 'u32', value: 0 }], // all F32
    ['llama.context_length', { type: 'u32', value: ctx }],
    ['llama.embedding_length', { type: 'u32', value: nEmbd }],
    ['llama.block_count', { type: 'u32', value: nLayer }],
    ['llama.feed_forward_length', { type: 'u32', value: nFf }],
    ['llama.attention.head_count', { type: 'u32', value: nHead }],
    ['llama.attention.head_count_kv', { type: 'u32', value: nHead }],
    ['llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: 1e-5 }],
    ['llama.rope.dimension_count', { type: 'u32', value: nEmbd / nHead }],
    ['llama.rope.freq_base', { type: 'f32', value: 10000 }],
    ['llama.vocab_size', { type: 'u32', value: nVocab }],
    ['tokenizer.ggml.model', { type: 'string', value: 'llama' }],
    ['tokenizer.ggml.tokens', { type: 'string[]', value: vocab.tokens }],
    ['tokenizer.ggml.scores', { type: 'f32[]', value: vocab.scores }],
    ['tokenizer.ggml.token_type', { type: 'i32[]', value: vocab.types }],
    ['tokenizer.ggml.unknown_token_id', { type: 'u32', value: 0 }],
    ['tokenizer.ggml.bos_token_id', { type: 'u32', value: 1 }],
    ['tokenizer.ggml.eos_token_id', { type: 'u32', value: 2 }],
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: true }],
    ['tokenizer.ggml.add_eos_token', { type: 'bool', value: false }],
    ['tokenizer.chat_template', { type: 'string', value: opts.chatTemplate ?? CHATML_TEMPLATE }],
  ];
  return encodeGguf(metadata, tensors);
}

export function writeTinyLlama(path: string, opts: TinyLlamaOptions = {}): void {
  writeFileSync(path, tinyLlamaGguf(opts));
}
