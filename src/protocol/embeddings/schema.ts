/**
 * Embeddings. Backends may return each vector as a float array or as base64 (little-endian
 * float32); the HTTP layer always answers in the `encoding_format` the client asked for.
 */
import { z } from 'zod';

const tokenArray = z.array(z.int().min(0)).min(1);

export const MAX_EMBEDDING_INPUTS = 2048;
export const MAX_EMBEDDING_DIMENSIONS = 65536;

export const embeddingRequestSchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([
    z.string().min(1, 'input must not be an empty string'),
    z.array(z.string().min(1, 'input must not contain empty strings')).min(1).max(MAX_EMBEDDING_INPUTS),
    tokenArray,
    z.array(tokenArray).min(1).max(MAX_EMBEDDING_INPUTS),
  ]),
  encoding_format: z.enum(['float', 'base64']).optional(),
  /** Bounded: no embedding model has more, and a backend may allocate dimensions × inputs floats. */
  dimensions: z.int().min(1).max(MAX_EMBEDDING_DIMENSIONS).optional(),
  user: z.string().optional(),
});

export type EmbeddingRequest = z.infer<typeof embeddingRequestSchema>;

export interface Embedding {
  object: 'embedding';
  index: number;
  /** float values, or base64 of little-endian float32 */
  embedding: number[] | string;
}

export interface EmbeddingResponse {
  object: 'list';
  data: Embedding[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

/**
 * An upstream's answer forwarded as the bytes it sent, already in the format asked for and checked
 * (backends/upstream/embeddings-passthrough.ts); `usage` and `model` were read from it.
 */
export class RawEmbeddingResponse {
  /** responses that will send these bytes and have not yet finished (sent) */
  private senders = 1;

  constructor(
    readonly bytes: Buffer<ArrayBuffer>,
    readonly model: string,
    readonly usage: { prompt_tokens: number; total_tokens: number },
    /** where the bytes go once no response needs them (a pool lending buffers) */
    private readonly recycle?: (bytes: Buffer<ArrayBuffer>) => void,
  ) {}

  /** One more response will send these bytes (a coalesced request sharing the answer). */
  share(): void {
    this.senders++;
  }

  /**
   * A response that sent these bytes handed them all to the OS: the last one recycles them. A
   * response that never finishes (its client went away) never calls it, and the bytes are then
   * left to the garbage collector.
   */
  sent(): void {
    if (--this.senders === 0) this.recycle?.(this.bytes);
  }
}

/** What a backend answers: parsed vectors, or checked upstream bytes to forward as they are. */
export type EmbeddingAnswer = EmbeddingResponse | RawEmbeddingResponse;

/** Number of inputs in a request (a flat token array is one input). */
export function inputCount(input: EmbeddingRequest['input']): number {
  if (typeof input === 'string') return 1;
  if (input.length > 0 && typeof input[0] === 'number') return 1;
  return input.length;
}

export function floatsToBase64(v: ReadonlyArray<number>): string {
  const f = new Float32Array(v.length);
  for (let i = 0; i < v.length; i++) f[i] = v[i] as number;
  // Float32Array uses the platform byte order; every platform Node supports is little-endian,
  // but make it explicit rather than assumed.
  if (!LITTLE_ENDIAN) {
    const dv = new DataView(f.buffer);
    for (let i = 0; i < v.length; i++) dv.setFloat32(i * 4, v[i] as number, true);
  }
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength).toString('base64');
}

export function base64ToFloats(b64: string): number[] {
  const buf = Buffer.from(b64, 'base64');
  if (buf.byteLength % 4 !== 0) throw new Error('base64 embedding is not a whole number of float32 values');
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const out = new Array<number>(buf.byteLength / 4);
  for (let i = 0; i < out.length; i++) out[i] = dv.getFloat32(i * 4, true);
  return out;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Puts every vector of `res` in the format the client asked for (default float). */
export function encodeEmbeddings(res: EmbeddingResponse, format: 'float' | 'base64' | undefined): EmbeddingResponse {
  const want = format ?? 'float';
  for (const d of res.data) {
    if (want === 'base64' && typeof d.embedding !== 'string') d.embedding = floatsToBase64(d.embedding);
    else if (want === 'float' && typeof d.embedding === 'string') d.embedding = base64ToFloats(d.embedding);
  }
  return res;
}
