/**
 * Reads an ONNX file's model-level fields (IR version, opsets, producer, metadata_props) straight
 * from the protobuf wire format, skipping over the graph by file position: a multi-gigabyte model
 * costs a few small reads. Field numbers are those of onnx.proto's ModelProto.
 */
import { open } from 'node:fs/promises';

export interface ModelHeader {
  irVersion?: number;
  producerName?: string;
  producerVersion?: string;
  domain?: string;
  modelVersion?: number;
  docString?: string;
  opsets: Array<{ domain: string; version: number }>;
  metadata: Array<{ key: string; value: string }>;
}

/** Fields larger than this are skipped rather than read (a doc_string could be anything). */
const MAX_FIELD_BYTES = 1 << 20;

class Cursor {
  pos = 0;
  constructor(private readonly buf: Uint8Array) {}
  get done(): boolean {
    return this.pos >= this.buf.length;
  }
  varint(): number {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const b = this.buf[this.pos++];
      if (b === undefined) throw new Error('truncated varint');
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
    }
    throw new Error('varint too long');
  }
  bytes(n: number): Uint8Array {
    if (this.pos + n > this.buf.length) throw new Error('truncated field');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.pos += this.varint();
    else if (wire === 5) this.pos += 4;
    else throw new Error(`unsupported wire type ${wire}`);
  }
}

const utf8 = new TextDecoder();

/** A message of string (wire 2) and integer (wire 0) fields → field number → last value. */
function fields(buf: Uint8Array): Map<number, string | number> {
  const c = new Cursor(buf);
  const out = new Map<number, string | number>();
  while (!c.done) {
    const tag = c.varint();
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (wire === 0) out.set(field, c.varint());
    else if (wire === 2) out.set(field, utf8.decode(c.bytes(c.varint())));
    else c.skip(wire);
  }
  return out;
}

const str = (v: string | number | undefined): string => (typeof v === 'string' ? v : '');

/** Signed int64 as written by protobuf (two's complement in a 10-byte varint) → number. */
const int64 = (v: number): number => (v >= 2 ** 63 ? v - 2 ** 64 : v);

export async function readModelHeader(path: string): Promise<ModelHeader> {
  try {
    return await readHeader(path);
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    if ((err as NodeJS.ErrnoException).code !== undefined || msg.startsWith('not an ONNX model')) throw err;
    throw new Error(`not an ONNX model (invalid protobuf: ${msg})`);
  }
}

async function readHeader(path: string): Promise<ModelHeader> {
  const fh = await open(path, 'r');
  try {
    const size = (await fh.stat()).size;
    const head: ModelHeader = { opsets: [], metadata: [] };
    const small = Buffer.alloc(20);
    let pos = 0;
    while (pos < size) {
      const { bytesRead } = await fh.read(small, 0, small.length, pos);
      const c = new Cursor(small.subarray(0, bytesRead));
      const tag = c.varint();
      const field = Math.floor(tag / 8);
      const wire = tag % 8;
      if (field === 0) throw new Error('not an ONNX model (invalid protobuf)');
      if (wire === 0) {
        const v = c.varint();
        if (field === 1) head.irVersion = v;
        else if (field === 5) head.modelVersion = int64(v);
        pos += c.pos;
        continue;
      }
      if (wire !== 2) {
        c.skip(wire);
        pos += c.pos;
        continue;
      }
      const len = c.varint();
      const start = pos + c.pos;
      if (start + len > size) throw new Error('not an ONNX model (a field runs past the end of the file)');
      pos = start + len;
      // 7 is the graph (the bulk of the file), 20 training_info, 25 functions: skipped.
      if (![2, 3, 4, 6, 8, 14].includes(field) || len > MAX_FIELD_BYTES) continue;
      const buf = Buffer.alloc(len);
      await fh.read(buf, 0, len, start);
      if (field === 8) {
        const f = fields(buf);
        head.opsets.push({ domain: str(f.get(1)), version: Number(f.get(2) ?? 0) });
      } else if (field === 14) {
        const f = fields(buf);
        head.metadata.push({ key: str(f.get(1)), value: str(f.get(2)) });
      } else {
        const s = utf8.decode(buf);
        if (field === 2) head.producerName = s;
        else if (field === 3) head.producerVersion = s;
        else if (field === 4) head.domain = s;
        else head.docString = s;
      }
    }
    return head;
  } finally {
    await fh.close();
  }
}
