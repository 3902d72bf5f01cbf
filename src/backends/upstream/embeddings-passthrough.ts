/**
 * Forwarding an upstream's embeddings answer as the bytes it sent, when they already are what the
 * gateway would send: parsing 16 × 1536 floats and printing them again cost about 6 ms of CPU per
 * request (a bare proxy spends under 1 ms on the whole request), so this is what makes embeddings
 * through the gateway cost about what they cost through a plain proxy.
 *
 * The answer is checked without building the vectors. Every `"embedding": [...]` (or `"…"`) value
 * is cut out and replaced by its ordinal, and the small remaining skeleton is parsed as JSON: so
 * everything outside the vectors is fully validated (object/list markers, one item per input, in
 * index order, numeric usage). The vectors themselves are checked for their delimiters: a float
 * array holds no string, object or nested array, a base64 string has no escapes and every one has
 * the same length. The start of the first vector (its first 4 KiB) is checked against the JSON
 * number grammar or the base64 alphabet, so an upstream that writes NaN, garbage or another
 * encoding is caught. What is not checked is the grammar of the rest of the vectors (a stray
 * `1..2` in vector 7 would reach the client as the upstream sent it); checking all of it costs as
 * much as the whole request through a bare proxy.
 *
 * Anything unexpected (another format than asked, unsorted items, missing usage, nested arrays, …)
 * answers undefined, and the caller takes the full parse-and-normalise path, which converts,
 * sorts or reports the precise problem.
 */
import { RawEmbeddingResponse } from '../../protocol/embeddings/schema.ts';
import { bodyPool } from './body-pool.ts';

/** Bytes sent: back to the pool that lent them (JsonCall takes large answers' buffers from it). */
const recycle = (bytes: Buffer<ArrayBuffer>): void => bodyPool.give(bytes);

const KEY = Buffer.from('"embedding"');
const QUOTE = 0x22;
const OPEN = 0x5b;
const CLOSE = 0x5d;
const BRACE_OPEN = 0x7b;
const BRACE_CLOSE = 0x7d;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

/** One JSON number, then `, number` any number of times (the inside of a float array). */
const NUMBERS = /^\s*-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?\s*(?:,\s*-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?\s*)*$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** How much of the first vector is checked character by character. */
const SAMPLE = 4096;

/** The first SAMPLE bytes of a float array's inside, cut after its last whole number. */
function sample(b: Buffer, from: number, to: number): string {
  if (to - from <= SAMPLE) return b.toString('latin1', from, to);
  const cut = b.lastIndexOf(0x2c, from + SAMPLE);
  return b.toString('latin1', from, cut > from ? cut : to);
}

function isWs(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipWs(b: Buffer, i: number): number {
  while (i < b.length && isWs(b[i])) i++;
  return i;
}

/**
 * Whether `b[from, to)` contains byte `c` (a native memchr, not a JS loop), searching only there:
 * a search from `from` to wherever `c` next stands ran to the end of the answer for a byte that is
 * nowhere in it (a backslash, once per base64 vector: ~1.5 MB scanned per 16-vector answer).
 */
function has(b: Buffer, c: number, from: number, to: number): boolean {
  return to > from && b.subarray(from, to).indexOf(c) >= 0;
}

/** The skeleton's ordinals as bytes, the first 4096 made once each. */
const ORDINALS: Buffer[] = [];
function ordinal(n: number): Buffer {
  return n < 4096 ? (ORDINALS[n] ??= Buffer.from(String(n))) : Buffer.from(String(n));
}

interface Skeleton {
  object?: unknown;
  model?: unknown;
  data?: unknown;
  usage?: { prompt_tokens?: unknown; total_tokens?: unknown } | null;
}

/**
 * The answer as a RawEmbeddingResponse when `bytes` is a well-formed embeddings list of `inputs`
 * vectors in `format`, in order; otherwise undefined (take the full path).
 */
export function sniffEmbeddings(bytes: Buffer<ArrayBuffer>, format: 'float' | 'base64', inputs: number): RawEmbeddingResponse | undefined {
  const parts: Buffer[] = [];
  let copied = 0;
  let pos = 0;
  let n = 0;
  let b64Length = -1;
  for (;;) {
    const k = bytes.indexOf(KEY, pos);
    if (k < 0) break;
    const colon = skipWs(bytes, k + KEY.length);
    // `"object":"embedding"` also matches: only a key (followed by a colon) starts a vector
    if (bytes[colon] !== COLON) {
      pos = k + KEY.length;
      continue;
    }
    // more vectors than inputs: not the answer asked for (and nothing more to scan)
    if (n >= inputs) return undefined;
    const start = skipWs(bytes, colon + 1);
    let end: number;
    if (format === 'float') {
      if (bytes[start] !== OPEN) return undefined;
      end = bytes.indexOf(CLOSE, start + 1);
      if (end < 0) return undefined;
      if (has(bytes, OPEN, start + 1, end) || has(bytes, QUOTE, start + 1, end) || has(bytes, BRACE_OPEN, start + 1, end) || has(bytes, BRACE_CLOSE, start + 1, end)) {
        return undefined;
      }
      if (n === 0 && !NUMBERS.test(sample(bytes, start + 1, end))) return undefined;
    } else {
      if (bytes[start] !== QUOTE) return undefined;
      end = bytes.indexOf(QUOTE, start + 1);
      if (end < 0 || has(bytes, BACKSLASH, start + 1, end)) return undefined;
      const len = end - start - 1;
      // one request's vectors share a dimension, so every string has the first one's length
      if (b64Length === -1) {
        // whole float32 values: 4 bytes each, so the decoded length (3 bytes per 4 chars, less the
        // padding) must be a multiple of 4
        const pad = bytes[end - 1] === 0x3d ? (bytes[end - 2] === 0x3d ? 2 : 1) : 0;
        if (len % 4 !== 0 || len === 0 || ((len / 4) * 3 - pad) % 4 !== 0 || !BASE64.test(bytes.toString('latin1', start + 1, Math.min(end, start + 1 + SAMPLE)))) {
          return undefined;
        }
        b64Length = len;
      } else if (len !== b64Length) {
        return undefined;
      }
    }
    parts.push(bytes.subarray(copied, start), ordinal(n));
    copied = end + 1;
    pos = end + 1;
    n++;
  }
  if (n !== inputs) return undefined;
  parts.push(bytes.subarray(copied));
  let sk: Skeleton;
  try {
    sk = JSON.parse(Buffer.concat(parts).toString('utf8')) as Skeleton;
  } catch {
    return undefined;
  }
  if (typeof sk !== 'object' || sk === null || Array.isArray(sk) || sk.object !== 'list' || !Array.isArray(sk.data) || sk.data.length !== n) return undefined;
  for (let i = 0; i < n; i++) {
    const d = sk.data[i] as { object?: unknown; index?: unknown; embedding?: unknown } | null;
    if (typeof d !== 'object' || d === null || d.object !== 'embedding' || d.index !== i || d.embedding !== i) return undefined;
  }
  const u = sk.usage;
  if (typeof u !== 'object' || u === null || !isCount(u.prompt_tokens) || !isCount(u.total_tokens)) return undefined;
  return new RawEmbeddingResponse(bytes, typeof sk.model === 'string' ? sk.model : '', { prompt_tokens: u.prompt_tokens, total_tokens: u.total_tokens }, recycle);
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0;
}
